//! The ingest pipeline: collector requests in, durable log, session statistics and Parquet out.
//!
//! ```text
//! accept() --append+fsync--> Wal --sink--> stats queue --(every 250 ms)--> catalog sessions
//!                                      \--> lake queue  --(every flush)---> Parquet + catalog files
//! ```
//!
//! Each consumer commits its output together with the log sequence number it reached (its
//! watermark) in one catalog transaction. After a crash the log is replayed and each consumer
//! skips what its watermark covers, so every acknowledged batch lands exactly once. Log segments
//! are deleted only below both watermarks.
//!
//! This module holds the [`Ingestor`] and its intake (start, replay, `accept`, the survey cache,
//! shutdown); `tombstones` what the collector knows of deleted sessions; `flush` the consumers
//! (statistics, flushes to the lake, truncation and purge of the log).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use catalog::{Catalog, SessionDelta, SurveyId, TrackingKey, WalConsumer};
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;

use crate::batch::{self, BatchError};
use crate::event_row;
use crate::events_batch::EventsBatchBuilder;
use crate::wal::{Append, Wal, WalError, WalRecord};
use lake::{Lake, NewFile, TableKind, tables};

mod event_files;
mod fleet;
mod flush;
mod tombstones;

use tombstones::*;

/// Settings of the pipeline. Plain values: the binary maps its flags onto them.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Names this instance's log and files; stable across restarts of one data dir.
    pub instance_id: String,
    pub wal_dir: PathBuf,
    /// How often session statistics are applied (read-your-writes is 4 times this at worst).
    pub stats_interval: Duration,
    /// How often buffered events are written to the lake.
    pub flush_interval: Duration,
    /// Buffered request bytes that trigger a flush before the interval.
    pub flush_bytes: usize,
    /// Buffered request bytes above which the collector refuses new batches (503).
    pub max_buffered_bytes: usize,
}

impl IngestConfig {
    pub fn new(instance_id: impl Into<String>, wal_dir: PathBuf) -> Self {
        Self {
            instance_id: instance_id.into(),
            wal_dir,
            stats_interval: Duration::from_millis(200),
            flush_interval: Duration::from_secs(10),
            flush_bytes: 32 * 1024 * 1024,
            max_buffered_bytes: 128 * 1024 * 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    InvalidIdentifier(String),
    #[error("unknown tracking key")]
    UnknownTrackingKey,
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("collector is catching up; retry shortly")]
    Overloaded,
    #[error(transparent)]
    Wal(#[from] Arc<WalError>),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error("building a parquet file failed: {0}")]
    Encode(String),
    #[error("background task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("the write-ahead log still holds records logged before the purge; will retry")]
    LogNotPurged,
    /// A flush removes no file, so the lake has no reason to refuse its commit as a conflict;
    /// if it ever does, the range is flushed again.
    #[error("the lake refused a flush's commit as a conflict; will retry")]
    FlushConflict,
    /// A flush's commit guard kept refusing it (see `pipeline::fleet`); the range is flushed
    /// again.
    #[error("a flush was not committed: {0}; will retry")]
    Guard(String),
}

/// The outcome of a collector request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Logged durably; `count` events.
    Stored { count: usize },
    /// The session was deleted; the batch was discarded.
    Deleted { count: usize },
}

/// How far an instance's write-ahead log has been applied ([`Ingestor::log_position`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogPosition {
    /// The highest sequence number the log has handed out.
    pub last_lsn: u64,
    /// Applied to the lake's live files through here.
    pub lake_watermark: u64,
    /// Applied to the session statistics through here.
    pub stats_watermark: u64,
}

impl LogPosition {
    /// Nothing in the log is missing from the lake or the statistics.
    pub fn is_drained(&self) -> bool {
        self.lake_watermark >= self.last_lsn && self.stats_watermark >= self.last_lsn
    }
}

/// What a flush wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushReport {
    pub files: usize,
    pub events: u64,
    pub through_lsn: u64,
}

#[derive(Default)]
struct Pending {
    records: VecDeque<Arc<WalRecord>>,
    bytes: usize,
}

impl Pending {
    fn push(&mut self, record: Arc<WalRecord>) {
        self.bytes += record.body.len();
        self.records.push_back(record);
    }

    fn drain_through(&mut self, lsn: u64) {
        while self.records.front().is_some_and(|record| record.lsn <= lsn) {
            if let Some(record) = self.records.pop_front() {
                self.bytes -= record.body.len();
            }
        }
    }

