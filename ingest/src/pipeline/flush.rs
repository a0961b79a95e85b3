//! From the log to the lake and the catalog: session statistics, flushes into Parquet files,
//! the log's truncation and purge.

use std::collections::BTreeSet;

use super::event_files::build_event_files;
use super::fleet::{FlushGuard, Refused};
use super::*;

/// How many times one flush builds its files again after its guard found a survey's
/// tombstones changed or this instance fenced off, before it reports an error.
const GUARDED_ATTEMPTS: usize = 4;

impl Ingestor {
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
        if self.inner.stats_uncertain.load(Ordering::Acquire) {
            // The last write's answer was lost: it may have committed. What the catalog's
            // watermark covers is applied already and must not be counted twice.
            let applied = self
                .inner
                .catalog
                .wal_watermark(&self.inner.config.instance_id, WalConsumer::Stats)
                .await?;
            self.inner.stats_pending.lock().drain_through(applied);
            self.inner
                .stats_watermark
                .fetch_max(applied, Ordering::AcqRel);
            self.inner.stats_uncertain.store(false, Ordering::Release);
        }
        let records = self
            .inner
            .stats_pending
            .lock()
            .snapshot_prefix(self.inner.config.flush_bytes, None);
        let Some(through_lsn) = records.last().map(|record| record.lsn) else {
            return Ok(0);
        };
        // The epoch before the tombstones: a fence between the two is met by the write below.
        let epoch = self.epoch();
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
        if let Err(error) = self
            .inner
            .catalog
            .apply_session_stats(&self.inner.config.instance_id, epoch, through_lsn, &deltas)
            .await
        {
            // Fenced off: join again (loading the tombstones an erasure went ahead with); the
            // next attempt filters these records again. Any other failure may have committed
            // all the same (an answer lost): the next attempt asks the watermark first.
            if !matches!(error, catalog::Error::Fenced { .. }) {
                self.inner.stats_uncertain.store(true, Ordering::Release);
            }
            self.rejoin_if_fenced(&error).await;
            return Err(error.into());
        }
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
        let started = Instant::now();
        let result = self.flush_once().await;
        match &result {
            Ok(report) if report.through_lsn > 0 => {
                series::LAKE_FLUSH_SECONDS.get().record(started.elapsed());
                series::LAKE_FLUSHES_TOTAL
                    .with(&[("outcome", "ok")])
                    .increment(1);
                series::LAKE_FLUSHED_EVENTS_TOTAL
                    .get()
                    .increment(report.events);
                series::LAKE_FLUSHED_FILES_TOTAL
                    .get()
                    .increment(report.files as u64);
            }
            Ok(_) => {}
            Err(_) => {
                series::LAKE_FLUSHES_TOTAL
                    .with(&[("outcome", "error")])
                    .increment(1);
            }
        }
        result
    }

    async fn flush_once(&self) -> Result<FlushReport, IngestError> {
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
        let surveys: BTreeSet<SurveyId> = records
            .iter()
            .map(|record| record.survey_id.clone())
            .collect();
        let app_id = self.lake_app_id();
        let mut attempt = 0;
        let (files, events) = loop {
            attempt += 1;
            // The epoch first, then tombstones as of now, not of the last statistics tick: an
            // instance that was stalled (or partitioned) past a deletion's wait for it must not
            // write the session back, and the guard below checks both again at the commit.
            let epoch = self.epoch();
            self.refresh_tombstones().await?;
            let generation = self.tombstone_generation(surveys.iter());
            let tombstones = self.tombstones_of(records.iter().map(|record| &record.survey_id));
            let instance = self.inner.config.instance_id.clone();
            let (batch, references) = (records.clone(), references.clone());
            let (files, written) = tokio::task::spawn_blocking(move || {
                build_event_files(
                    &batch,
                    &references,
                    tombstones.as_ref(),
                    &instance,
                    first_lsn,
                    through_lsn,
                )
            })
            .await??;
            let events: u64 = files.iter().map(|(_, file)| file.rows).sum();
            let count = files.len();
            let guard = FlushGuard {
                ingestor: self,
                epoch,
                surveys: surveys.clone(),
                generation,
                written,
            };
            // One publication: a retry of a range whose commit landed (its answer was lost)
            // uploads nothing and reads `AlreadyApplied`; a failure takes its uploads back unless
            // the log cannot tell whether the commit landed (the retry asks it again).
            let publication = self
                .inner
                .lake
                .table(TableKind::Events)
                .publish_guarded(
                    lake::Change::Append,
                    files,
                    &[],
                    Some((&app_id, lsn_version(through_lsn))),
                    Some(&guard),
                )
                .await?;
            match publication {
                lake::Publication::Published(_) => break (count, events),
                lake::Publication::AlreadyApplied => break (0, 0),
                lake::Publication::Conflict => return Err(IngestError::FlushConflict),
                lake::Publication::Uncertain(error) => return Err(error.into()),
                lake::Publication::Refused(refusal) => {
                    let refused = refusal.downcast::<Refused>().map(|refused| *refused);
                    match refused {
                        Ok(Refused::Fenced(epoch)) => {
                            tracing::warn!(
                                epoch,
                                "a flush of a fenced-off epoch was refused; it is built again"
                            );
                            self.rejoin(epoch).await?;
                        }
                        Ok(Refused::Stale) => {
                            tracing::info!(
                                "a flush's surveys gained a tombstone in flight; it is built again"
                            );
                        }
                        Ok(Refused::Catalog(error)) => return Err(error.into()),
                        Err(other) => return Err(IngestError::Guard(other.to_string())),
                    }
                    if attempt >= GUARDED_ATTEMPTS {
                        return Err(IngestError::Guard(format!(
                            "the flush was refused {attempt} times in a row"
                        )));
                    }
                }
            }
        };
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
        tracing::debug!(files, events, through_lsn, "flushed to the lake");
        Ok(FlushReport {
            files,
            events,
            through_lsn,
        })
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
    pub(super) async fn truncate_log(&self) {
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
    pub(super) fn consumed_through(&self) -> u64 {
        self.inner
            .stats_watermark
            .load(Ordering::Acquire)
            .min(self.inner.lake_watermark.load(Ordering::Acquire))
    }

    /// Each identifier's reference: learned from the stream, else from the catalog.
    pub(super) async fn references_for(
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

    /// The application id of this instance's flushes in the `events` table's log: its
    /// version is the log position the last committed flush covers.
    pub(super) fn lake_app_id(&self) -> String {
        lake_app_id(&self.inner.config.instance_id)
    }

    /// Deletes events files this instance wrote but never committed (a crash between the upload
    /// and the commit): its files past the log position its last commit covers. Other
    /// instances' uploads in flight are left alone.
    pub(super) async fn remove_orphan_files(&self) -> Result<(), IngestError> {
        let table = self.inner.lake.table(TableKind::Events);
        let committed = table.app_version(&self.lake_app_id()).await?.unwrap_or(0);
        let instance = &self.inner.config.instance_id;
        let removed = table
            .delete_uncommitted("events", |path| {
                tables::events_file_origin(path).is_some_and(|(origin, _, last)| {
                    origin == instance && lsn_version(last) > committed
                })
            })
            .await?;
        for path in removed {
            tracing::info!(path, "removed an uncommitted events file");
        }
        Ok(())
    }
}

/// The application id of an instance's flushes in the `events` table's log.
pub(super) fn lake_app_id(instance: &str) -> String {
    format!("telltale-ingest-{instance}")
}

/// A log position as a Delta application transaction version.
pub(super) fn lsn_version(lsn: u64) -> i64 {
    i64::try_from(lsn).unwrap_or(i64::MAX)
}

/// Per-identifier statistics of a run of log records.
pub(super) fn session_deltas(records: &[Arc<WalRecord>]) -> Vec<SessionDelta> {
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
                first_received_at: record.received_at,
                last_received_at: record.received_at,
            });
        delta.first_received_at = delta.first_received_at.min(record.received_at);
        delta.last_received_at = delta.last_received_at.max(record.received_at);
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
