//! The lake's tables as Delta Lake tables: `<lake>/events`, `<lake>/features` and
//! `<lake>/scores`, each with its `_delta_log/`, written through `deltalake-core` on the lake's
//! own object store.
//!
//! - Every change is one Delta commit of `add` and `remove` actions ([`Table::commit`]); a
//!   change that removes files commits only while every one of them is still live, so two
//!   rewrites of one file never both win (an erasure and a compaction, say).
//! - A commit may carry an application transaction (`txn`: an app id and a version that only
//!   grows): a writer that replays after a crash reads its version back
//!   ([`Table::app_version`]) and skips what a commit already holds.
//! - Partitions are Hive-style folders as in DESIGN.md's layout: `events` by `survey_id` and
//!   `date`, `features` and `scores` by `survey_id`. Files also hold `survey_id` as a column, so
//!   a reader of the plain Parquet files sees it; Delta readers take it from the log (the values
//!   agree).
//! - File statistics in the log are the row count and the time range of `events` files, never
//!   a column that identifies a session: the log then holds no copy of an erased reference.
//! - In a local folder every commit file (and checkpoint) is fsync'd with its directory before
//!   the commit returns: a caller truncates its write-ahead log on the strength of a commit.
//!
//! Checkpoints are written every [`CHECKPOINT_INTERVAL`] commits; commit files older than
//! both a checkpoint and the lake's retention ([`DEFAULT_RETENTION`] unless the lake is told
//! otherwise: the time a compaction's replaced files are kept) are deleted after it. Versions
//! older than that retention cannot be read whole anyway. (A flush is a commit: every 10 s per
//! instance at rest, several a second under load. Every commit lists `_delta_log/`, and a
//! local folder is listed whole whatever the offset, so each commit pays for every entry kept.
//! Delta's default of 30 days would keep millions.)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::tables::{EVENTS_SCHEMA, SCORES_SCHEMA};
use crate::{LakeError, Store, TableKind};
use deltalake_core::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake_core::kernel::{
    Action, Add, ArrayType, DataType as DeltaType, Remove, StructField, Transaction,
};
use deltalake_core::logstore::{LogStoreRef, StorageConfig, default_logstore};
use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableError, TableProperty};

/// Commits between checkpoints: Delta's default (delta-rs's is 100), so a reader that loads a
/// table cold replays at most 10 commit files. The checkpoints cost the writers nothing
/// measurable: flush commits during scoring_run's load took as long with 10 as with 100
/// (benches/README.md has the commit times); our tables hold a few hundred live files.
pub const CHECKPOINT_INTERVAL: u64 = 10;

/// How long commit files are kept once a newer checkpoint covers them, unless the lake is told
/// otherwise ([`Lake::set_retention`](crate::Lake::set_retention)): how far back
/// `telltale sql --as-of` can reach. The server's default lake retention.
pub const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// How many times a commit is tried again after losing a race it need not lose (another
/// writer's commit that touched none of its removed files).
const MAX_ATTEMPTS: usize = 50;

/// What a commit does, as the Delta log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// New rows (a flush, a scoring run's chunk).
    Append,
    /// Rows removed by a rewrite of the files that held them (an erasure).
    Erase,
    /// The same rows in fewer files (compaction): readers' data does not change.
    Compact,
}

/// A file written whole and durably, to be added by a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Path from the lake's root (`events/survey_id=.../date=.../x.parquet`).
    pub path: String,
    pub survey_id: String,
    /// The `date` partition of an `events` file.
    pub date: Option<String>,
    pub size: u64,
    pub rows: u64,
    /// `received_at` range of an `events` file (Unix ms), for readers' data skipping.
    pub received: Option<(i64, i64)>,
}

/// A live file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Path from the lake's root.
    pub path: String,
    pub survey_id: String,
    pub date: Option<String>,
    pub size: u64,
    pub rows: Option<u64>,
    /// When the file was added (Unix ms).
    pub added_at: i64,
    /// `received_at` range of an `events` file (Unix ms), from the log's statistics.
    pub received: Option<(i64, i64)>,
}