    /// The oldest records, up to about `max_bytes` of bodies (at least one record), or exactly
    /// those up to `through` when a failed attempt must be repeated over the same range.
    fn snapshot_prefix(&self, max_bytes: usize, through: Option<u64>) -> Vec<Arc<WalRecord>> {
        let mut taken = 0;
        let mut prefix = Vec::new();
        for record in &self.records {
            let full = match through {
                Some(through) => record.lsn > through,
                None => !prefix.is_empty() && taken + record.body.len() > max_bytes,
            };
            if full {
                break;
            }
            taken += record.body.len();
            prefix.push(Arc::clone(record));
        }
        prefix
    }
}

enum CachedSurvey {
    Known(SurveyId),
    Unknown { until: Instant },
}

struct Inner {
    config: IngestConfig,
    catalog: Arc<dyn Catalog>,
    lake: Lake,
    wal: Wal,
    surveys: RwLock<HashMap<String, CachedSurvey>>,
    /// Deleted references and identifiers, of the surveys that have any.
    tombstones: RwLock<Tombstones>,
    /// identifier -> reference, as learned from the stream and the catalog.
    references: Mutex<HashMap<(SurveyId, String), String>>,
    /// Identifiers of tombstoned surveys the catalog had no reference for, so the collector asks
    /// it once, not on every request. Cleared when new tombstones arrive.
    unlinked: Mutex<HashSet<(SurveyId, String)>>,
    /// The log position a failed flush reached; the retry covers exactly the same range, so it
    /// rewrites the same objects instead of adding files with the same rows.
    retry_through: Mutex<Option<u64>>,
    stats_pending: Arc<Mutex<Pending>>,
    lake_pending: Arc<Mutex<Pending>>,
    stats_watermark: AtomicU64,
    lake_watermark: AtomicU64,
    stats_lock: tokio::sync::Mutex<()>,
    flush_lock: tokio::sync::Mutex<()>,
    /// Held shared by a batch from its tombstone check until it is logged; a purge takes it
    /// exclusively for a moment first, so that no batch checked against older tombstones can
    /// reach the log after the purge.
    admission: tokio::sync::RwLock<()>,
    flush_wanted: tokio::sync::Notify,
    /// Set on shutdown: the background consumers finish the step they are in, then stop.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The epoch this instance writes under (`fleet`): every statistics write and flush
    /// commit carries it, and the fleet refuses it once an erasure fenced it off.
    epoch: AtomicI64,
    /// Held while joining the fleet again after a fence, so that it happens once.
    rejoin_lock: tokio::sync::Mutex<()>,
    /// The last statistics write failed without saying whether it committed: the next one
    /// first drops what the catalog's watermark says was applied (no batch counted twice).
    stats_uncertain: AtomicBool,
}

/// The collector's engine. Cheap to clone.
#[derive(Clone)]
pub struct Ingestor {
    inner: Arc<Inner>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl std::fmt::Debug for Ingestor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingestor")
            .field("instance", &self.inner.config.instance_id)
            .finish()
    }
}

/// Bound on the identifier-to-reference memo; it is refilled from the catalog when cleared.
const MAX_REMEMBERED_REFERENCES: usize = 100_000;
/// How long an unknown tracking key is remembered as unknown.
const UNKNOWN_SURVEY_TTL: Duration = Duration::from_secs(1);

impl Ingestor {
    /// Opens the log, replays what earlier runs left in it into the catalog and the lake, and
    /// starts the background consumers.
    pub async fn start(
        config: IngestConfig,
        catalog: Arc<dyn Catalog>,
        lake: Lake,
    ) -> Result<Ingestor, IngestError> {
        let stats_pending = Arc::new(Mutex::new(Pending::default()));
        let lake_pending = Arc::new(Mutex::new(Pending::default()));
        let (sink_stats, sink_lake) = (Arc::clone(&stats_pending), Arc::clone(&lake_pending));
        let (wal, recovered) = Wal::open(
            &config.wal_dir,
            Box::new(move |records| {
                let mut stats = sink_stats.lock();
                let mut lake = sink_lake.lock();
                for record in records {
                    stats.push(Arc::clone(record));
                    lake.push(Arc::clone(record));
                }
            }),
        )
        .map_err(Arc::new)?;

        // A new epoch before anything is written: whatever a fenced-off earlier process of this
        // instance had in flight stays refused.
        let epoch = catalog.join_fleet(&config.instance_id).await?;
        let stats_watermark = catalog
            .wal_watermark(&config.instance_id, WalConsumer::Stats)
            .await?;
        // The lake's position is the one the events table's log holds for this instance: a
        // flush's files and the position they cover are one Delta commit.
        let lake_watermark = Ingestor::lake_position(&lake, &config.instance_id).await?;
        let replayed = recovered.records.len();
        {
            let mut stats = stats_pending.lock();
            let mut lake = lake_pending.lock();
            for record in recovered.records.into_iter().map(Arc::new) {
                if record.lsn > stats_watermark {
                    stats.push(Arc::clone(&record));
                }
                if record.lsn > lake_watermark {
                    lake.push(record);
                }
            }
            tracing::info!(
                replayed,
                stats_backlog = stats.records.len(),
                lake_backlog = lake.records.len(),
                ignored_bytes = recovered.ignored_bytes,
                "write-ahead log opened"
            );
        }

        let ingestor = Ingestor {
            inner: Arc::new(Inner {
                config,
                catalog,
                lake,
                wal,
                surveys: RwLock::new(HashMap::new()),
                tombstones: RwLock::new(Tombstones::default()),
                references: Mutex::new(HashMap::new()),
                unlinked: Mutex::new(HashSet::new()),
                retry_through: Mutex::new(None),
                stats_pending,
                lake_pending,
                stats_watermark: AtomicU64::new(stats_watermark),
                lake_watermark: AtomicU64::new(lake_watermark),
                stats_lock: tokio::sync::Mutex::new(()),
                admission: tokio::sync::RwLock::new(()),
                flush_lock: tokio::sync::Mutex::new(()),
                flush_wanted: tokio::sync::Notify::new(),
                stopping: tokio::sync::watch::Sender::new(false),
                epoch: AtomicI64::new(epoch),
                rejoin_lock: tokio::sync::Mutex::new(()),
                stats_uncertain: AtomicBool::new(false),
            }),
            tasks: Arc::new(Mutex::new(Vec::new())),
        };
        ingestor.remove_orphan_files().await?;
        ingestor.refresh_tombstones().await?;
        // Replayed batches become visible before the first request is served.
        ingestor.flush_all().await?;
        ingestor.spawn_background();
        Ok(ingestor)
    }

