//! Executing scoring runs: claim, make events visible, plan, scan, score, publish, report.
//!
//! A worker (a server instance or `telltale score`) owns a run through a lease in the catalog
//! and renews it while it works; every write it makes is fenced by that ownership, so two
//! workers never both publish for one run. A run whose worker died is claimed again (by the
//! same instance on restart at once, by any other once the lease expires) and resumed:
//! sessions the run already scored count as scored and are not scored again.
//!
//! - `horizon`: the fleet's flushes before a run plans, and the sessions it defers.
//! - `lease`: renewing the claim, and what a renewal tells the worker.
//! - `plan`: which sessions a run scores, in passes that bound a scan's memory.
//! - `pipeline`: the run's work, each step's publishing overlapping the next step's compute.
//! - `publish`: results into the lake, then the fenced record; and an attempt's leftovers.
//! - `service`: the background service a server runs ([`ScoringService`]).

mod horizon;
mod lease;
mod pipeline;
mod plan;
mod publish;
mod service;

use std::sync::Arc;
use std::time::Duration;

use catalog::{Catalog, RunId, RunOutcome, RunProgress};
use lake::Lake;
use parking_lot::Mutex;
use query::LakeQuery;

use crate::model::Model;

pub use service::ScoringService;

/// Tuning of the scoring worker.
#[derive(Debug, Clone)]
pub struct ScoringSettings {
    /// Sessions scored and published per step; counters move after each step. A step costs a
    /// Delta commit to each results table and a catalog transaction besides its sessions'
    /// work, so steps are large: at 5,000 small sessions the commits took longer than the
    /// scoring (benches/README.md, scoring_run).
    pub chunk_sessions: usize,
    /// Most events held in memory at once: a larger survey is scanned in several passes over
    /// ranges of its sessions.
    pub max_events_per_pass: u64,
    /// Pause between steps, so a run can be throttled (and observed mid-way in tests).
    pub pause_between_chunks: Duration,
    /// How long a worker's claim on a run lasts without renewal.
    pub lease: Duration,
    /// An instance not seen for this long is not asked to flush (the fleet's instance lease).
    pub instance_lease: Duration,
    /// How long a run waits for the other live instances to flush what they acknowledged
    /// before it plans; sessions whose events are still missing then are deferred.
    pub fleet_flush_wait: Duration,
}

impl Default for ScoringSettings {
    fn default() -> Self {
        ScoringSettings {
            chunk_sessions: 50_000,
            max_events_per_pass: 12_000_000,
            pause_between_chunks: Duration::ZERO,
            lease: Duration::from_secs(30),
            instance_lease: Duration::from_secs(30),
            fleet_flush_wait: Duration::from_secs(10),
        }
    }
}

/// What holds acknowledged events that may not be in the lake yet (a server's collection
/// pipeline): a run asks it to commit them before it plans. The scorer knows nothing else of
/// collection.
#[async_trait::async_trait]
pub trait Flusher: Send + Sync {
    /// Returns once every event acknowledged before the call is in a committed lake file.
    async fn make_visible(&self) -> Result<(), FlushError>;
}

/// Everything a run needs.
#[derive(Clone)]
pub struct Scorer {
    pub catalog: Arc<dyn Catalog>,
    pub lake: Lake,
    pub query: LakeQuery,
    pub model: Arc<Model>,
    /// The instance's collection pipeline, flushed before a run so it scores everything
    /// acknowledged before it started. `None` for `telltale score` (see its help).
    pub flusher: Option<Arc<dyn Flusher>>,
    pub settings: ScoringSettings,
    /// This worker's name in run leases.
    pub owner: String,
}

impl std::fmt::Debug for Scorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scorer")
            .field("owner", &self.owner)
            .field("model", &self.model.version)
            .finish_non_exhaustive()
    }
}

/// Pauses of one run on a read that timed out while both stores answered their probes, after
/// which it fails instead of pausing again.
const MAX_TIMED_OUT_PAUSES: u32 = 3;

/// Why the event log could not be made visible (the flusher's own error, boxed: the scorer
/// does not know the ingest crate).
pub type FlushError = Box<dyn std::error::Error + Send + Sync>;

/// Why a run stopped before completing.
#[derive(Debug)]
enum Stop {
    Canceled,
    LeaseLost,
    Failed(RunError),
}

