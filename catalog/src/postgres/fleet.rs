//! The fleet role on PostgreSQL (`crate::Fleet`): instances, their leases
//! and heartbeats, compaction claims, and the catalog's own copy for a backup.

use super::*;

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
        sqlx::raw_sql("VACUUM sessions, session_scores, scoring_runs")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Nothing to fold: PostgreSQL checkpoints on its own, and autovacuum analyses the
    /// tables a large run wrote to.
    async fn checkpoint(&self) -> Result<bool> {
        Ok(true)
    }
});