    /// Validates and durably logs one collector batch.
    pub async fn accept(
        &self,
        tracking_key: &str,
        identifier: &str,
        body: Bytes,
    ) -> Result<Accepted, IngestError> {
        batch::validate_identifier(identifier).map_err(IngestError::InvalidIdentifier)?;
        let survey_id = self.survey_for_tracking_key(tracking_key).await?;
        self.log_batch(survey_id, identifier, body, catalog::now_millis())
            .await
    }

    /// Validates and durably logs a batch another deployment's collector received, keeping the
    /// time it arrived there (`telltale log import`: recorded traffic, such as the lab's corpus,
    /// loaded through the collector's own path).
    pub async fn accept_recorded(
        &self,
        survey_id: SurveyId,
        identifier: &str,
        body: Bytes,
        received_at: i64,
    ) -> Result<Accepted, IngestError> {
        batch::validate_identifier(identifier).map_err(IngestError::InvalidIdentifier)?;
        self.log_batch(survey_id, identifier, body, received_at)
            .await
    }

    async fn log_batch(
        &self,
        survey_id: SurveyId,
        identifier: &str,
        body: Bytes,
        received_at: i64,
    ) -> Result<Accepted, IngestError> {
        let count = batch::count_batch_events(&body)?;
        let _admitted = self.inner.admission.read().await;
        if self.is_deleted(&survey_id, identifier, &body).await? {
            return Ok(Accepted::Deleted { count });
        }
        if count == 0 {
            // Nothing to keep: no log write, no sync.
            return Ok(Accepted::Stored { count });
        }
        if self.inner.lake_pending.lock().bytes > self.inner.config.max_buffered_bytes {
            self.inner.flush_wanted.notify_one();
            return Err(IngestError::Overloaded);
        }
        let append = Append {
            received_at,
            survey_id,
            identifier: identifier.to_owned(),
            // An exact-size copy: the request's bytes may be a slice pinning a much larger
            // network read buffer for as long as the batch waits for the flush.
            body: Bytes::copy_from_slice(&body),
        };
        self.inner.wal.append(append).await?;
        if self.inner.lake_pending.lock().bytes >= self.inner.config.flush_bytes {
            self.inner.flush_wanted.notify_one();
        }
        Ok(Accepted::Stored { count })
    }

    /// Tells the collector about a survey just provisioned, sparing it a catalog round trip.
    pub fn remember_survey(&self, tracking_key: &TrackingKey, survey_id: &SurveyId) {
        self.inner.surveys.write().insert(
            tracking_key.as_str().to_owned(),
            CachedSurvey::Known(survey_id.clone()),
        );
    }

