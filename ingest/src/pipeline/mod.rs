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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use catalog::{Catalog, SessionDelta, SurveyId, TrackingKey, WalConsumer};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;

use crate::batch::{self, BatchError};
use crate::event_row;
use crate::events_batch::EventsBatchBuilder;
use crate::wal::{Append, Wal, WalError, WalRecord};
use lake::{Lake, NewFile, TableKind, tables};

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
        let lake = Lake::open(&dir.path().join("lake").display().to_string(), &[], &[])
            .await
            .expect("lake");
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

    /// A flush larger than a row group is encoded a row group at a time into one file: every
    /// row once, in session order, in full row groups but the last.
    #[test]
    fn a_large_flush_is_one_file_of_full_row_groups() {
        let survey_id = SurveyId::parse("00112233445566778899aabb").expect("id");
        let (sessions, batches, per_batch) = (3, 500, 100);
        let mut records = Vec::new();
        let mut lsn = 0;
        // Interleaved as they arrive; the flush sorts them by session.
        for batch in 0..batches {
            for session in 0..sessions {
                lsn += 1;
                records.push(Arc::new(WalRecord {
                    lsn,
                    received_at: 1_763_800_000_000 + lsn as i64,
                    survey_id: survey_id.clone(),
                    identifier: format!("session-{session}"),
                    body: pointer_batch(batch * per_batch, per_batch),
                }));
            }
        }
        let files = flush::build_event_files(&records, &HashMap::new(), None, "test", 1, lsn)
            .expect("files");
        assert_eq!(files.len(), 1, "one survey, one day: one file");
        let (bytes, file) = &files[0];
        let total = (sessions * batches * per_batch) as usize;
        assert_eq!(file.rows, total as u64);

        let reader =
            ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes.clone())).expect("parquet");
        let groups: Vec<usize> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|group| group.num_rows() as usize)
            .collect();
        assert_eq!(
            groups,
            vec![
                tables::EVENTS_ROW_GROUP_ROWS,
                total - tables::EVENTS_ROW_GROUP_ROWS
            ]
        );
        let mut rows = Vec::new();
        for batch in reader.build().expect("reader") {
            let batch = batch.expect("batch");
            let sessions = arrow::compute::cast(
                batch.column_by_name("session_id").expect("session_id"),
                &arrow::datatypes::DataType::Utf8,
            )
            .expect("cast");
            let sessions = sessions.as_string::<i32>();
            let xs = batch
                .column_by_name("x")
                .expect("x")
                .as_primitive::<Int32Type>();
            for row in 0..batch.num_rows() {
                rows.push((sessions.value(row).to_owned(), xs.value(row)));
            }
        }
        let expected: Vec<(String, i32)> = (0..sessions)
            .flat_map(|session| {
                (0..batches * per_batch).map(move |x| (format!("session-{session}"), x))
            })
            .collect();
        assert_eq!(rows, expected);
    }

    /// (session, x) of every row of every live events file.
    async fn read_events(fixture: &Fixture) -> Vec<(String, i32)> {
        let files = fixture
            .lake
            .table(TableKind::Events)
            .live_files(None)
            .await
            .expect("files");
        files
            .iter()
            .flat_map(|file| read_events_of(fixture, &file.path))
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
            .lake
            .table(TableKind::Events)
            .live_files(None)
            .await
            .expect("files");
        assert!(files.len() > 1, "a 4 KiB flush bound must split 400 events");
        assert_eq!(files.iter().map(|f| f.rows.unwrap_or(0)).sum::<u64>(), 400);
        for file in &files {
            let rows = read_events_of(&fixture, &file.path);
            let mut sorted = rows.clone();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                rows, sorted,
                "rows of {} sorted by session, arrival order kept",
                file.path
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
