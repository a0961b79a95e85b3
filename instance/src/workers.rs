//! The background workers a serving instance runs: the scoring janitor (runs that lost their
//! worker), the erasure worker and the log purger, and the compaction with its vacuum. Started
//! together, stopped together: dropping [`Workers`] aborts every one between its steps' awaits,
//! which each worker's steps survive (a cut-short erasure or compaction is repeated).

use std::time::Duration;

use lake::operations::compact::CompactionConfig;
use tokio_util::task::AbortOnDropHandle;

use crate::Instance;
use crate::erasure::DeletionService;

/// How often an instance looks for scoring runs that lost their worker (at most; more often
/// with a lease shorter than this).
const RUN_JANITOR_PERIOD: Duration = Duration::from_secs(10);

/// How the workers are paced.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// A scoring run's lease: the janitor looks at least this often.
    pub scoring_lease: Duration,
    /// Between background compactions; `None`: never.
    pub compaction_interval: Option<Duration>,
    pub compaction: CompactionConfig,
    /// How long replaced files stay for readers of older snapshots before the vacuum.
    pub retention: Duration,
}

/// The running workers; dropping this stops them (between their steps' awaits), and
/// [`Workers::stop`] waits until they have.
pub struct Workers {
    tasks: Vec<AbortOnDropHandle<()>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

impl Workers {
    /// Stops every worker and waits until each has let go of what it held.
    pub async fn stop(self) {
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
    }

    /// Starts every worker of `instance`.
    pub fn start(
        instance: &Instance,
        scoring: &scorer::ScoringService,
        deletions: &DeletionService,
        settings: &WorkerSettings,
    ) -> Workers {
        // Resumes this instance's runs a crash interrupted at once, and later any run whose
        // worker stopped renewing its lease.
        let janitor = scoring.spawn_janitor(RUN_JANITOR_PERIOD.min(settings.scoring_lease));
        let compactor = settings.compaction_interval.map(|period| {
            crate::compaction::spawn(
                instance.stores.catalog.clone(),
                instance.stores.lake.clone(),
                instance.id.clone(),
                period,
                settings.compaction.clone(),
                settings.retention,
            )
        });
        let tasks = [
            Some(janitor),
            Some(deletions.spawn()),
            deletions.spawn_purger(),
            compactor,
        ]
        .into_iter()
        .flatten()
        .map(AbortOnDropHandle::new)
        .collect();
        Workers { tasks }
    }
}
