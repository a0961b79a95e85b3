//! Session deletion: the worker that erases a deleted session from the log, the lake and the
//! catalog, and the log purger of fleet-wide erasure. The lake's part of an erasure is
//! [`lake::operations::erase`]'s.
//!
//! An attempt at one deletion (the tombstone is already in the catalog, written before the 202):
//!
//! 1. wait while a scoring run writes the survey's scores (the run's files would bring the
//!    session back), without counting an attempt;
//! 2. load the tombstone into the collector, then purge the write-ahead log: everything logged
//!    is flushed (the deleted session's batches are dropped on the way), and every segment is
//!    deleted; then wait, without counting an attempt, until every other serving instance seen
//!    within its lease has done the same (each reports the tombstones its last purge covered,
//!    see [`LogPurger`]), so no log in the fleet holds the session and no instance can write it
//!    to the lake after the rewrite below;
//! 3. find the live files holding the session: events files whose session range covers one of
//!    its identifiers, every features and scores file of the survey; rewrite each without the
//!    session's rows (the three tables side by side, two files of a table at a time);
//! 4. in one catalog transaction: swap the old files for the new, delete the session's
//!    statistics and score, and add its identifiers to the tombstone (as hashes); then delete
//!    the old objects ([`lake::rewrite::replace_files`]);
//! 5. scrub the catalog (its own log still holds the deleted rows' old pages), and mark the
//!    deletion completed.
//!
//! Every step can be repeated, so a crash anywhere is followed by a plain new attempt. A failed
//! attempt is retried after 1, 2, 4 and 8 s; the fifth failure makes the deletion `failed` with
//! its error.

use std::sync::Arc;
use std::time::Duration;

use catalog::{Catalog, DeletionSetback, SessionDeletion, SessionErasure, SurveyId};
use ingest::{IngestError, Ingestor};
use lake::Lake;
use lake::operations::erase;
use lake::rewrite::{RewriteError, SessionRows};

/// Tries before a deletion is `failed`.
pub const MAX_ATTEMPTS: u32 = 5;
/// How long a worker holds a deletion before another instance may take it over.
const LEASE_MS: i64 = 5 * 60 * 1000;
/// How often the worker looks for due deletions when nothing wakes it.
const POLL_PERIOD: Duration = Duration::from_secs(1);
/// How often a serving instance checks for new tombstones to purge its log of.
const REPORT_PERIOD: Duration = Duration::from_secs(1);
/// A serving instance reports itself alive at least this many times a lease, and at once when
/// its `purged_through` moves. Not every [`REPORT_PERIOD`]: on SQLite each write makes every
/// pooled connection drop its page cache and its map of the file at its next read, and a
/// report a second kept lookups on a million-session survey cold (benches/README.md).
const REPORTS_PER_LEASE: u32 = 4;

#[derive(Debug, thiserror::Error)]
enum AttemptError {
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error("flushing the event log failed: {0}")]
    Ingest(#[from] IngestError),
}

/// A serving instance's side of fleet-wide erasure: whenever it has loaded tombstones newer than
/// its last purge, it purges its write-ahead log, and it reports that it is alive (at least
/// [`REPORTS_PER_LEASE`] times a lease) and which tombstones its last purge covered (at once).
/// A deletion's erasure waits until every instance seen within the instance lease has covered
/// its tombstone.
pub struct LogPurger {
    catalog: Arc<dyn Catalog>,
    ingestor: Ingestor,
    instance: String,
    /// The longest time between two reports (a fraction of the instance lease).
    refresh: Duration,
    purge: tokio::sync::Mutex<PurgeState>,
}

#[derive(Default)]
struct PurgeState {
    /// The newest tombstone id loaded before the last completed purge.
    purged_through: i64,
    /// The last report that reached the catalog: when, and the `purged_through` it carried.
    reported: Option<(std::time::Instant, i64)>,
}

