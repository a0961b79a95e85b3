//! The run's lease: renewing it while the worker works, and what a renewal tells the worker
//! (carry on, stop for a cancel, or give the run up to the worker that holds it now).

use std::sync::Arc;
use std::time::Duration;

use catalog::{RunControl, RunId, RunProgress, ScoringRun};
use parking_lot::Mutex;

use super::{Scorer, Stop};

impl Scorer {
    pub(super) fn lease_ms(&self) -> i64 {
        lease_millis(self.settings.lease)
    }

    /// Renews the lease while a long step (a scan) reports nothing.
    pub(super) fn spawn_heartbeat(
        &self,
        run: RunId,
        progress: Arc<Mutex<RunProgress>>,
    ) -> tokio::task::JoinHandle<()> {
        let scorer = self.clone();
        tokio::spawn(async move {
            let period = heartbeat_period(scorer.settings.lease);
            loop {
                tokio::time::sleep(period).await;
                let current = progress.lock().clone();
                if let Err(error) = scorer
                    .catalog
                    .report_run_progress(&run, &scorer.owner, scorer.lease_ms(), &current)
                    .await
                {
                    tracing::warn!(%run, %error, "could not renew the run's lease");
                }
            }
        })
    }

    pub(super) async fn report(
        &self,
        run: &ScoringRun,
        progress: &Mutex<RunProgress>,
        on_progress: &(dyn Fn(&RunProgress) + Send + Sync),
    ) -> Result<(), Stop> {
        let current = progress.lock().clone();
        on_progress(&current);
        let control = self
            .catalog
            .report_run_progress(&run.id, &self.owner, self.lease_ms(), &current)
            .await?;
        steer(control)
    }
}

/// The lease in the catalog's unit; one too long to count in it never expires.
fn lease_millis(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

/// How often the heartbeat renews: three times a lease, so one late or failed renewal does not
/// lose the run.
fn heartbeat_period(lease: Duration) -> Duration {
    lease / 3
}

/// Whether the worker carries on after a report, and why it stops if not.
fn steer(control: RunControl) -> Result<(), Stop> {
    match control {
        RunControl::Continue => Ok(()),
        RunControl::CancelRequested => Err(Stop::Canceled),
        RunControl::LeaseLost => Err(Stop::LeaseLost),
    }
}

#[cfg(test)]
mod tests;