/// The outcome of [`Table::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Committed as this table version.
    Version(u64),
    /// Nothing committed: a file to remove was no longer live (another rewrite was first).
    Conflict,
    /// Nothing committed: the application transaction's version was already reached.
    AlreadyApplied,
}

/// One Delta table of the lake. Clones share the loaded state.
#[derive(Clone)]
pub struct Table {
    kind: TableKind,
    store: Store,
    log_store: LogStoreRef,
    /// Milliseconds commit files are kept after a checkpoint covers them (shared by the lake's
    /// tables).
    log_retention_ms: Arc<AtomicU64>,
    state: Arc<tokio::sync::Mutex<DeltaTable>>,
    /// Application transaction versions this process read from the log or committed itself,
    /// so that a commit need not replay the log to find its writer's last version (one app id
    /// has one writer: an instance). An entry is dropped when a commit's outcome is unknown.
    app_versions: Arc<std::sync::Mutex<HashMap<String, i64>>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The partition columns of a table.
fn partition_columns(kind: TableKind) -> &'static [&'static str] {
    match kind {
        TableKind::Events => &["survey_id", "date"],
        TableKind::Features | TableKind::Scores => &["survey_id"],
    }
}

/// The Delta type of one of our Arrow column types.
fn delta_type(data_type: &arrow::datatypes::DataType) -> Result<DeltaType, LakeError> {
    use arrow::datatypes::DataType as A;
    Ok(match data_type {
        A::Utf8 | A::LargeUtf8 => DeltaType::STRING,
        A::Dictionary(_, value) if matches!(**value, A::Utf8) => DeltaType::STRING,
        A::Int32 => DeltaType::INTEGER,
        // No unsigned types: a file's column must be what the Delta schema declares.
        A::Int64 => DeltaType::LONG,
        A::Float64 => DeltaType::DOUBLE,
        A::Boolean => DeltaType::BOOLEAN,
        A::Timestamp(_, Some(_)) => DeltaType::TIMESTAMP,
        A::List(item) => DeltaType::Array(Box::new(ArrayType::new(
            delta_type(item.data_type())?,
            item.is_nullable(),
        ))),
        other => return Err(LakeError::Schema(format!("{other:?}"))),
    })
}

/// The Delta columns of a table: the Parquet files' columns, then partition columns the files
/// do not hold (`date`).
fn delta_columns(kind: TableKind, feature_names: &[&str]) -> Result<Vec<StructField>, LakeError> {
    let schema = match kind {
        TableKind::Events => EVENTS_SCHEMA.clone(),
        TableKind::Features => crate::tables::features_schema(feature_names),
        TableKind::Scores => SCORES_SCHEMA.clone(),
    };
    let mut columns = schema
        .fields()
        .iter()
        .map(|field| {
            Ok(StructField::new(
                field.name().clone(),
                delta_type(field.data_type())?,
                field.is_nullable(),
            ))
        })
        .collect::<Result<Vec<_>, LakeError>>()?;
    if kind == TableKind::Events {
        columns.push(StructField::new("date", DeltaType::STRING, false));
    }
    Ok(columns)
}

/// Adds the columns a table lacks (nullable, at the end): a `features` table created by an
/// older release has no column for a feature added since, and its new files' values would be
/// invisible to readers, which read the columns the table's schema names. Instances opening
/// the table together may race: the loser reloads and finds the columns there.
async fn add_missing_columns(
    lake: &Store,
    kind: TableKind,
    feature_names: &[&str],
    mut table: DeltaTable,
) -> Result<DeltaTable, LakeError> {
    for _attempt in 0..5 {
        let schema = table.snapshot()?.schema();
        let missing: Vec<StructField> = delta_columns(kind, feature_names)?
            .into_iter()
            .filter(|column| schema.field(column.name()).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(table);
        }
        tracing::info!(
            table = kind.as_str(),
            columns = missing.len(),
            "adding columns to an older table"
        );
        match table.clone().add_columns().with_fields(missing).await {
            Ok(evolved) => {
                let version = evolved.version().unwrap_or(0);
                lake.sync_delta_log(kind.as_str(), version).await?;
                table = evolved;
            }
            // Another instance changed the schema first: look again.
            Err(DeltaTableError::VersionAlreadyExists(_))
            | Err(DeltaTableError::Transaction {
                source:
                    TransactionError::VersionAlreadyExists(_) | TransactionError::CommitConflict(_),
            }) => table.load().await?,
            Err(error) => return Err(error.into()),
        }
    }
    Err(LakeError::Schema(format!(
        "could not add the missing columns of {}",
        kind.as_str()
    )))
}

