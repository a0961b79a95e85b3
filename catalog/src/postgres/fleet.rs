//! The fleet role on PostgreSQL (`crate::Fleet`): instances, their leases
//! and heartbeats, compaction claims, and the catalog's own copy for a backup.

use super::*;
use crate::{FleetMember, FlushRequest};

crate::shared::impl_fleet!(PgCatalog, {
    async fn copy_into(&self, _path: &std::path::Path) -> Result<bool> {
        Ok(false)
    }

    async fn claim_compaction(
        &self,
        survey: &SurveyId,
        partition: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<CompactionClaim> {
        let now = now_millis();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO compaction_claims (survey_id, partition_date) VALUES ($1, $2)
             ON CONFLICT (survey_id, partition_date) DO NOTHING",
        )
        .bind(survey.as_str())
        .bind(partition)
        .execute(&mut *tx)
        .await?;
        // SKIP LOCKED: a partition another instance is claiming right now is simply not ours.
        let claimed = sqlx::query(
            "UPDATE compaction_claims SET owner = $3, lease_until = $4
             WHERE (survey_id, partition_date) IN (
                 SELECT survey_id, partition_date FROM compaction_claims
                 WHERE survey_id = $1 AND partition_date = $2
                   AND (owner IS NULL OR owner = $3 OR lease_until < $5)
                 FOR UPDATE SKIP LOCKED)",
        )
        .bind(survey.as_str())
        .bind(partition)
        .bind(owner)
        .bind(now.saturating_add(lease_ms))
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if claimed == 1 {
            tx.commit().await?;
            return Ok(CompactionClaim::Claimed);
        }
        let holder: Option<String> = sqlx::query_scalar(
            "SELECT owner FROM compaction_claims WHERE survey_id = $1 AND partition_date = $2",
        )
        .bind(survey.as_str())
        .bind(partition)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        // No owner: it was being claimed by another instance a moment ago.
        Ok(CompactionClaim::HeldBy(holder.unwrap_or_default()))
    }

    /// Deleted rows stay in PostgreSQL's heap pages as dead tuples until a vacuum prunes
    /// them; this vacuums the tables an erasure deletes from, so the rows' space is reclaimed
    /// now rather than at autovacuum's leisure. What the server's own write-ahead log and
    /// backups retain is the operator's to bound (docs/deploy.md).
    async fn scrub(&self) -> Result<()> {
        // Every table `erase_session_rows` deletes a session's rows from or rewrites: the
        // lookup row (its scores and reasons) and the cohort places (its features' cells) hold
        // the session as much as its `sessions` rows do.
        self.vacuum(
            "VACUUM sessions, session_scores, reference_summaries, cohort_points, scoring_runs",
        )
        .await
    }

    /// After a run: vacuums the tables a run writes (the lookup rows' old versions, the scores,
    /// the cohort places), so that the integrator's first lookups do not each prune pages and
    /// set hint bits on the tuples the run wrote, and autovacuum does not do it beside them
    /// (benches/README.md, `scoring_run`: the first quarter of lookups after a run was the
    /// slowest on PostgreSQL). A vacuum only visits the pages changed since the last one (the
    /// visibility map), so an incremental run pays for what it wrote. SKIP_LOCKED: a table
    /// another run is vacuuming is left to it. ANALYZE: the next run's plan read joins the
    /// survey's sessions and lookup rows, and a plan made on statistics from before a million
    /// rows arrived is a nested loop of a million probes (autovacuum may be off, or behind).
    async fn checkpoint(&self) -> Result<bool> {
        self.vacuum(
            "VACUUM (ANALYZE, SKIP_LOCKED) sessions, reference_summaries, session_scores, \
             cohort_points",
        )
        .await?;
        Ok(true)
    }
});
