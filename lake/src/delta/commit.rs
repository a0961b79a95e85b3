//! Writing a table: a change as one Delta commit of `add` and `remove` actions (and an
//! application transaction), tried again on a newer snapshot after a race it need not lose.
//!
//! One retry layer: this one. delta-rs's `CommitBuilder` would otherwise retry a raced commit
//! itself (15 times, with its own conflict checker) before this loop saw it; its retries are
//! off (`with_max_retries(0)`: a race fails at once), so every race comes back here, where the
//! newer snapshot is read and the two rules that make a commit safe are checked again: the
//! files it removes are all still live, and its application transaction was not applied.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::{LakeError, TableKind};
use deltalake_core::DeltaTableError;
use deltalake_core::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake_core::kernel::{Action, Add, Remove, Transaction};
use deltalake_core::protocol::{DeltaOperation, SaveMode};

use super::schema::partition_columns;
use super::{
    CHECKPOINT_INTERVAL, Change, CommitGuard, Committed, LiveFile, NewFile, Refusal, Table,
    statistics,
};

/// How many times a commit is tried after losing a race it need not lose (another writer's
/// commit that touched none of its removed files).
const MAX_ATTEMPTS: usize = 50;

impl Table {
    /// Commits `added` and the removal of `removed` (paths from the lake's root) as one Delta
    /// commit, with the application transaction `txn` if given.
    ///
    /// A commit that removes files goes ahead only while all of them are live; another
    /// writer's commit in between that leaves them live is no conflict (the commit is tried
    /// again on the newer snapshot). With `txn`, a commit whose app version was already reached
    /// commits nothing.
    #[cfg(test)]
    pub(crate) async fn commit(
        &self,
        change: Change,
        added: &[NewFile],
        removed: &[String],
        txn: Option<(&str, i64)>,
    ) -> Result<Committed, LakeError> {
        match self.commit_guarded(change, added, removed, txn, None).await {
            Ok(Ok(committed)) => Ok(committed),
            // No guard, no refusal; said as an error rather than assumed.
            Ok(Err(refusal)) => Err(LakeError::Refused(refusal.to_string())),
            Err(error) => Err(error),
        }
    }

    /// [`Table::commit`], asking `guard` (when given) after every read of the newest version
    /// and before each attempt: `Ok(Err(_))` is its refusal, nothing committed.
    pub(crate) async fn commit_guarded(
        &self,
        change: Change,
        added: &[NewFile],
        removed: &[String],
        txn: Option<(&str, i64)>,
        guard: Option<&dyn CommitGuard>,
    ) -> Result<Result<Committed, Refusal>, LakeError> {
        let started = std::time::Instant::now();
        let result = self
            .commit_attempts(change, added, removed, txn, guard)
            .await;
        let table = self.kind.as_str();
        let outcome = match &result {
            Ok(Ok(Committed::Version(_))) => "committed",
            Ok(Ok(Committed::Conflict)) => "conflict",
            Ok(Ok(Committed::AlreadyApplied)) => "already_applied",
            Ok(Err(_)) => "refused",
            Err(_) => "error",
        };
        series::LAKE_COMMIT_SECONDS
            .with(&[("table", table)])
            .record(started.elapsed());
        series::LAKE_COMMITS_TOTAL
            .with(&[("table", table), ("outcome", outcome)])
            .increment(1);
        result
    }