/// Why a run failed; its text is what the run's record says.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("could not flush the event log: {0}")]
    Flush(#[source] FlushError),
    #[error("the files of an earlier attempt changed while they were removed")]
    EarlierAttemptChanged,
    #[error("the scoring pool stopped")]
    PoolStopped,
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error(transparent)]
    Scan(#[from] crate::scan::ScanError),
    #[error(transparent)]
    Store(#[from] object_store::Error),
    #[error(transparent)]
    Rewrite(#[from] lake::rewrite::RewriteError),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    Parquet(#[from] datafusion::parquet::errors::ParquetError),
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
}

impl RunError {
    /// Whether the run failed because a store did not answer (the catalog unavailable, the
    /// object store unreachable), as opposed to what it read.
    fn is_outage(&self) -> bool {
        outage::is_store_down(self)
    }
}

impl<E: Into<RunError>> From<E> for Stop {
    fn from(error: E) -> Self {
        Stop::Failed(error.into())
    }
}

/// How a claimed run ended for this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Finished,
    /// Another worker holds the run now; it carries on there.
    Abandoned,
}

impl Scorer {
    /// Whether the catalog or the lake fails to answer a probe within 2 s: a run that failed
    /// then failed for the outage, not for what it read.
    async fn a_store_is_down(&self) -> bool {
        outage::probe_stores(self.catalog.ping(), self.lake.probe())
            .await
            .down()
            .is_some()
    }

    /// Folds the run's records into the catalog's main storage before the run reads as
    /// completed (SQLite: a `TRUNCATE` checkpoint). Until then every read of the pages the run
    /// wrote goes through the write-ahead log, and a checkpoint started after the completion
    /// ran beside the integrator's first lookups, which is what made them slow (benches/README.md,
    /// `scoring_run`). On PostgreSQL the same place vacuums the tables the run wrote, for the
    /// same reason (`Fleet::checkpoint`). Best effort: readers that hold the log for a moment
    /// are waited for briefly, then the run completes unfolded.
    async fn fold_catalog_log(&self) {
        let started = std::time::Instant::now();
        for _ in 0..10 {
            match self.catalog.checkpoint().await {
                Ok(true) => {
                    let elapsed_ms = started.elapsed().as_millis() as u64;
                    tracing::debug!(elapsed_ms, "catalog log folded");
                    return;
                }
                Ok(false) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                Err(error) => {
                    tracing::warn!(%error, "catalog checkpoint failed");
                    return;
                }
            }
        }
        tracing::debug!("catalog busy; checkpoint skipped");
    }

    /// Claims `run` and works it to its end. `on_progress` sees every counter update.
    pub async fn execute(
        &self,
        run: &RunId,
        on_progress: &(dyn Fn(&RunProgress) + Send + Sync),
    ) -> Result<RunEnd, catalog::Error> {
        let Some(claimed) = self
            .catalog
            .claim_scoring_run(run, &self.owner, self.lease_ms())
            .await?
        else {
            return Ok(RunEnd::Abandoned);
        };
        let started = std::time::Instant::now();
        let progress = Arc::new(Mutex::new(RunProgress::default()));
        let heartbeat = self.spawn_heartbeat(claimed.id.clone(), progress.clone());
        let outcome = self.work(&claimed, &progress, on_progress).await;
        if outcome.is_ok() && progress.lock().scored > 0 {
            // Still under the lease: on PostgreSQL this vacuums what a large run wrote, which
            // can take seconds.
            self.fold_catalog_log().await;
        }
        heartbeat.abort();
        let final_progress = progress.lock().clone();
        // One probe per failure answers both questions below: did the run fail for an outage,
        // and, if it paused, did both stores answer meanwhile (a pause that counts).
        let store_down = matches!(outcome, Err(Stop::Failed(_))) && self.a_store_is_down().await;
        let outcome = match outcome {
            Ok(()) => RunOutcome::Completed,
            Err(Stop::Canceled) => RunOutcome::Canceled,
            // A store that does not answer fails no run: the run stays `running` under this
            // worker's name, and the janitor resumes it (as after a crash) once it answers. But
            // a read that keeps timing out while both stores answer their probes is no outage
            // to wait out: after a few such pauses the run fails, saying why, rather than hold
            // its survey's erasures, compactions and runs forever.
            Err(Stop::Failed(error)) if error.is_outage() || store_down => {
                let timed_out = if store_down {
                    None
                } else {
                    self.catalog
                        .note_run_pause(&claimed.id, &self.owner)
                        .await?
                };
                match timed_out {
                    Some(pauses) if pauses >= MAX_TIMED_OUT_PAUSES => RunOutcome::Failed {
                        error: format!(
                            "{error} (this happened {pauses} times while both stores answered: \
                             a read of this survey exceeds its time bound, so the run stopped \
                             rather than pause forever)"
                        ),
                    },
                    _ => {
                        tracing::warn!(
                            run = %claimed.id,
                            %error,
                            "scoring run paused: a store is unavailable; it resumes when the store answers"
                        );
                        return Ok(RunEnd::Abandoned);
                    }
                }
            }
            Err(Stop::Failed(error)) => {
                tracing::warn!(run = %claimed.id, %error, "scoring run failed");
                RunOutcome::Failed {
                    error: error.to_string(),
                }
            }
            Err(Stop::LeaseLost) => return Ok(RunEnd::Abandoned),
        };
        let finished = self
            .catalog
            .finish_scoring_run(&claimed.id, &self.owner, &final_progress, &outcome)
            .await?;
        if finished {
            let status = match outcome {
                RunOutcome::Completed => "completed",
                RunOutcome::Canceled => "canceled",
                RunOutcome::Failed { .. } => "failed",
            };
            series::SCORING_RUNS_TOTAL
                .with(&[("status", status)])
                .increment(1);
            series::SCORING_RUN_SECONDS
                .with(&[("status", status)])
                .record(started.elapsed());
            series::SCORING_SESSIONS_TOTAL
                .with(&[("outcome", "scored")])
                .increment(final_progress.scored);
            series::SCORING_SESSIONS_TOTAL
                .with(&[("outcome", "failed")])
                .increment(final_progress.failed);
            series::SCORING_SESSIONS_TOTAL
                .with(&[("outcome", "deferred")])
                .increment(final_progress.deferred);
        }
        Ok(if finished {
            RunEnd::Finished
        } else {
            RunEnd::Abandoned
        })
    }
}
