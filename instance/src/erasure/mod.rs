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
//!    see [`LogPurger`]). An instance not seen within its lease (by the catalog's clock) is
//!    fenced off instead (`fleet`): its epoch in the catalog, then a fence commit to the `events`
//!    table, so that nothing it had in flight can land after the rewrite below;
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
//! its error. An attempt that waits (steps 1 and 2) counts no attempt, and says on the deletion
//! what it waits on and why.
//!
//! - `purger`: an instance's log purge and its reports to the catalog.
//! - `fleet`: what an erasure waits for in the fleet, and the fencing of instances gone silent.

mod fleet;
mod purger;

pub use fleet::{ForgetError, Forgotten, forget_instance};
pub use purger::LogPurger;

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

#[derive(Debug, thiserror::Error)]
enum AttemptError {
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error("flushing the event log failed: {0}")]
    Ingest(#[from] IngestError),
}

/// How an attempt ended, short of an error.
enum Attempt {
    Completed,
    /// Not now: a scoring run is active, an instance has not purged its log, or another
    /// rewrite replaced a file first.
    Deferred(Wait),
}

/// What a deferred attempt waits on, and why (shown on the deletion).
struct Wait {
    on: Waiting,
    reason: String,
}

/// What an erasure can wait on.
enum Waiting {
    Instance(String),
    Run(catalog::RunId),
    /// The lake: a rewrite or an upload in flight.
    Lake,
}

impl Wait {
    fn lake(reason: &str) -> Attempt {
        Attempt::Deferred(Wait {
            on: Waiting::Lake,
            reason: reason.to_owned(),
        })
    }

    /// `waiting_on` as the deletion shows it.
    fn on(&self) -> Option<String> {
        match &self.on {
            Waiting::Instance(instance) => Some(format!("instance {instance}")),
            Waiting::Run(run) => Some(format!("run {run}")),
            Waiting::Lake => None,
        }
    }

    /// The `on` label of `telltale_deletions_waiting`.
    fn label(&self) -> &'static str {
        match self.on {
            Waiting::Instance(_) => "instance",
            Waiting::Run(_) => "run",
            Waiting::Lake => "lake",
        }
    }
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
                refresh: instance_lease / purger::REPORTS_PER_LEASE,
                purge: tokio::sync::Mutex::new(Default::default()),
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
        let mut waiting: std::collections::HashMap<&'static str, u32> =
            std::collections::HashMap::new();
        for deletion in due {
            match self.work(&deletion).await? {
                Worked::Completed => completed += 1,
                Worked::Waiting(label) => *waiting.entry(label).or_default() += 1,
                Worked::Other => {}
            }
        }
        for label in ["instance", "run", "lake"] {
            series::DELETIONS_WAITING
                .with(&[("on", label)])
                .set(f64::from(waiting.get(label).copied().unwrap_or(0)));
        }
        Ok(completed)
    }

    /// One attempt at one deletion, if it can be claimed.
    async fn work(&self, deletion: &SessionDeletion) -> Result<Worked, catalog::Error> {
        let (survey, reference) = (&deletion.survey_id, deletion.reference.as_str());
        if !self
            .catalog
            .claim_deletion(survey, reference, &self.owner, LEASE_MS)
            .await?
        {
            return Ok(Worked::Other);
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
                return Ok(if completed {
                    Worked::Completed
                } else {
                    Worked::Other
                });
            }
            Ok(Attempt::Deferred(wait)) => {
                tracing::debug!(survey = %survey, why = wait.reason, "session erasure deferred");
                series::ERASURES_TOTAL
                    .with(&[("outcome", "deferred")])
                    .increment(1);
                let setback = DeletionSetback::Deferred {
                    retry_at: catalog::now_millis() + 1000,
                    waiting_on: wait.on(),
                    reason: wait.reason.clone(),
                };
                self.catalog
                    .set_back_deletion(survey, reference, &self.owner, &setback)
                    .await?;
                return Ok(Worked::Waiting(wait.label()));
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
        Ok(Worked::Other)
    }

    async fn attempt(
        &self,
        survey: &SurveyId,
        reference: &str,
        phases: &mut Phases,
    ) -> Result<Attempt, AttemptError> {
        if let Some(run) = self.catalog.active_scoring_run(survey).await? {
            return Ok(Attempt::Deferred(Wait {
                on: Waiting::Run(run),
                reason: "a scoring run is active on the survey: its files could bring the \
                         session back"
                    .to_owned(),
            }));
        }
        phases.lap("check");
        if let Some(purger) = &self.purger
            && let Err(error) = purger.purge_if_behind().await
        {
            return Ok(Attempt::Deferred(Wait {
                on: Waiting::Instance(self.owner.clone()),
                reason: format!("instance {} cannot purge its log: {error}", self.owner),
            }));
        }
        phases.lap("purge");
        if let Some(wait) = self.clear_the_fleet(survey, reference).await? {
            return Ok(Attempt::Deferred(wait));
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
        if let Some(run) = self.catalog.active_scoring_run(survey).await? {
            return Ok(Attempt::Deferred(Wait {
                on: Waiting::Run(run),
                reason: "a scoring run started on the survey while its files were rewritten"
                    .to_owned(),
            }));
        }
        if !erase::commit(&self.lake, rewrites).await? {
            return Ok(Wait::lake("another rewrite replaced a file first"));
        }
        phases.lap("commit");
        // Copies no snapshot names any more: what a crashed attempt replaced, compaction
        // inputs kept for readers, uploads of dead writers.
        if erase::sweep(&self.lake, survey_id, &session).await? {
            return Ok(Wait::lake("an upload not yet committed holds the session"));
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

/// What one attempt at a deletion came to, for the worker's tally.
enum Worked {
    Completed,
    /// Deferred, waiting on what the label of `telltale_deletions_waiting` names.
    Waiting(&'static str),
    /// Not claimed, failed, or completed by another worker first.
    Other,
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
    fn backoff_doubles_from_one_second() {
        assert_eq!(
            (1..=5).map(backoff_ms).collect::<Vec<_>>(),
            [1000, 2000, 4000, 8000, 16000]
        );
    }
}
