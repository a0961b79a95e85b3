//! What a table lets go: a checkpoint every `CHECKPOINT_INTERVAL` commits and the commit
//! files it covers once they are past the retention; data files no snapshot needs any more.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use crate::LakeError;
use deltalake_core::DeltaTable;

use super::Table;

impl Table {
    /// Paths (from the lake's root) of the files commits removed that the log still remembers
    /// (its tombstones, kept for the vacuum's retention).
    pub async fn removed_paths(&self) -> Result<HashSet<String>, LakeError> {
        use futures::TryStreamExt;
        let mut table = self.state.lock().await;
        table.update_state().await?;
        let prefix = format!("{}/", self.kind.as_str());
        let tombstones: Vec<String> = table
            .snapshot()?
            .all_tombstones(self.log_store.as_ref())
            .map_ok(|tombstone| format!("{prefix}{}", tombstone.path()))
            .try_collect()
            .await?;
        Ok(tombstones.into_iter().collect())
    }

    /// Deletes the data files no snapshot of the last `retention` needs: files removed by a
    /// commit at least that long ago, and files no commit ever added (uploads of writers that
    /// died before their commit) at least that old. Returns how many were deleted.
    pub async fn vacuum(&self, retention: std::time::Duration) -> Result<usize, LakeError> {
        let table = {
            let mut table = self.state.lock().await;
            table.update_state().await?;
            table.clone()
        };
        let retention = chrono::Duration::from_std(retention)
            .map_err(|_| LakeError::RetentionOutOfRange(retention))?;
        let (_, metrics) = table
            .vacuum()
            .with_retention_period(retention)
            .with_enforce_retention_duration(false)
            .with_mode(deltalake_core::operations::vacuum::VacuumMode::Full)
            .await?;
        Ok(metrics.files_deleted.len())
    }

    /// Writes a checkpoint at `version`, syncs it, then deletes commit files older than both
    /// it and the log retention.
    pub(super) async fn checkpoint(
        &self,
        table: &DeltaTable,
        version: u64,
    ) -> Result<(), LakeError> {
        deltalake_core::checkpoints::create_checkpoint(table, None).await?;
        self.store
            .sync_delta_checkpoint(self.kind.as_str(), version)
            .await?;
        let retention = self.log_retention_ms.load(Ordering::Relaxed);
        let cutoff = chrono::Utc::now()
            .timestamp_millis()
            .saturating_sub(i64::try_from(retention).unwrap_or(i64::MAX));
        deltalake_core::checkpoints::cleanup_expired_logs_for(
            version,
            self.log_store.as_ref(),
            cutoff,
            None,
        )
        .await?;
        Ok(())
    }
}
