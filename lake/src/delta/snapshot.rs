//! Reading a table: the live files of its newest snapshot or of an older version, when a
//! version was committed, and the application transactions' versions.

use std::collections::HashMap;
use std::sync::Arc;

use crate::LakeError;
use deltalake_core::DeltaTable;

use super::{AsOf, LiveFile, Table, received_range};

impl Table {
    /// Loads commits made since the last load (by this instance or any other).
    pub async fn refresh(&self) -> Result<u64, LakeError> {
        let mut table = self.state.lock().await;
        table.update_state().await?;
        Ok(table.version().unwrap_or(0))
    }

    /// The live files of the newest snapshot (of one survey, or all), in commit order.
    pub async fn live_files(&self, survey: Option<&str>) -> Result<Vec<LiveFile>, LakeError> {
        let mut table = self.state.lock().await;
        table.update_state().await?;
        self.files_of(&table, survey)
    }

    /// The paths of [`Table::live_files`], for membership tests.
    pub async fn live_paths(
        &self,
        survey: Option<&str>,
    ) -> Result<std::collections::HashSet<String>, LakeError> {
        Ok(self
            .live_files(survey)
            .await?
            .into_iter()
            .map(|file| file.path)
            .collect())
    }

    /// The version the application `app_id` last committed, after loading new commits.
    pub async fn app_version(&self, app_id: &str) -> Result<Option<i64>, LakeError> {
        let mut table = self.state.lock().await;
        table.update_state().await?;
        self.read_app_version(&table, app_id).await
    }

    /// `app_id`'s version in the loaded snapshot, read from the log (a replay of the log
    /// segment since the last checkpoint) and remembered.
    pub(super) async fn read_app_version(
        &self,
        table: &DeltaTable,
        app_id: &str,
    ) -> Result<Option<i64>, LakeError> {
        let version = table
            .snapshot()?
            .transaction_version(self.log_store.as_ref(), app_id)
            .await?;
        let mut known = self.app_versions();
        match version {
            Some(version) => known.insert(app_id.to_owned(), version),
            None => known.remove(app_id),
        };
        Ok(version)
    }

    pub(super) fn app_versions(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.app_versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live files as of a version or a time (the newest version committed at or before
    /// it), for `telltale sql --as-of`.
    pub async fn files_as_of(&self, at: AsOf) -> Result<(u64, Vec<LiveFile>), LakeError> {
        let mut table = DeltaTable::new(Arc::clone(&self.log_store));
        match at {
            AsOf::Version(version) => table.load_version(version).await?,
            AsOf::Time(time) => table.load_with_datetime(time).await?,
        }
        let version = table.version().unwrap_or(0);
        Ok((version, self.files_of(&table, None)?))
    }

    /// When `version` was committed (its commit file's time, as Delta time travel counts it).
    pub async fn version_time(
        &self,
        version: u64,
    ) -> Result<chrono::DateTime<chrono::Utc>, LakeError> {
        let mut table = DeltaTable::new(Arc::clone(&self.log_store));
        table.load_version(version).await?;
        let millis = table
            .snapshot()?
            .version_timestamp(version)
            .ok_or(LakeError::NoCommitTime(version))?;
        chrono::DateTime::from_timestamp_millis(millis)
            .ok_or(LakeError::CommitTimeOutOfRange(millis))
    }

    /// Whether the table's first commit is later than `time`.
    pub async fn created_after(
        &self,
        time: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, LakeError> {
        Ok(self.version_time(0).await? > time)
    }

    pub(super) fn files_of(
        &self,
        table: &DeltaTable,
        survey: Option<&str>,
    ) -> Result<Vec<LiveFile>, LakeError> {
        let prefix = format!("{}/", self.kind.as_str());
        let mut files = Vec::new();
        for file in table.snapshot()?.log_data() {
            let partitions = file.partition_values_map();
            let survey_id = partitions
                .get("survey_id")
                .cloned()
                .flatten()
                .unwrap_or_default();
            if survey.is_some_and(|wanted| wanted != survey_id) {
                continue;
            }
            files.push(LiveFile {
                path: format!("{prefix}{}", file.path()),
                survey_id,
                date: partitions.get("date").cloned().flatten(),
                size: u64::try_from(file.size()).unwrap_or(0),
                rows: file.num_records().map(|rows| rows as u64),
                added_at: file.modification_time(),
                received: file.stats().as_deref().and_then(received_range),
            });
        }
        // Commit order, as near as the log tells it: a snapshot lists files in no given order.
        files.sort_by(|a, b| (a.added_at, &a.path).cmp(&(b.added_at, &b.path)));
        Ok(files)
    }
}