    /// The survey a tracking key names, from a cache that also remembers unknown keys for a
    /// while (so a stream of made-up keys costs no catalog round trips).
    pub async fn survey_for_tracking_key(
        &self,
        tracking_key: &str,
    ) -> Result<SurveyId, IngestError> {
        let key = TrackingKey::parse(tracking_key).ok_or(IngestError::UnknownTrackingKey)?;
        match self.inner.surveys.read().get(key.as_str()) {
            Some(CachedSurvey::Known(id)) => return Ok(id.clone()),
            Some(CachedSurvey::Unknown { until }) if *until > Instant::now() => {
                return Err(IngestError::UnknownTrackingKey);
            }
            _ => {}
        }
        let found = self.inner.catalog.survey_by_tracking_key(&key).await?;
        let entry = match &found {
            Some(id) => CachedSurvey::Known(id.clone()),
            None => CachedSurvey::Unknown {
                until: Instant::now() + UNKNOWN_SURVEY_TTL,
            },
        };
        let mut surveys = self.inner.surveys.write();
        if surveys.len() > 100_000 {
            surveys.retain(|_, cached| matches!(cached, CachedSurvey::Known(_)));
        }
        surveys.insert(key.as_str().to_owned(), entry);
        found.ok_or(IngestError::UnknownTrackingKey)
    }

    /// Stops the background consumers and writes everything buffered. Call once, on shutdown.
    ///
    /// The consumers are stopped between steps, never aborted inside one: an aborted step could
    /// have committed to the catalog without draining its queue, and the final flush would then
    /// apply the same records again.
    pub async fn shutdown(&self) -> Result<FlushReport, IngestError> {
        self.inner.stopping.send_replace(true);
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        for task in tasks {
            task.await?;
        }
        let report = self.flush_all().await?;
        // A stopped instance keeps only the segments it may still need: free files hold old
        // bodies, and a retired instance's folder would keep them out of an erasure's reach.
        let wal = self.inner.wal.clone();
        tokio::task::spawn_blocking(move || wal.discard_recycled())
            .await?
            .map_err(Arc::new)?;
        // Everything is in the lake and the statistics: no erasure need wait for this log.
        self.leave_fleet().await;
        Ok(report)
    }

    /// Where the log and its two consumers stand. Everything at or below both watermarks is
    /// in the lake and in the session statistics; when both reach `last_lsn`, the log holds
    /// nothing that is not elsewhere (what `telltale drain` checks before an instance retires).
    /// The log position the lake holds every record of, for `instance`: the version of the
    /// instance's application transaction in the `events` table's log (a flush's files and the
    /// position they cover are one commit).
    pub async fn lake_position(lake: &Lake, instance: &str) -> Result<u64, IngestError> {
        Ok(lake
            .table(TableKind::Events)
            .app_version(&flush::lake_app_id(instance))
            .await?
            .map_or(0, |version| u64::try_from(version).unwrap_or(0)))
    }

    /// Bytes of request bodies logged and not yet in the lake.
    pub fn lake_backlog_bytes(&self) -> usize {
        self.inner.lake_pending.lock().bytes
    }

    pub fn log_position(&self) -> LogPosition {
        LogPosition {
            last_lsn: self.inner.wal.last_lsn(),
            lake_watermark: self.inner.lake_watermark.load(Ordering::Acquire),
            stats_watermark: self.inner.stats_watermark.load(Ordering::Acquire),
        }
    }

    /// Stops the background tasks without flushing and drops the handle, as a killed process
    /// would: what is logged stays in the log for the next start. The log's lock is released
    /// once every other clone of this ingestor is dropped too, so a start that failed after the
    /// log was opened can release it and try again in the same process (`instance`'s
    /// deployment does), and a test can start the ingestor again.
    pub async fn halt(self) {
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
    }

    fn spawn_background(&self) {
        let mut tasks = self.tasks.lock();

        let stats = self.clone();
        let mut stopping = self.inner.stopping.subscribe();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(stats.inner.config.stats_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                // Tombstones first: a batch accepted before this instance knew of a deletion
                // made elsewhere must meet that tombstone before its statistics are applied.
                if let Err(error) = stats.refresh_tombstones().await {
                    tracing::warn!(%error, "refreshing tombstones failed; will retry");
                }
                if let Err(error) = stats.apply_stats().await {
                    tracing::error!(%error, "applying session statistics failed; will retry");
                }
            }
        }));

        // Flushes a run on another instance asks for: on a task of their own, so that a flush
        // that hangs never holds the statistics back.
        let answerer = self.clone();
        let mut stopping = self.inner.stopping.subscribe();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(fleet::FLUSH_REQUEST_POLL) => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                if let Err(error) = answerer.answer_flush_request().await {
                    tracing::warn!(%error, "answering a flush the fleet asked for failed; will retry");
                }
            }
        }));

        let flusher = self.clone();
        let mut stopping = self.inner.stopping.subscribe();
        tasks.push(tokio::spawn(async move {
            let interval = flusher.inner.config.flush_interval;
            loop {
                tokio::select! {
                    _ = tokio::time::timeout(interval, flusher.inner.flush_wanted.notified()) => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                if let Err(error) = flusher.flush().await {
                    tracing::error!(%error, "flushing to the lake failed; will retry");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stopping.wait_for(|stop| *stop) => return,
                    }
                }
            }
        }));
    }
}

#[cfg(test)]
mod tests;
