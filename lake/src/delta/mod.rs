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
//!
//! - `schema`: opening a table (creating it, or adding the columns an older one lacks).
//! - `snapshot`: the live files of the newest snapshot or of an older one, and app versions.
//! - `commit`: a change as one commit of `add` and `remove` actions, tried again after races.
//! - `publish`: the one path by which files enter or leave a table (upload, commit, undo).
//! - `retention`: checkpoints and the commit files they let go, tombstones, the vacuum.

mod commit;
mod publish;
mod retention;
mod schema;
mod snapshot;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

pub use publish::{Publication, Upload};
pub use schema::{TABLE_FORMAT, TABLE_FORMAT_PROPERTY};

use crate::{Store, TableKind};
use deltalake_core::DeltaTable;
use deltalake_core::logstore::LogStoreRef;

/// Commits between checkpoints: Delta's default (delta-rs's is 100), so a reader that loads a
/// table cold replays at most 10 commit files. The checkpoints cost the writers nothing
/// measurable: flush commits during scoring_run's load took as long with 10 as with 100
/// (benches/README.md has the commit times); our tables hold a few hundred live files.
pub const CHECKPOINT_INTERVAL: u64 = 10;

/// How long commit files are kept once a newer checkpoint covers them, unless the lake is told
/// otherwise ([`Lake::set_retention`](crate::Lake::set_retention)): how far back
/// `telltale sql --as-of` can reach. The server's default lake retention.
pub const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(60 * 60);

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

/// Why a [`CommitGuard`] refused a commit: the writer's own error, for it to inspect.
pub type Refusal = Box<dyn std::error::Error + Send + Sync>;

/// A writer's check at commit time: asked after the table's newest version was read and before
/// each attempt to commit the one after it. A commit lands only as the version after the one
/// read (the log's put-if-absent), so what the guard finds holds for that commit: whoever
/// fences a writer off records the fence where the guard looks first, then commits to the
/// table; a commit of the fenced writer after that commit read it, and so met the fence. A
/// flush's guard checks its instance's epoch and its tombstones (`ingest`).
#[async_trait::async_trait]
pub trait CommitGuard: Send + Sync {
    /// `Err`: commit nothing.
    async fn admit(&self) -> Result<(), Refusal>;
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

impl Table {
    pub fn kind(&self) -> TableKind {
        self.kind
    }
}

/// A point in a table's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    Version(u64),
    Time(chrono::DateTime<chrono::Utc>),
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
mod tests;