impl Table {
    /// Opens the table of `kind`, creating it when the lake has none yet (instances starting
    /// together may race: one creates it, the others load it). `feature_names` are the columns
    /// of the `features` table past its keys (unused for the other tables).
    pub async fn open(
        lake: &Store,
        kind: TableKind,
        feature_names: &[&str],
        log_retention_ms: Arc<AtomicU64>,
    ) -> Result<Table, LakeError> {
        let (prefixed, root) = lake.table_stores(kind.as_str());
        let location = lake.table_url(kind.as_str())?;
        // The kernel reads a local table's folder before there is a log in it.
        lake.create_folder(kind.as_str()).await?;
        // Looked for first: the kernel logs an error when it loads a table without a log.
        let has_log = {
            use futures::StreamExt;
            let log = object_store::path::Path::from("_delta_log");
            prefixed
                .list(Some(&log))
                .next()
                .await
                .transpose()?
                .is_some()
        };
        let log_store = default_logstore(prefixed, root, &location, &StorageConfig::default());
        let mut table = DeltaTable::new(Arc::clone(&log_store));
        let exists = has_log
            && match table.load().await {
                Ok(()) => true,
                Err(DeltaTableError::NotATable(_)) => false,
                Err(error) => return Err(error.into()),
            };
        if !exists {
            let created = CreateBuilder::new()
                .with_log_store(Arc::clone(&log_store))
                .with_table_name(kind.as_str())
                .with_columns(delta_columns(kind, feature_names)?)
                .with_partition_columns(partition_columns(kind).iter().copied())
                // Old commit files go only after a checkpoint we have synced (`checkpoint`).
                .with_configuration_property(TableProperty::EnableExpiredLogCleanup, Some("false"))
                .with_save_mode(SaveMode::ErrorIfExists)
                .await;
            match created {
                Ok(created) => {
                    tracing::debug!(version = ?created.version(), "created a delta table");
                }
                // Another instance created it first.
                Err(DeltaTableError::VersionAlreadyExists(_))
                | Err(DeltaTableError::Transaction {
                    source: TransactionError::VersionAlreadyExists(_),
                }) => {}
                Err(error) => return Err(error.into()),
            }
            lake.sync_delta_log(kind.as_str(), 0).await?;
            table.load().await?;
        }
        let table = add_missing_columns(lake, kind, feature_names, table).await?;
        Ok(Table {
            kind,
            store: lake.clone(),
            log_store,
            log_retention_ms,
            state: Arc::new(tokio::sync::Mutex::new(table)),
            app_versions: Arc::default(),
        })
    }

    pub fn kind(&self) -> TableKind {
        self.kind
    }

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

    /// The version the application `app_id` last committed, after loading new commits.
    pub async fn app_version(&self, app_id: &str) -> Result<Option<i64>, LakeError> {
        let mut table = self.state.lock().await;
        table.update_state().await?;
        self.read_app_version(&table, app_id).await
    }