    async fn commit_attempts(
        &self,
        change: Change,
        added: &[NewFile],
        removed: &[String],
        txn: Option<(&str, i64)>,
        guard: Option<&dyn CommitGuard>,
    ) -> Result<Result<Committed, Refusal>, LakeError> {
        let prefix = format!("{}/", self.kind.as_str());
        let now = chrono::Utc::now().timestamp_millis();
        let data_change = change != Change::Compact;
        let mut table = self.state.lock().await;
        for _ in 0..MAX_ATTEMPTS {
            table.update_state().await?;
            if let Some((app_id, version)) = txn {
                let known = self.app_versions().get(app_id).copied();
                let done = match known {
                    Some(done) => Some(done),
                    None => self.read_app_version(&table, app_id).await?,
                };
                if done.is_some_and(|done| done >= version) {
                    return Ok(Ok(Committed::AlreadyApplied));
                }
            }
            if let Some(guard) = guard
                && let Err(refusal) = guard.admit().await
            {
                return Ok(Err(refusal));
            }
            let snapshot = table.snapshot()?;
            let mut live: HashMap<String, LiveFile> = HashMap::new();
            if !removed.is_empty() {
                let wanted: HashSet<&str> = removed.iter().map(String::as_str).collect();
                for file in self.files_of(&table, None)? {
                    if wanted.contains(file.path.as_str()) {
                        live.insert(file.path.clone(), file);
                    }
                }
                if live.len() != wanted.len() {
                    return Ok(Ok(Committed::Conflict));
                }
            }
            let mut actions = Vec::with_capacity(added.len() + removed.len() + 1);
            for path in removed {
                let file = &live[path];
                actions.push(Action::Remove(Remove {
                    path: relative(&prefix, path).to_owned(),
                    data_change,
                    deletion_timestamp: Some(now),
                    extended_file_metadata: Some(true),
                    partition_values: Some(
                        self.partition_values(&file.survey_id, file.date.as_deref()),
                    ),
                    size: i64::try_from(file.size).ok(),
                    ..Default::default()
                }));
            }
            for file in added {
                actions.push(Action::Add(Add {
                    path: relative(&prefix, &file.path).to_owned(),
                    partition_values: self.partition_values(&file.survey_id, file.date.as_deref()),
                    size: i64::try_from(file.size).unwrap_or(i64::MAX),
                    modification_time: now,
                    data_change,
                    stats: Some(statistics(file)),
                    ..Default::default()
                }));
            }
            if let Some((app_id, version)) = txn {
                actions.push(Action::Txn(Transaction::new_with_last_update(
                    app_id,
                    version,
                    Some(now),
                )));
            }
            let operation = match change {
                Change::Append => DeltaOperation::Write {
                    mode: SaveMode::Append,
                    partition_by: Some(
                        partition_columns(self.kind)
                            .iter()
                            .map(|c| (*c).to_owned())
                            .collect(),
                    ),
                    predicate: None,
                },
                Change::Erase => DeltaOperation::Delete { predicate: None },
                Change::Compact => DeltaOperation::Optimize {
                    predicate: None,
                    target_size: 0,
                },
            };
            let result = CommitBuilder::default()
                .with_max_retries(0)
                .with_actions(actions)
                .build(Some(snapshot), Arc::clone(&self.log_store), operation)
                .await;
            match result {
                Ok(finalized) => {
                    let version = finalized.version();
                    if let Some((app_id, app_version)) = txn {
                        self.app_versions().insert(app_id.to_owned(), app_version);
                    }
                    // The commit's own snapshot of the new version: no second read of the log.
                    table.state = Some(finalized.snapshot);
                    self.store
                        .sync_delta_log(self.kind.as_str(), version)
                        .await?;
                    if version % CHECKPOINT_INTERVAL == 0 {
                        self.checkpoint(&table, version).await?;
                    }
                    return Ok(Ok(Committed::Version(version)));
                }
                // Another writer's commit in between (delta-rs, told not to retry, says so
                // with `MaxCommitAttempts(0)`): look again at the newer snapshot.
                Err(DeltaTableError::Transaction {
                    source:
                        race @ (TransactionError::MaxCommitAttempts(_)
                        | TransactionError::CommitConflict(_)
                        | TransactionError::VersionAlreadyExists(_)),
                }) => {
                    tracing::debug!(table = self.kind.as_str(), %race, "delta commit raced");
                }
                Err(DeltaTableError::VersionAlreadyExists(version)) => {
                    tracing::debug!(table = self.kind.as_str(), version, "delta commit raced");
                }
                Err(error) => {
                    // It may have landed all the same: the next commit reads the log.
                    if let Some((app_id, _)) = txn {
                        self.app_versions().remove(app_id);
                    }
                    return Err(error.into());
                }
            }
        }
        Err(LakeError::Contended(MAX_ATTEMPTS))
    }

    fn partition_values(
        &self,
        survey_id: &str,
        date: Option<&str>,
    ) -> HashMap<String, Option<String>> {
        let mut values = HashMap::from([("survey_id".to_owned(), Some(survey_id.to_owned()))]);
        if self.kind == TableKind::Events {
            values.insert("date".to_owned(), date.map(str::to_owned));
        }
        values
    }
}

fn relative<'a>(prefix: &str, path: &'a str) -> &'a str {
    path.strip_prefix(prefix).unwrap_or(path)
}