impl LogPurger {
    /// Loads new tombstones; purges the log if any arrived since the last purge; reports.
    /// Returns the tombstone id the log is now purged through.
    pub async fn purge_if_behind(&self) -> Result<i64, IngestError> {
        let mut state = self.purge.lock().await;
        self.ingestor.refresh_tombstones().await?;
        let loaded = self.ingestor.loaded_tombstone_id();
        let result = if loaded > state.purged_through {
            self.ingestor.purge_log().await.map(|()| {
                state.purged_through = loaded;
            })
        } else {
            Ok(())
        };
        // Reported even when the purge failed: the instance is alive, and erasures must keep
        // waiting for it rather than treat it as gone.
        if report_due(state.reported, state.purged_through, self.refresh) {
            let now = std::time::Instant::now();
            self.catalog
                .report_instance(&self.instance, catalog::now_millis(), state.purged_through)
                .await?;
            state.reported = Some((now, state.purged_through));
        }
        result.map(|()| state.purged_through)
    }
}

/// Whether a report is owed: none reached the catalog yet, the purge moved since the last, or the
/// last is `refresh` old.
fn report_due(
    reported: Option<(std::time::Instant, i64)>,
    purged_through: i64,
    refresh: Duration,
) -> bool {
    match reported {
        None => true,
        Some((at, through)) => through != purged_through || at.elapsed() >= refresh,
    }
}

/// How an attempt ended, short of an error.
enum Attempt {
    Completed,
    /// Not now: a scoring run is active, or another rewrite replaced a file first.
    Deferred(&'static str),
}

/// Works deletions in the background. Cheap to clone.
#[derive(Clone)]
pub struct DeletionService {
    catalog: Arc<dyn Catalog>,
    lake: Lake,
    ingestor: Option<Ingestor>,
    /// Present on a serving instance (one with a log).
    purger: Option<Arc<LogPurger>>,
    /// An instance not seen for this long no longer holds up erasures.
    instance_lease: Duration,
    owner: String,
    wake: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for DeletionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeletionService")
            .field("owner", &self.owner)
            .finish()
    }
}

