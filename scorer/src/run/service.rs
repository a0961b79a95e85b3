//! The background service a server runs: it starts runs and works them here, and claims the
//! runs of workers that crashed or stalled.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use catalog::{RunId, ScoringRun, SurveyId};
use parking_lot::Mutex;

use super::Scorer;

/// Runs scoring in the background for a server: starts runs, and claims runs left by crashed
/// or stalled workers.
#[derive(Debug, Clone)]
pub struct ScoringService {
    scorer: Scorer,
    active: Arc<Mutex<HashSet<RunId>>>,
}

impl ScoringService {
    pub fn new(scorer: Scorer) -> ScoringService {
        ScoringService {
            scorer,
            active: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Works `run` in the background unless this instance already does.
    pub fn spawn(&self, run: RunId) {
        if !self.active.lock().insert(run.clone()) {
            return;
        }
        let service = self.clone();
        tokio::spawn(async move {
            match service.scorer.execute(&run, &|_| {}).await {
                // The run folded the catalog's log before it completed (`Scorer::execute`).
                Ok(end) => tracing::info!(%run, ?end, "scoring run ended"),
                Err(error) => {
                    tracing::error!(%run, %error, "scoring run stopped on a catalog error; it will be resumed")
                }
            }
            service.active.lock().remove(&run);
        });
    }

    /// Claims every run that has no live worker: this instance's runs after a restart at once,
    /// other workers' once their lease has expired.
    pub async fn resume_claimable(&self) -> Result<usize, catalog::Error> {
        let runs = self
            .scorer
            .catalog
            .claimable_scoring_runs(&self.scorer.owner)
            .await?;
        let mut resumed = 0;
        for run in runs {
            if !self.active.lock().contains(&run.id) {
                tracing::info!(run = %run.id, survey = %run.survey_id, "resuming scoring run");
                self.spawn(run.id);
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Resumes claimable runs now and then every `period`, until the task is dropped.
    pub fn spawn_janitor(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = service.resume_claimable().await {
                    tracing::warn!(%error, "could not look for scoring runs to resume");
                }
                tokio::time::sleep(period).await;
            }
        })
    }

    /// Starts a run for `survey` (or returns the active one) and works it here.
    pub async fn start(
        &self,
        survey: &SurveyId,
        force: bool,
    ) -> Result<ScoringRun, catalog::Error> {
        let (run, created) = self.scorer.catalog.start_scoring_run(survey, force).await?;
        if created {
            self.spawn(run.id.clone());
        }
        Ok(run)
    }

    pub fn scorer(&self) -> &Scorer {
        &self.scorer
    }
}
