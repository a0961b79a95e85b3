//! The fleet role on SQLite (`crate::Fleet`): instances, their leases
//! and heartbeats, compaction claims, and the catalog's own copy for a backup.

use super::*;
use crate::{FleetMember, FlushRequest};

crate::shared::impl_fleet!(SqliteCatalog, {
    async fn copy_into(&self, path: &std::path::Path) -> Result<bool> {
        // One read transaction: the copy is the database as of its start, whatever the
        // server writes meanwhile; the new file holds no free pages of deleted rows.
        // (`telltale backup` refuses a folder whose path is not UTF-8.)
        let target = path.to_string_lossy();
        sqlx::query("VACUUM INTO $1")
            .bind(target.as_ref())
            .execute(&self.pool)
            .await?;
        Ok(true)
    }

    async fn claim_compaction(
        &self,
        survey: &SurveyId,
        partition: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<CompactionClaim> {
        let now = now_millis();
        // One statement; SQLite's single writer makes the check and the take one step.
        let claimed = sqlx::query(
            "INSERT INTO compaction_claims (survey_id, partition_date, owner, lease_until)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (survey_id, partition_date) DO UPDATE SET
                 owner = excluded.owner, lease_until = excluded.lease_until
             WHERE compaction_claims.owner IS NULL OR compaction_claims.owner = $3
                OR compaction_claims.lease_until < $5",
        )
        .bind(survey.as_str())
        .bind(partition)
        .bind(owner)
        .bind(now.saturating_add(lease_ms))
        .bind(now)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if claimed == 1 {
            return Ok(CompactionClaim::Claimed);
        }
        let holder: Option<String> = sqlx::query_scalar(
            "SELECT owner FROM compaction_claims WHERE survey_id = $1 AND partition_date = $2",
        )
        .bind(survey.as_str())
        .bind(partition)
        .fetch_one(&self.pool)
        .await?;
        Ok(CompactionClaim::HeldBy(holder.unwrap_or_default()))
    }

    async fn scrub(&self) -> Result<()> {
        // Frames of the SQLite write-ahead log still hold page images from before the
        // deletes; a TRUNCATE checkpoint copies the zeroed pages into the database file and
        // empties the log. It needs a moment without readers, so it is retried briefly.
        for _ in 0..50 {
            if self.checkpoint().await? {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(Error::Corrupt(
            "the catalog's write-ahead log stayed busy; not checkpointed".to_owned(),
        ))
    }

    /// After a scoring run has written a million scores, their pages sit in the write-ahead
    /// log until a checkpoint that no reader blocks, and until the log is reset every read of
    /// them goes through it (a `pread` per page instead of the memory map), which raised the
    /// lookup p99 on such a survey until the log was folded in (benches/README.md, `scoring_run`).
    async fn checkpoint(&self) -> Result<bool> {
        let row = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&self.pool)
            .await?;
        let busy: i64 = row.try_get(0)?;
        Ok(busy == 0)
    }
});