impl DeletionService {
    pub fn new(
        catalog: Arc<dyn Catalog>,
        lake: Lake,
        ingestor: Option<Ingestor>,
        owner: String,
        instance_lease: Duration,
    ) -> DeletionService {
        let purger = ingestor.as_ref().map(|ingestor| {
            Arc::new(LogPurger {
                catalog: Arc::clone(&catalog),
                ingestor: ingestor.clone(),
                instance: owner.clone(),
                refresh: instance_lease / REPORTS_PER_LEASE,
                purge: tokio::sync::Mutex::new(PurgeState::default()),
            })
        });
        DeletionService {
            catalog,
            lake,
            ingestor,
            purger,
            instance_lease,
            owner,
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// On a serving instance: looks for new tombstones every [`REPORT_PERIOD`], purges the log
    /// when any arrived and reports the instance (see [`LogPurger`]), until the task is dropped.
    pub fn spawn_purger(&self) -> Option<tokio::task::JoinHandle<()>> {
        let purger = Arc::clone(self.purger.as_ref()?);
        Some(tokio::spawn(async move {
            loop {
                if let Err(error) = purger.purge_if_behind().await {
                    tracing::warn!(%error, "could not purge the log of deleted sessions; erasures wait for this instance");
                }
                tokio::time::sleep(REPORT_PERIOD).await;
            }
        }))
    }

    /// Records a deletion (tombstone first) and makes this instance's collector discard the
    /// session's batches before returning; the erasure follows in the background.
    pub async fn request(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<SessionDeletion, catalog::Error> {
        let deletion = self
            .catalog
            .request_session_deletion(survey, reference)
            .await?;
        if let Some(ingestor) = &self.ingestor
            && let Err(error) = ingestor.refresh_tombstones().await
        {
            // The background refresh picks it up within a stats interval.
            tracing::warn!(%error, "could not load the new tombstone at once");
        }
        self.wake.notify_one();
        Ok(deletion)
    }

    /// Works due deletions until the task is dropped. (What crashed rewrites left is the
    /// vacuum's: see [`crate::compaction::spawn`].)
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = service.work_due().await {
                    tracing::warn!(%error, "could not look for deletions to work");
                }
                let _ = tokio::time::timeout(POLL_PERIOD, service.wake.notified()).await;
            }
        })
    }

    /// Works every deletion that is due now. Returns how many completed.
    pub async fn work_due(&self) -> Result<usize, catalog::Error> {
        let due = self
            .catalog
            .claimable_deletions(&self.owner, catalog::now_millis())
            .await?;
        // Due and not held by a live worker, as this instance saw it last.
        series::DELETIONS_DUE.get().set(due.len() as f64);
        let mut completed = 0;
        for deletion in due {
            if self.work(&deletion).await? {
                completed += 1;
            }
        }
        Ok(completed)
    }

    /// One attempt at one deletion, if it can be claimed. Returns whether it completed.
    async fn work(&self, deletion: &SessionDeletion) -> Result<bool, catalog::Error> {
        let (survey, reference) = (&deletion.survey_id, deletion.reference.as_str());
        if !self
            .catalog
            .claim_deletion(survey, reference, &self.owner, LEASE_MS)
            .await?
        {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let mut phases = Phases::default();
        let setback = match self.attempt(survey, reference, &mut phases).await {
            Ok(Attempt::Completed) => {
                let completed = self
                    .catalog
                    .complete_deletion(survey, reference, &self.owner)
                    .await?;
                tracing::info!(
                    survey = %survey,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    phases = %phases,
                    "session erased"
                );
                series::ERASURES_TOTAL
                    .with(&[("outcome", "completed")])
                    .increment(1);
                series::ERASURE_SECONDS.get().record(started.elapsed());
                return Ok(completed);
            }
            Ok(Attempt::Deferred(why)) => {
                tracing::debug!(survey = %survey, why, "session erasure deferred");
                series::ERASURES_TOTAL
                    .with(&[("outcome", "deferred")])
                    .increment(1);
                DeletionSetback::Deferred {
                    retry_at: catalog::now_millis() + 1000,
                }
            }
            Err(error) => {
                let attempt = deletion.attempts + 1;
                tracing::warn!(survey = %survey, attempt, %error, "session erasure failed");
                series::ERASURES_TOTAL
                    .with(&[("outcome", "failed")])
                    .increment(1);
                DeletionSetback::Failed {
                    error: error.to_string(),
                    retry_at: catalog::now_millis() + backoff_ms(attempt),
                    max_attempts: MAX_ATTEMPTS,
                }
            }
        };
        self.catalog
            .set_back_deletion(survey, reference, &self.owner, &setback)
            .await?;
        Ok(false)
    }

    async fn attempt(
        &self,
        survey: &SurveyId,
        reference: &str,
        phases: &mut Phases,
    ) -> Result<Attempt, AttemptError> {
        if self.catalog.has_active_scoring_run(survey).await? {
            return Ok(Attempt::Deferred("a scoring run is active on the survey"));
        }
        phases.lap("check");
        if let Some(purger) = &self.purger {
            purger.purge_if_behind().await?;
        }
        phases.lap("purge");
        let lease_ms = i64::try_from(self.instance_lease.as_millis()).unwrap_or(i64::MAX);
        let waiting = self
            .catalog
            .instances_yet_to_purge(
                survey,
                reference,
                catalog::now_millis().saturating_sub(lease_ms),
            )
            .await?;
        if !waiting.is_empty() {
            tracing::debug!(?waiting, "erasure waits for instances to purge their logs");
            return Ok(Attempt::Deferred(
                "other instances have not yet purged their logs",
            ));
        }
        let identifiers = self
            .catalog
            .reference_identifiers(survey, reference)
            .await?;
        let session = Arc::new(SessionRows {
            reference: reference.to_owned(),
            identifiers: identifiers.iter().cloned().collect(),
        });
        phases.lap("fleet");

        let survey_id = survey.as_str();
        // The three tables side by side, step by step: their rewrites (reads and re-encodes on
        // blocking threads), their commits, their sweeps. benches/README.md (`scoring_run`)
        // has the steps' times.
        let rewrites = erase::rewrite_tables(&self.lake, survey_id, &session).await?;
        phases.lap("rewrite");
        phases.files = rewrites.iter().fold((0, 0), |(probed, removed), rewrite| {
            (probed + rewrite.probed, removed + rewrite.removed.len())
        });
        // A run that started while the files were rewritten would lose them under its scan.
        if self.catalog.has_active_scoring_run(survey).await? {
            return Ok(Attempt::Deferred("a scoring run started on the survey"));
        }
        if !erase::commit(&self.lake, rewrites).await? {
            return Ok(Attempt::Deferred("another rewrite replaced a file first"));
        }
        phases.lap("commit");
        // Copies no snapshot names any more: what a crashed attempt replaced, compaction
        // inputs kept for readers, uploads of dead writers.
        if erase::sweep(&self.lake, survey_id, &session).await? {
            return Ok(Attempt::Deferred(
                "an upload not yet committed holds the session",
            ));
        }
        phases.lap("sweep");
        let erasure = SessionErasure {
            survey_id: survey.clone(),
            reference: reference.to_owned(),
            identifier_hashes: identifiers
                .iter()
                .map(|identifier| catalog::identifier_tombstone_hash(survey, identifier))
                .collect(),
            identifiers,
        };
        self.catalog.erase_session_rows(&erasure).await?;
        if let Some(ingestor) = &self.ingestor {
            ingestor.refresh_tombstones().await?;
        }
        phases.lap("catalog");
        self.catalog.scrub().await?;
        phases.lap("scrub");
        Ok(Attempt::Completed)
    }
}

