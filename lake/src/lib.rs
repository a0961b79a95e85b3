//! The lake: every Parquet file Telltale writes, as three Delta Lake tables, and the only code
//! that writes, replaces or deletes one.
//!
//! - [`store`]: object-store access (a local folder or an S3-compatible bucket), with writes and
//!   deletes that are durable once they return.
//! - [`tables`]: the three tables (`events`, `features`, `scores`): schemas, Parquet writer
//!   settings and the object path layout, a public contract data scientists read.
//! - [`delta`]: each table as a Delta Lake table: its log is the list of live files (commits
//!   with application transactions, snapshots, time travel, checkpoints).
//! - [`rewrite`]: replacing live files safely: erasing a session's rows with a row-group
//!   rewrite, merging sorted files, committing the swap; vacuuming what no snapshot needs.
//! - [`operations`]: what is done to the tables as a whole, one module each: an erasure's
//!   rewrite of a survey's three tables, and compaction of small events files into large sorted
//!   ones. What they need of the deployment they ask through a trait the caller implements: the
//!   lake depends on no catalog.
//!
//! A file is written whole and durably, then committed to its table's log; readers (ours and
//! anyone's Delta reader) see only committed files. Collection (`ingest`) and scoring
//! (`scorer`) both write through this crate; neither knows the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use object_store::ObjectStore;

pub mod backup;
mod bucket_prefix;
pub mod delta;
pub mod operations;
mod read_only;
pub mod rewrite;
pub mod store;
pub mod tables;

pub use delta::{
    Change, CommitGuard, Committed, LiveFile, NewFile, Publication, Refusal, Table, Upload,
};
pub use store::{LakeError, Store};
pub use tables::TableKind;

/// The lake: its object store and its three tables. Cheap to clone; clones share the tables'
/// loaded snapshots.
#[derive(Debug, Clone)]
pub struct Lake {
    store: Store,
    /// The store as [`Lake::store`] lends it: reads only.
    read_only: Arc<dyn ObjectStore>,
    /// See [`Lake::set_retention`].
    retention_ms: Arc<AtomicU64>,
    events: Table,
    features: Table,
    scores: Table,
}

impl Lake {
    /// Opens the lake a URL names (see [`Store::open`], which `s3` sets up for a bucket) and its
    /// tables, creating what is missing. `feature_names` are the `features` table's columns past
    /// its keys, in order.
    ///
    /// A lake written before the tables were Delta tables (Parquet folders with no
    /// `_delta_log`) is refused: it needs a fresh start (docs/lake.md).
    pub async fn open(
        url: &str,
        feature_names: &[&str],
        s3: &[(String, String)],
    ) -> Result<Lake, LakeError> {
        let store = Store::open(url, s3)?;
        store.refuse_pre_delta_layout().await?;
        let retention_ms = Arc::new(AtomicU64::new(millis(delta::DEFAULT_RETENTION)));
        let (events, features, scores) = tokio::try_join!(
            Table::open(
                &store,
                TableKind::Events,
                feature_names,
                retention_ms.clone()
            ),
            Table::open(
                &store,
                TableKind::Features,
                feature_names,
                retention_ms.clone()
            ),
            Table::open(
                &store,
                TableKind::Scores,
                feature_names,
                retention_ms.clone()
            ),
        )?;
        Ok(Lake {
            read_only: Arc::new(read_only::ReadOnly::new(Arc::clone(store.store()))),
            store,
            retention_ms,
            events,
            features,
            scores,
        })
    }

    /// How long the tables' commit files are kept once a checkpoint covers them (how far back
    /// time travel reaches): the retention the vacuum gives a compaction's replaced files, so
    /// that a version is readable for as long as both its log and its files are kept.
    pub fn set_retention(&self, retention: std::time::Duration) {
        self.retention_ms
            .store(millis(retention), Ordering::Relaxed);
    }

    /// The table of `kind`.
    pub fn table(&self, kind: TableKind) -> &Table {
        match kind {
            TableKind::Events => &self.events,
            TableKind::Features => &self.features,
            TableKind::Scores => &self.scores,
        }
    }

    /// The object store rooted at the lake's root (paths as `events/survey_id=...`), for
    /// reading: its writes and deletes are refused (files change only by
    /// [`Table::publish`]).
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.read_only
    }

    /// One request to the object store (the metadata of an object that need not exist), for
    /// readiness checks: `Ok` when the store answers, found or not.
    pub async fn probe(&self) -> Result<(), LakeError> {
        let path = object_store::path::Path::from("_telltale_probe");
        match object_store::ObjectStoreExt::head(self.store().as_ref(), &path).await {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// See [`Store::read`].
    pub async fn read(&self, path: &str) -> Result<bytes::Bytes, LakeError> {
        self.store.read(path).await
    }

    /// See [`Store::delete`].
    pub(crate) async fn delete(&self, path: &str) -> Result<(), LakeError> {
        self.store.delete(path).await
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
