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

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use catalog::{
    Catalog, LakeFileKind, NewLakeFile, SessionDelta, SurveyId, TrackingKey, WalConsumer,
};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;

use crate::batch::{self, BatchError};
use crate::event_row;
use crate::events_file::{self, EventsBatchBuilder};
use crate::lake::{self, Lake};
use crate::wal::{Append, Wal, WalError, WalRecord};

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
            flush_bytes: 8 * 1024 * 1024,
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

        let stats_watermark = catalog
            .wal_watermark(&config.instance_id, WalConsumer::Stats)
            .await?;
        let lake_watermark = catalog
            .wal_watermark(&config.instance_id, WalConsumer::Lake)
            .await?;
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
            received_at: catalog::now_millis(),
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

    /// Whether the batch belongs to a deleted session: its identifier is a deleted reference,
    /// is linked to one (learned from the stream, else from the catalog, so a restart does not
    /// forget links), or the batch's own `session` event names one.
    async fn is_deleted(
        &self,
        survey_id: &SurveyId,
        identifier: &str,
        body: &[u8],
    ) -> Result<bool, IngestError> {
        let tombstoned = |reference: &str| {
            self.inner
                .tombstones
                .read()
                .has_reference(survey_id, reference)
        };
        {
            let tombstones = self.inner.tombstones.read();
            if !tombstones.has_survey(survey_id) {
                return Ok(false);
            }
            if tombstones.has_identifier(survey_id, identifier) {
                return Ok(true);
            }
        }
        if batch::normalize_reference(identifier).is_some_and(|reference| tombstoned(&reference)) {
            return Ok(true);
        }
        let key = (survey_id.clone(), identifier.to_owned());
        let mut linked = self.inner.references.lock().get(&key).cloned();
        if linked.is_none() && !self.inner.unlinked.lock().contains(&key) {
            let stored = self
                .inner
                .catalog
                .session_references(survey_id, std::slice::from_ref(&key.1))
                .await?;
            if let Some((_, reference)) = stored.into_iter().next() {
                self.inner
                    .references
                    .lock()
                    .entry(key.clone())
                    .or_insert_with(|| reference.clone());
                linked = Some(reference);
            } else {
                let mut unlinked = self.inner.unlinked.lock();
                if unlinked.len() > MAX_REMEMBERED_REFERENCES {
                    *unlinked = HashSet::new();
                }
                unlinked.insert(key.clone());
            }
        }
        if linked.is_some_and(|reference| tombstoned(&reference)) {
            return Ok(true);
        }
        let named = event_row::stats_events(body)?
            .into_iter()
            .find_map(|event| {
                event
                    .interview_id
                    .as_deref()
                    .and_then(batch::normalize_reference)
                    .filter(|reference| tombstoned(reference))
            });
        let Some(reference) = named else {
            return Ok(false);
        };
        // The discarded batch never reaches the statistics, so the link is known nowhere
        // else: add the identifier to the tombstone, so its later batches (on any instance,
        // after any restart) are discarded too.
        let hash = catalog::identifier_tombstone_hash(survey_id, identifier);
        self.inner
            .catalog
            .tombstone_identifiers(survey_id, std::slice::from_ref(&hash))
            .await?;
        self.inner
            .tombstones
            .write()
            .add_identifier_hash(survey_id.clone(), hash);
        self.inner.references.lock().insert(key, reference);
        Ok(true)
    }

    /// Loads tombstones created since the last call (on any instance).
    pub async fn refresh_tombstones(&self) -> Result<(), IngestError> {
        let (after_reference, after_identifier) = {
            let tombstones = self.inner.tombstones.read();
            (tombstones.last_reference_id, tombstones.last_identifier_id)
        };
        let references = self.inner.catalog.tombstones_after(after_reference).await?;
        let identifiers = self
            .inner
            .catalog
            .tombstoned_identifiers_after(after_identifier)
            .await?;
        if references.is_empty() && identifiers.is_empty() {
            return Ok(());
        }
        // A link the catalog did not know may exist now.
        *self.inner.unlinked.lock() = HashSet::new();
        let mut tombstones = self.inner.tombstones.write();
        for tombstone in references {
            tombstones.last_reference_id = tombstones.last_reference_id.max(tombstone.id);
            tombstones
                .references
                .entry(tombstone.survey_id)
                .or_default()
                .insert(tombstone.reference);
        }
        for identifier in identifiers {
            tombstones.last_identifier_id = tombstones.last_identifier_id.max(identifier.id);
            tombstones.add_identifier_hash(identifier.survey_id, identifier.identifier_sha256);
        }
        Ok(())
    }

    /// The id of the newest reference tombstone loaded so far: a purge after this call covers
    /// every session tombstoned up to it.
    pub fn loaded_tombstone_id(&self) -> i64 {
        self.inner.tombstones.read().last_reference_id
    }

    /// Makes the log forget everything acknowledged before this call: it is flushed (deleted
    /// sessions' batches are dropped on the way, see [`Ingestor::flush`]), the open segment is
    /// closed into a fresh file, and every closed segment, free file and recycled spare is
    /// deleted (see [`Wal::start_purge`]). An erasure calls this, so that no byte of the
    /// erased session stays in the log.
    ///
    /// Fails, leaving the erasure to retry, when a segment from before the call survives
    /// truncation (a consumer could not catch up, or a file could not be deleted): an erasure
    /// must not report success while its bytes may still be on disk.
    pub async fn purge_log(&self) -> Result<(), IngestError> {
        // Batches that passed their tombstone check before the caller loaded the tombstones
        // are logged before the purge begins.
        drop(self.inner.admission.write().await);
        self.make_visible().await?;
        let purge = self.inner.wal.start_purge().await?;
        // Records logged between the first pass and the roll sit in a closed segment too.
        self.make_visible().await?;
        let through = self.consumed_through();
        let retained = tokio::task::spawn_blocking(move || purge.finish(through))
            .await?
            .map_err(Arc::new)?;
        if retained {
            return Err(IngestError::LogNotPurged);
        }
        Ok(())
    }

    /// Applies pending session statistics to the catalog.
    pub async fn apply_stats(&self) -> Result<usize, IngestError> {
        let _guard = self.inner.stats_lock.lock().await;
        let records = self
            .inner
            .stats_pending
            .lock()
            .snapshot_prefix(self.inner.config.flush_bytes, None);
        let Some(through_lsn) = records.last().map(|record| record.lsn) else {
            return Ok(0);
        };
        let tombstones = self.tombstones_of(records.iter().map(|record| &record.survey_id));
        let deltas = tokio::task::spawn_blocking(move || {
            let mut deltas = session_deltas(&records);
            if let Some(tombstones) = &tombstones {
                deltas.retain(|delta| {
                    !tombstones.erases(
                        &delta.survey_id,
                        &delta.identifier,
                        delta.reference.as_deref(),
                    )
                });
            }
            deltas
        })
        .await?;
        self.inner
            .catalog
            .apply_session_stats(&self.inner.config.instance_id, through_lsn, &deltas)
            .await?;
        {
            let mut references = self.inner.references.lock();
            if references.len() > MAX_REMEMBERED_REFERENCES {
                // A fresh map, not `clear`, so the memory is returned too.
                *references = HashMap::new();
            }
            for delta in &deltas {
                if let Some(reference) = &delta.reference {
                    let key = (delta.survey_id.clone(), delta.identifier.clone());
                    if delta.reference_explicit || !references.contains_key(&key) {
                        references.insert(key, reference.clone());
                    }
                }
            }
        }
        self.inner.stats_pending.lock().drain_through(through_lsn);
        self.inner
            .stats_watermark
            .store(through_lsn, Ordering::Release);
        self.truncate_log().await;
        Ok(deltas.len())
    }

    /// Writes every batch logged so far to the lake and makes the files live.
    pub async fn flush(&self) -> Result<FlushReport, IngestError> {
        // References learned from the stream first, so the files carry them. A failure here
        // must not stop the lake: the files then fall back to what the catalog knows.
        if let Err(error) = self.apply_stats().await {
            tracing::warn!(%error, "statistics not applied before the flush");
        }
        let _guard = self.inner.flush_lock.lock().await;
        let retry_through = *self.inner.retry_through.lock();
        // Bounded, so a backlog (after an outage or a long replay) is written in several files
        // instead of being decoded all at once.
        let records = self
            .inner
            .lake_pending
            .lock()
            .snapshot_prefix(self.inner.config.flush_bytes, retry_through);
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Ok(FlushReport::default());
        };
        let (first_lsn, through_lsn) = (first.lsn, last.lsn);
        // From here on a failure repeats this exact range.
        *self.inner.retry_through.lock() = Some(through_lsn);
        let references = self.references_for(&records).await?;
        // Tombstones as of now, not of the last statistics tick: an instance that was stalled
        // (or partitioned) past a deletion's wait for it must not write the session back.
        self.refresh_tombstones().await?;
        let tombstones = self.tombstones_of(records.iter().map(|record| &record.survey_id));
        let instance = self.inner.config.instance_id.clone();
        let files = tokio::task::spawn_blocking(move || {
            build_event_files(
                &records,
                &references,
                tombstones.as_ref(),
                &instance,
                first_lsn,
                through_lsn,
            )
        })
        .await??;

        let mut committed = Vec::with_capacity(files.len());
        let mut events = 0;
        let mut outcome = Ok(());
        for (bytes, file) in files {
            events += file.row_count;
            if let Err(error) = self.inner.lake.put_durable(&file.path, bytes).await {
                outcome = Err(IngestError::from(error));
                break;
            }
            committed.push(file);
        }
        if outcome.is_ok() {
            outcome = self
                .inner
                .catalog
                .commit_event_files(&self.inner.config.instance_id, through_lsn, &committed)
                .await
                .map_err(IngestError::from);
        }
        if let Err(error) = outcome {
            // Uncommitted uploads are invisible to the catalog, but not to a reader listing the
            // folder: take them back now rather than at the next start.
            for file in &committed {
                if let Err(cleanup) = self.inner.lake.delete(&file.path).await {
                    tracing::warn!(path = file.path, error = %cleanup, "could not remove an uncommitted file");
                }
            }
            return Err(error);
        }
        *self.inner.retry_through.lock() = None;
        let backlog = {
            let mut pending = self.inner.lake_pending.lock();
            pending.drain_through(through_lsn);
            pending.bytes
        };
        if backlog >= self.inner.config.flush_bytes {
            self.inner.flush_wanted.notify_one();
        }
        self.inner
            .lake_watermark
            .store(through_lsn, Ordering::Release);
        self.inner.wal.request_roll();
        self.truncate_log().await;
        tracing::debug!(
            files = committed.len(),
            events,
            through_lsn,
            "flushed to the lake"
        );
        Ok(FlushReport {
            files: committed.len(),
            events,
            through_lsn,
        })
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
        Ok(report)
    }

    /// Where the log and its two consumers stand. Everything at or below both watermarks is
    /// in the lake and in the session statistics; when both reach `last_lsn`, the log holds
    /// nothing that is not elsewhere (what `telltale drain` checks before an instance retires).
    pub fn log_position(&self) -> LogPosition {
        LogPosition {
            last_lsn: self.inner.wal.last_lsn(),
            lake_watermark: self.inner.lake_watermark.load(Ordering::Acquire),
            stats_watermark: self.inner.stats_watermark.load(Ordering::Acquire),
        }
    }

    /// Flushes until nothing logged so far is left outside the lake.
    pub async fn flush_all(&self) -> Result<FlushReport, IngestError> {
        let mut total = FlushReport::default();
        loop {
            let report = self.flush().await?;
            total.files += report.files;
            total.events += report.events;
            total.through_lsn = total.through_lsn.max(report.through_lsn);
            if report.through_lsn == 0 || self.inner.lake_pending.lock().records.is_empty() {
                return Ok(total);
            }
        }
    }

    /// Makes every batch acknowledged before this call visible to readers: in the lake's live
    /// files and in the session statistics. Batches acknowledged meanwhile may be included too.
    /// A scoring run calls this first, so it scores everything acknowledged before it started.
    pub async fn make_visible(&self) -> Result<(), IngestError> {
        let target = self.inner.wal.last_lsn();
        while self.inner.lake_watermark.load(Ordering::Acquire) < target {
            let report = self.flush().await?;
            if report.through_lsn == 0 {
                // Nothing was pending: every record up to `target` was empty or dropped.
                break;
            }
        }
        while self.inner.stats_watermark.load(Ordering::Acquire) < target {
            if self.apply_stats().await? == 0 && self.inner.stats_pending.lock().records.is_empty()
            {
                break;
            }
        }
        Ok(())
    }

    /// Deletes the log segments both consumers are past. File deletion and directory syncs can
    /// take milliseconds on a busy disk, so they run on a blocking thread, not a runtime worker.
    async fn truncate_log(&self) {
        let through = self.consumed_through();
        let wal = self.inner.wal.clone();
        match tokio::task::spawn_blocking(move || wal.truncate_through(through)).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not delete consumed write-ahead log segments")
            }
            Err(error) => tracing::warn!(%error, "write-ahead log truncation task failed"),
        }
    }

    /// The log position both consumers (statistics and lake) are past.
    fn consumed_through(&self) -> u64 {
        self.inner
            .stats_watermark
            .load(Ordering::Acquire)
            .min(self.inner.lake_watermark.load(Ordering::Acquire))
    }

    /// The tombstones of the given surveys, `None` when none of them has any (the usual case).
    fn tombstones_of<'a>(&self, surveys: impl Iterator<Item = &'a SurveyId>) -> Option<Tombstones> {
        let tombstones = self.inner.tombstones.read();
        if tombstones.references.is_empty() && tombstones.identifiers.is_empty() {
            return None;
        }
        let mut subset = Tombstones::default();
        for survey in surveys {
            if subset.has_survey(survey) || !tombstones.has_survey(survey) {
                continue;
            }
            if let Some(references) = tombstones.references.get(survey) {
                subset.references.insert(survey.clone(), references.clone());
            }
            if let Some(identifiers) = tombstones.identifiers.get(survey) {
                subset
                    .identifiers
                    .insert(survey.clone(), identifiers.clone());
            }
        }
        (!subset.references.is_empty() || !subset.identifiers.is_empty()).then_some(subset)
    }

    /// Each identifier's reference: learned from the stream, else from the catalog.
    async fn references_for(
        &self,
        records: &[Arc<WalRecord>],
    ) -> Result<HashMap<(SurveyId, String), String>, IngestError> {
        let mut known = HashMap::new();
        let mut missing: HashMap<SurveyId, HashSet<String>> = HashMap::new();
        {
            let memo = self.inner.references.lock();
            for record in records {
                let key = (record.survey_id.clone(), record.identifier.clone());
                if known.contains_key(&key) {
                    continue;
                }
                match memo.get(&key) {
                    Some(reference) => {
                        known.insert(key, reference.clone());
                    }
                    None => {
                        missing.entry(key.0).or_default().insert(key.1);
                    }
                }
            }
        }
        for (survey_id, identifiers) in missing {
            let identifiers: Vec<String> = identifiers.into_iter().collect();
            for chunk in identifiers.chunks(500) {
                for (identifier, reference) in self
                    .inner
                    .catalog
                    .session_references(&survey_id, chunk)
                    .await?
                {
                    known.insert((survey_id.clone(), identifier), reference);
                }
            }
        }
        Ok(known)
    }

    /// Deletes events files this instance wrote but never committed (a crash between the upload
    /// and the catalog commit). Other instances' uploads in flight are left alone.
    async fn remove_orphan_files(&self) -> Result<(), IngestError> {
        let live: HashSet<String> = self
            .inner
            .catalog
            .live_files(LakeFileKind::Events, None)
            .await?
            .into_iter()
            .map(|file| file.file.path)
            .collect();
        let prefix = ObjectPath::from("events");
        let objects: Vec<_> = self
            .inner
            .lake
            .store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(lake::LakeError::from)?;
        for object in objects {
            let path = object.location.to_string();
            let ours =
                lake::events_file_instance(&path) == Some(self.inner.config.instance_id.as_str());
            if ours && !live.contains(&path) {
                tracing::info!(path, "removing an uncommitted events file");
                self.inner.lake.delete(&path).await?;
            }
        }
        Ok(())
    }

    /// Stops the background tasks without flushing and drops the handle, as a killed process
    /// would: the log's lock is released once every task's hold on it is gone, so a test can
    /// start the ingestor again in the same process.
    #[cfg(test)]
    pub(crate) async fn crash(self) {
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

/// Per-identifier statistics of a run of log records.
fn session_deltas(records: &[Arc<WalRecord>]) -> Vec<SessionDelta> {
    let mut by_session: HashMap<(&SurveyId, &str), SessionDelta> = HashMap::new();
    for record in records {
        // Bodies in the log were validated before they were logged.
        let Ok(events) = event_row::stats_events(&record.body) else {
            continue;
        };
        if events.is_empty() {
            continue;
        }
        let delta = by_session
            .entry((&record.survey_id, record.identifier.as_str()))
            .or_insert_with(|| SessionDelta {
                survey_id: record.survey_id.clone(),
                identifier: record.identifier.clone(),
                reference: batch::normalize_reference(&record.identifier),
                reference_explicit: false,
                event_count: 0,
                first_event_at: i64::MAX,
                last_event_at: i64::MIN,
            });
        for event in events {
            let time = event_row::plausible_time(event.event_time, record.received_at);
            delta.event_count += 1;
            delta.first_event_at = delta.first_event_at.min(time);
            delta.last_event_at = delta.last_event_at.max(time);
            if let Some(reference) = event
                .interview_id
                .as_deref()
                .and_then(batch::normalize_reference)
            {
                delta.reference = Some(reference);
                delta.reference_explicit = true;
            }
        }
    }
    by_session.into_values().collect()
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// UTC calendar date of a day number (days since 1970-01-01), `YYYY-MM-DD`.
fn utc_date(day: i64) -> String {
    chrono::DateTime::from_timestamp_millis(day.saturating_mul(MILLIS_PER_DAY))
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

/// Encodes the records as one Parquet file per (survey, date) partition, rows sorted by session.
///
/// Records are ordered by partition, identifier and log position, then decoded one batch at a
/// time straight into column builders: memory holds the compact columnar form, never every
/// decoded event of the flush at once.
fn build_event_files(
    records: &[Arc<WalRecord>],
    references: &HashMap<(SurveyId, String), String>,
    tombstones: Option<&Tombstones>,
    instance: &str,
    first_lsn: u64,
    through_lsn: u64,
) -> Result<Vec<(Vec<u8>, NewLakeFile)>, IngestError> {
    // Partitioned by UTC day number; the date text is formatted once per partition.
    let mut ordered: Vec<(i64, &Arc<WalRecord>)> = records
        .iter()
        .map(|record| (record.received_at.div_euclid(MILLIS_PER_DAY), record))
        .collect();
    ordered.sort_unstable_by(|(day_a, a), (day_b, b)| {
        a.survey_id
            .cmp(&b.survey_id)
            .then_with(|| day_a.cmp(day_b))
            .then_with(|| a.identifier.cmp(&b.identifier))
            .then_with(|| a.lsn.cmp(&b.lsn))
    });

    // References named by `session` events anywhere in this range, so a batch logged before
    // its session's `session` event was applied to the statistics still gets the reference
    // lookup will report.
    let mut named: HashMap<(&SurveyId, &str), String> = HashMap::new();
    for record in records {
        if !contains(&record.body, b"session") {
            continue;
        }
        let Ok(events) = event_row::stats_events(&record.body) else {
            continue;
        };
        for event in events {
            if let Some(reference) = event
                .interview_id
                .as_deref()
                .and_then(batch::normalize_reference)
            {
                named.insert((&record.survey_id, record.identifier.as_str()), reference);
            }
        }
    }

    let mut files = Vec::new();
    let mut builder = EventsBatchBuilder::new();
    let mut start = 0;
    while start < ordered.len() {
        let (day, first) = &ordered[start];
        let survey_id = &first.survey_id;
        let date = utc_date(*day);
        let end = start
            + ordered[start..]
                .iter()
                .take_while(|(other_day, other)| other_day == day && &other.survey_id == survey_id)
                .count();
        let mut min_session: Option<&str> = None;
        let mut max_session: Option<&str> = None;
        for (_, record) in &ordered[start..end] {
            // Bodies in the log were validated before they were logged.
            let Ok(rows) = event_row::decode_batch(&record.body) else {
                continue;
            };
            if rows.is_empty() {
                continue;
            }
            // A session event in the batch names the reference; else what the stream or the
            // catalog linked to the identifier; else the identifier itself when it is a UUID.
            let reference = rows
                .iter()
                .find_map(|row| {
                    row.interview_id
                        .as_deref()
                        .and_then(batch::normalize_reference)
                })
                .or_else(|| {
                    named
                        .get(&(&record.survey_id, record.identifier.as_str()))
                        .cloned()
                })
                .or_else(|| {
                    references
                        .get(&(record.survey_id.clone(), record.identifier.clone()))
                        .cloned()
                })
                .or_else(|| batch::normalize_reference(&record.identifier));
            // Acknowledged before its session was deleted, and still in the log: dropped,
            // never written.
            if tombstones.is_some_and(|tombstones| {
                tombstones.erases(survey_id, &record.identifier, reference.as_deref())
            }) {
                continue;
            }
            builder.append_batch(
                survey_id.as_str(),
                &record.identifier,
                reference.as_deref(),
                record.received_at,
                &rows,
            );
            min_session.get_or_insert(record.identifier.as_str());
            max_session = Some(record.identifier.as_str());
        }
        if !builder.is_empty() {
            let row_count = builder.len() as u64;
            let batch = builder
                .finish()
                .map_err(|error| IngestError::Encode(error.to_string()))?;
            let bytes = events_file::encode_parquet(&batch)
                .map_err(|error| IngestError::Encode(error.to_string()))?;
            let file = NewLakeFile {
                path: lake::events_file_path(
                    survey_id.as_str(),
                    &date,
                    instance,
                    first_lsn,
                    through_lsn,
                ),
                kind: LakeFileKind::Events,
                survey_id: survey_id.clone(),
                partition_date: Some(date),
                row_count,
                size_bytes: bytes.len() as u64,
                min_session: min_session.map(str::to_owned),
                max_session: max_session.map(str::to_owned),
            };
            files.push((bytes, file));
        }
        start = end;
    }
    Ok(files)
}

/// Deleted sessions: references, and the identifiers that were linked to them (as hashes).
#[derive(Debug, Default, Clone)]
struct Tombstones {
    references: HashMap<SurveyId, HashSet<String>>,
    identifiers: HashMap<SurveyId, HashSet<String>>,
    last_reference_id: i64,
    last_identifier_id: i64,
}

impl Tombstones {
    fn has_survey(&self, survey: &SurveyId) -> bool {
        self.references.contains_key(survey) || self.identifiers.contains_key(survey)
    }

    fn has_reference(&self, survey: &SurveyId, reference: &str) -> bool {
        self.references
            .get(survey)
            .is_some_and(|references| references.contains(reference))
    }

    fn has_identifier(&self, survey: &SurveyId, identifier: &str) -> bool {
        self.identifiers.get(survey).is_some_and(|hashes| {
            hashes.contains(&catalog::identifier_tombstone_hash(survey, identifier))
        })
    }

    fn add_identifier_hash(&mut self, survey: SurveyId, hash: String) {
        self.identifiers.entry(survey).or_default().insert(hash);
    }

    /// Whether data of `identifier`, linked to `reference`, belongs to a deleted session.
    fn erases(&self, survey: &SurveyId, identifier: &str, reference: Option<&str>) -> bool {
        reference.is_some_and(|reference| self.has_reference(survey, reference))
            || self.has_identifier(survey, identifier)
    }
}

/// Whether `needle` occurs in `haystack` (SIMD substring search: this runs over every body).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int32Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    struct Fixture {
        dir: tempfile::TempDir,
        catalog: Arc<dyn Catalog>,
        lake: Lake,
        tracking_key: String,
        survey_id: SurveyId,
    }

    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = catalog::open(&format!(
            "sqlite://{}",
            dir.path().join("catalog.db").display()
        ))
        .await
        .expect("catalog");
        let org = catalog.create_organization("org").await.expect("org");
        let survey = catalog
            .provision_survey(&org.id, "s", "S")
            .await
            .expect("survey");
        let lake = Lake::open(&dir.path().join("lake").display().to_string()).expect("lake");
        Fixture {
            tracking_key: survey.tracking_key.to_string(),
            survey_id: survey.id,
            dir,
            catalog,
            lake,
        }
    }

    fn config(fixture: &Fixture, flush_bytes: usize) -> IngestConfig {
        let mut config = IngestConfig::new("test", fixture.dir.path().join("wal"));
        // Background consumers effectively off: the tests drive them.
        config.stats_interval = Duration::from_secs(3600);
        config.flush_interval = Duration::from_secs(3600);
        config.flush_bytes = flush_bytes;
        config
    }

    async fn start(fixture: &Fixture, flush_bytes: usize) -> Result<Ingestor, IngestError> {
        Ingestor::start(
            config(fixture, flush_bytes),
            fixture.catalog.clone(),
            fixture.lake.clone(),
        )
        .await
    }

    fn pointer_batch(start: i32, count: i32) -> Bytes {
        let events: Vec<String> = (start..start + count)
            .map(|i| {
                format!(
                    r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{i},"y":{i},"pointerType":"mouse","trusted":true}}}}"#,
                    1_763_800_000_000i64 + i64::from(i) * 16
                )
            })
            .collect();
        Bytes::from(format!("{{\"events\":[{}]}}", events.join(",")))
    }

    /// (session, x) of every row of every live events file.
    async fn read_events(fixture: &Fixture) -> Vec<(String, i32)> {
        let files = fixture
            .catalog
            .live_files(LakeFileKind::Events, None)
            .await
            .expect("files");
        files
            .iter()
            .flat_map(|file| read_events_of(fixture, &file.file.path))
            .collect()
    }

    #[tokio::test]
    async fn a_backlog_is_flushed_in_bounded_files_sorted_by_session() {
        let fixture = fixture().await;
        let ingestor = start(&fixture, 4096).await.expect("start");
        // Interleave two sessions so sorting has work to do.
        for round in 0..20 {
            for identifier in ["b-session", "a-session"] {
                let accepted = ingestor
                    .accept(
                        &fixture.tracking_key,
                        identifier,
                        pointer_batch(round * 10, 10),
                    )
                    .await
                    .expect("accept");
                assert_eq!(accepted, Accepted::Stored { count: 10 });
            }
        }
        // Part may already be flushed in the background (the backlog passed the bound).
        ingestor.shutdown().await.expect("shutdown");
        let files = fixture
            .catalog
            .live_files(LakeFileKind::Events, None)
            .await
            .expect("files");
        assert!(files.len() > 1, "a 4 KiB flush bound must split 400 events");
        assert_eq!(files.iter().map(|f| f.file.row_count).sum::<u64>(), 400);
        for file in &files {
            let rows = read_events_of(&fixture, &file.file.path);
            let mut sorted = rows.clone();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                rows, sorted,
                "rows of {} sorted by session, arrival order kept",
                file.file.path
            );
        }
        let rows = read_events(&fixture).await;
        assert_eq!(rows.len(), 400);
        for session in ["a-session", "b-session"] {
            let xs: Vec<i32> = rows
                .iter()
                .filter(|(s, _)| s == session)
                .map(|(_, x)| *x)
                .collect();
            assert_eq!(
                xs,
                (0..200).collect::<Vec<_>>(),
                "{session} complete and in order"
            );
        }
    }

    fn read_events_of(fixture: &Fixture, path: &str) -> Vec<(String, i32)> {
        let bytes =
            Bytes::from(std::fs::read(fixture.dir.path().join("lake").join(path)).expect("read"));
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .expect("parquet")
            .build()
            .expect("reader");
        let mut rows = Vec::new();
        for batch in reader {
            let batch = batch.expect("batch");
            let sessions = arrow::compute::cast(batch.column(1), &arrow::datatypes::DataType::Utf8)
                .expect("cast");
            let sessions = sessions.as_string::<i32>();
            let xs = batch.column(6).as_primitive::<Int32Type>();
            assert_eq!(xs.null_count(), 0, "pointer events keep typed x");
            for row in 0..batch.num_rows() {
                rows.push((sessions.value(row).to_owned(), xs.value(row)));
            }
        }
        rows
    }

    #[tokio::test]
    async fn an_unflushed_log_replays_exactly_once_after_a_restart() {
        let fixture = fixture().await;
        {
            let ingestor = start(&fixture, 1 << 20).await.expect("start");
            for round in 0..5 {
                ingestor
                    .accept(&fixture.tracking_key, "s1", pointer_batch(round * 4, 4))
                    .await
                    .expect("accept");
            }
            // Statistics applied, the lake not: the two consumers are at different positions.
            ingestor.apply_stats().await.expect("stats");
            // Stopped without shutdown, like a crash: nothing else reaches the catalog or lake.
            ingestor.crash().await;
        }
        let ingestor = start(&fixture, 1 << 20).await.expect("restart");
        let summaries = fixture
            .catalog
            .lookup_sessions(&fixture.survey_id, &["s1".to_owned()])
            .await
            .expect("lookup");
        assert!(
            summaries.is_empty(),
            "s1 is not a UUID, so it has no reference"
        );
        let rows = read_events(&fixture).await;
        assert_eq!(rows.len(), 20, "replayed into the lake once");
        ingestor.shutdown().await.expect("shutdown");
        // The log stays locked while a handle lives.
        drop(ingestor);
        let restarted = start(&fixture, 1 << 20).await.expect("third start");
        restarted.shutdown().await.expect("shutdown");
        assert_eq!(read_events(&fixture).await.len(), 20, "no second replay");
    }
}