/// Where an attempt spent its time, step by step (the log line of a completed erasure), so
/// that an erasure's latency can be read without a profiler.
struct Phases {
    lap: std::time::Instant,
    spent: Vec<(&'static str, Duration)>,
    /// Live files probed for the session, and those of them replaced or removed.
    files: (usize, usize),
}

impl Default for Phases {
    fn default() -> Self {
        Phases {
            lap: std::time::Instant::now(),
            spent: Vec::new(),
            files: (0, 0),
        }
    }
}

impl Phases {
    /// Ends the step `name` (summed with an earlier step of that name).
    fn lap(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        let elapsed = now - self.lap;
        self.lap = now;
        match self.spent.iter_mut().find(|(step, _)| *step == name) {
            Some((_, total)) => *total += elapsed,
            None => self.spent.push((name, elapsed)),
        }
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, (name, spent)) in self.spent.iter().enumerate() {
            let separator = if index == 0 { "" } else { " " };
            write!(f, "{separator}{name}={:.1}ms", spent.as_secs_f64() * 1000.0)?;
        }
        write!(f, " files={}/{}", self.files.0, self.files.1)
    }
}

/// Wait before the next try after `attempt` failed ones: 1, 2, 4, 8 s...
fn backoff_ms(attempt: u32) -> i64 {
    1000 << attempt.saturating_sub(1).min(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_reports_when_its_purge_moves_and_a_quarter_lease_after_the_last() {
        let refresh = Duration::from_secs(30) / REPORTS_PER_LEASE;
        let now = std::time::Instant::now();
        assert!(report_due(None, 0, refresh), "the first report");
        assert!(!report_due(Some((now, 7)), 7, refresh), "nothing new");
        assert!(report_due(Some((now, 7)), 8, refresh), "a purge moved");
        let earlier = now
            .checked_sub(refresh)
            .expect("a monotonic clock this old");
        assert!(report_due(Some((earlier, 7)), 7, refresh), "the refresh");
    }

    #[test]
    fn backoff_doubles_from_one_second() {
        assert_eq!(
            (1..=5).map(backoff_ms).collect::<Vec<_>>(),
            [1000, 2000, 4000, 8000, 16000]
        );
    }
}