    /// `app_id`'s version in the loaded snapshot, read from the log (a replay of the log
    /// segment since the last checkpoint) and remembered.
    async fn read_app_version(
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

    fn app_versions(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
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
            .ok_or_else(|| LakeError::Schema(format!("no commit time for version {version}")))?;
        chrono::DateTime::from_timestamp_millis(millis)
            .ok_or_else(|| LakeError::Schema(format!("commit time {millis} out of range")))
    }

    /// Whether the table's first commit is later than `time`.
    pub async fn created_after(
        &self,
        time: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, LakeError> {
        Ok(self.version_time(0).await? > time)
    }

    fn files_of(
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

    /// Commits `added` and the removal of `removed` (paths from the lake's root) as one Delta
    /// commit, with the application transaction `txn` if given.
    ///
    /// A commit that removes files goes ahead only while all of them are live; another
    /// writer's commit in between that leaves them live is no conflict (the commit is tried
    /// again on the newer snapshot). With `txn`, a commit whose app version was already reached
    /// commits nothing.
    pub async fn commit(
        &self,
        change: Change,
        added: &[NewFile],
        removed: &[String],
        txn: Option<(&str, i64)>,
    ) -> Result<Committed, LakeError> {
        let started = std::time::Instant::now();
        let result = self.commit_attempts(change, added, removed, txn).await;
        let table = self.kind.as_str();
        let outcome = match &result {
            Ok(Committed::Version(_)) => "committed",
            Ok(Committed::Conflict) => "conflict",
            Ok(Committed::AlreadyApplied) => "already_applied",
            Err(_) => "error",
        };
        metrics::histogram!("telltale_lake_commit_seconds", "table" => table)
            .record(started.elapsed());
        metrics::counter!("telltale_lake_commits_total", "table" => table, "outcome" => outcome)
            .increment(1);
        result
    }

    async fn commit_attempts(
        &self,
        change: Change,
        added: &[NewFile],
        removed: &[String],
        txn: Option<(&str, i64)>,
    ) -> Result<Committed, LakeError> {
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
                    return Ok(Committed::AlreadyApplied);
                }
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
                    return Ok(Committed::Conflict);
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
                    return Ok(Committed::Version(version));
                }
                // Another writer's commit in between: look again at the newer snapshot.
                Err(DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(conflict),
                }) => {
                    tracing::debug!(table = self.kind.as_str(), %conflict, "delta commit raced");
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
            .map_err(|error| LakeError::Schema(format!("retention out of range: {error}")))?;
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
    async fn checkpoint(&self, table: &DeltaTable, version: u64) -> Result<(), LakeError> {
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

/// A point in a table's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    Version(u64),
    Time(chrono::DateTime<chrono::Utc>),
}

fn relative<'a>(prefix: &str, path: &'a str) -> &'a str {
    path.strip_prefix(prefix).unwrap_or(path)
}

/// The `received_at` range of a file's `stats` JSON, as [`statistics`] writes it.
fn received_range(stats: &str) -> Option<(i64, i64)> {
    let stats: serde_json::Value = serde_json::from_str(stats).ok()?;
    let time = |bound: &str| {
        let text = stats.get(bound)?.get("received_at")?.as_str()?;
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|time| time.timestamp_millis())
    };
    Some((time("minValues")?, time("maxValues")?))
}

/// The `stats` JSON of an added file: its row count and, for `events`, its `received_at` range.
fn statistics(file: &NewFile) -> String {
    let mut stats = serde_json::json!({ "numRecords": file.rows });
    if let Some((min, max)) = file.received {
        let format = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|time| time.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        };
        if let (Some(min), Some(max)) = (format(min), format(max)) {
            stats["minValues"] = serde_json::json!({ "received_at": min });
            stats["maxValues"] = serde_json::json!({ "received_at": max });
        }
    }
    stats.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's default: commit files stay for an hour after a checkpoint.
    fn retention() -> Arc<AtomicU64> {
        Arc::new(AtomicU64::new(DEFAULT_RETENTION.as_millis() as u64))
    }

    const SURVEY: &str = "00112233445566778899aabb";

    fn new_file(name: &str, rows: u64) -> NewFile {
        NewFile {
            path: format!("events/survey_id={SURVEY}/date=2026-11-25/{name}.parquet"),
            survey_id: SURVEY.to_owned(),
            date: Some("2026-11-25".to_owned()),
            size: 100 + rows,
            rows,
            received: Some((1_764_000_000_000, 1_764_000_001_000)),
        }
    }

    async fn lake() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let lake = Store::open(&dir.path().display().to_string(), &[]).expect("lake");
        (dir, lake)
    }

    fn paths(files: &[LiveFile]) -> Vec<String> {
        let mut paths: Vec<String> = files.iter().map(|file| file.path.clone()).collect();
        paths.sort();
        paths
    }

    #[tokio::test]
    async fn an_append_with_an_application_transaction_commits_once() {
        let (dir, lake) = lake().await;
        let table = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        assert_eq!(table.app_version("ingest-a").await.expect("txn"), None);
        let first = table
            .commit(
                Change::Append,
                &[new_file("a-1-5", 5)],
                &[],
                Some(("ingest-a", 5)),
            )
            .await
            .expect("commit");
        assert!(matches!(first, Committed::Version(1)), "{first:?}");
        // Replayed after a crash: the same position commits nothing.
        let again = table
            .commit(
                Change::Append,
                &[new_file("a-1-5", 5)],
                &[],
                Some(("ingest-a", 5)),
            )
            .await
            .expect("commit");
        assert_eq!(again, Committed::AlreadyApplied);
        assert_eq!(table.app_version("ingest-a").await.expect("txn"), Some(5));
        let files = table.live_files(Some(SURVEY)).await.expect("files");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, new_file("a-1-5", 5).path);
        assert_eq!(files[0].date.as_deref(), Some("2026-11-25"));
        assert_eq!(files[0].rows, Some(5));
        assert_eq!(
            files[0].received,
            Some((1_764_000_000_000, 1_764_000_001_000))
        );
        assert!(
            table
                .live_files(Some("ffffffffffffffffffffffff"))
                .await
                .expect("files")
                .is_empty()
        );
        // A second handle (another instance) sees the commit.
        let other = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        assert_eq!(other.app_version("ingest-a").await.expect("txn"), Some(5));
        assert!(
            dir.path()
                .join("events/_delta_log/00000000000000000001.json")
                .exists()
        );
    }

    #[tokio::test]
    async fn a_replacement_commits_only_while_its_files_are_live() {
        let (_dir, lake) = lake().await;
        let table = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        let (a, b) = (new_file("a-1-1", 1), new_file("a-2-2", 1));
        table
            .commit(Change::Append, &[a.clone(), b.clone()], &[], None)
            .await
            .expect("append");
        let merged = new_file("rewrite_merged", 2);
        let compacted = table
            .commit(
                Change::Compact,
                std::slice::from_ref(&merged),
                &[a.path.clone(), b.path.clone()],
                None,
            )
            .await
            .expect("compact");
        assert!(matches!(compacted, Committed::Version(2)));
        assert_eq!(
            paths(&table.live_files(None).await.expect("files")),
            std::slice::from_ref(&merged.path)
        );
        // An erasure planned on the old snapshot loses: its file is no longer live.
        let erased = new_file("rewrite_erased", 1);
        let lost = table
            .commit(
                Change::Erase,
                &[erased],
                std::slice::from_ref(&a.path),
                None,
            )
            .await
            .expect("erase");
        assert_eq!(lost, Committed::Conflict);
        assert_eq!(
            paths(&table.live_files(None).await.expect("files")),
            std::slice::from_ref(&merged.path)
        );
        // History: version 1 still lists the two flushed files.
        let (version, old) = table.files_as_of(AsOf::Version(1)).await.expect("as of");
        assert_eq!(version, 1);
        assert_eq!(paths(&old), [a.path, b.path]);
    }

    #[tokio::test]
    async fn instances_appending_at_once_all_commit() {
        let (_dir, lake) = lake().await;
        let first = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        let mut tasks = Vec::new();
        for instance in 0..3 {
            // Each instance has its own handle, as separate processes would.
            let table = Table::open(&lake, TableKind::Events, &[], retention())
                .await
                .expect("open");
            tasks.push(tokio::spawn(async move {
                for lsn in 1..=10i64 {
                    let file = new_file(&format!("i{instance}-{lsn}-{lsn}"), 1);
                    let app = format!("ingest-i{instance}");
                    let committed = table
                        .commit(Change::Append, &[file], &[], Some((&app, lsn)))
                        .await
                        .expect("commit");
                    assert!(matches!(committed, Committed::Version(_)), "{committed:?}");
                }
            }));
        }
        for task in tasks {
            task.await.expect("task");
        }
        assert_eq!(first.live_files(None).await.expect("files").len(), 30);
        for instance in 0..3 {
            let app = format!("ingest-i{instance}");
            assert_eq!(first.app_version(&app).await.expect("txn"), Some(10));
        }
        assert_eq!(first.refresh().await.expect("version"), 30);
    }

    #[tokio::test]
    async fn checkpoints_are_written_and_the_log_names_no_session() {
        let (dir, lake) = lake().await;
        let table = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        for lsn in 1..=CHECKPOINT_INTERVAL {
            let file = new_file(&format!("a-{lsn}-{lsn}"), 1);
            table
                .commit(Change::Append, &[file], &[], Some(("ingest-a", lsn as i64)))
                .await
                .expect("commit");
        }
        let log = dir.path().join("events/_delta_log");
        assert!(log.join("_last_checkpoint").exists());
        assert!(
            log.join(format!("{CHECKPOINT_INTERVAL:020}.checkpoint.parquet"))
                .exists()
        );
        let reopened = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        assert_eq!(
            reopened.live_files(None).await.expect("files").len() as u64,
            CHECKPOINT_INTERVAL
        );
        assert_eq!(
            reopened.app_version("ingest-a").await.expect("txn"),
            Some(CHECKPOINT_INTERVAL as i64)
        );
        // Statistics hold row counts and times, never a session column.
        let commit = std::fs::read_to_string(log.join("00000000000000000001.json")).expect("read");
        assert!(commit.contains("numRecords"), "{commit}");
        assert!(
            !commit.contains("session_id") && !commit.contains("reference"),
            "{commit}"
        );
    }

    #[tokio::test]
    async fn features_and_scores_tables_are_partitioned_by_survey() {
        let (dir, lake) = lake().await;
        let features = Table::open(&lake, TableKind::Features, &["pointer_speed"], retention())
            .await
            .expect("open");
        let scores = Table::open(&lake, TableKind::Scores, &[], retention())
            .await
            .expect("open");
        let file = NewFile {
            path: format!("scores/survey_id={SURVEY}/run-abc-00001.parquet"),
            survey_id: SURVEY.to_owned(),
            date: None,
            size: 10,
            rows: 3,
            received: None,
        };
        scores
            .commit(
                Change::Append,
                std::slice::from_ref(&file),
                &[],
                Some(("run-1", 1)),
            )
            .await
            .expect("commit");
        let live = scores.live_files(Some(SURVEY)).await.expect("files");
        assert_eq!(paths(&live), [file.path]);
        assert_eq!(live[0].date, None);
        assert!(features.live_files(None).await.expect("files").is_empty());
        let metadata = std::fs::read_to_string(
            dir.path()
                .join("features/_delta_log/00000000000000000000.json"),
        )
        .expect("read");
        assert!(metadata.contains("pointer_speed"), "{metadata}");
    }

    #[tokio::test]
    async fn a_table_of_an_older_release_gains_the_features_added_since() {
        let (_dir, lake) = lake().await;
        let older = Table::open(&lake, TableKind::Features, &["pointer_speed"], retention())
            .await
            .expect("open");
        let file = NewFile {
            path: format!("features/survey_id={SURVEY}/run-abc-00001.parquet"),
            survey_id: SURVEY.to_owned(),
            date: None,
            size: 10,
            rows: 3,
            received: None,
        };
        older
            .commit(
                Change::Append,
                std::slice::from_ref(&file),
                &[],
                Some(("run-1", 1)),
            )
            .await
            .expect("commit");
        // Two instances of the newer release open it at once: both find every column, and the
        // older files stay live.
        let names = ["pointer_speed", "touch_taps", "free_keystrokes"];
        let (a, b) = tokio::join!(
            Table::open(&lake, TableKind::Features, &names, retention()),
            Table::open(&lake, TableKind::Features, &names, retention()),
        );
        for table in [a.expect("open"), b.expect("open")] {
            table.refresh().await.expect("refresh");
            let state = table.state.lock().await;
            let schema = state.snapshot().expect("snapshot").schema();
            for name in names {
                let field = schema.field(name).expect("the column is there");
                assert!(field.is_nullable(), "{name}");
            }
        }
        let newer = Table::open(&lake, TableKind::Features, &names, retention())
            .await
            .expect("open");
        assert_eq!(
            paths(&newer.live_files(None).await.expect("files")),
            [file.path]
        );
    }
}
