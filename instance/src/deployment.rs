//! A whole running deployment, assembled in one place: the stores, the link secret, the log and
//! its ingestor, scoring, deletions and the background workers. The binary parses its arguments
//! into [`DeploymentSettings`], starts a [`Deployment`], serves it, and drains it at the end.
//!
//! A start either returns a running deployment or has let go of everything it took: whatever
//! fails after the log was opened stops the ingestor's tasks and releases the log's lock before
//! the error is returned, so the caller may simply try again (the log's lock is one process's,
//! and a start that kept it would refuse every later one).

use std::time::Duration;

use ingest::{FlushReport, IngestError};
use scorer::ScoringService;

use crate::erasure::DeletionService;
use crate::links::LinkSecret;
use crate::scoring::{ScorerSettings, build_scorer, load_model};
use crate::workers::{WorkerSettings, Workers};
use crate::{Instance, LogSettings, Settings, StartError, Stores};

/// Everything a running deployment is configured with besides where its stores are.
#[derive(Debug, Clone)]
pub struct DeploymentSettings {
    pub log: LogSettings,
    pub scorer: ScorerSettings,
    /// An instance not seen for this long is fenced off by erasures, not waited for.
    pub instance_lease: Duration,
    pub workers: WorkerSettings,
    /// How long replaced lake files and covered commit files are kept for readers.
    pub lake_retention: Duration,
    /// `--review-secret`, when given (see [`crate::links`]).
    pub review_secret: Option<String>,
}

/// A serving deployment: one instance of the fleet and everything it runs.
pub struct Deployment {
    pub instance: Instance,
    pub scoring: ScoringService,
    pub deletions: DeletionService,
    /// Signs and checks the links this deployment hands out.
    pub link_secret: LinkSecret,
    /// The key a first start on an empty catalog made, for the caller to show once
    /// ([`Deployment::take_first_key`]).
    first_key: parking_lot::Mutex<Option<catalog::CreatedKey>>,
    /// Taken (and so stopped) by [`Deployment::drain`], before the final flush.
    workers: parking_lot::Mutex<Option<Workers>>,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Deployment {
    /// Starts the deployment whose stores `settings` names (see the module docs for what a
    /// failed start leaves: nothing).
    pub async fn start(
        settings: Settings,
        deploy: &DeploymentSettings,
    ) -> Result<Deployment, StartError> {
        // What needs no store first: a bad model file is a configuration error, not an outage.
        let model = load_model(&deploy.scorer)?;
        let stores = Stores::open(&settings).await?;
        stores.lake.set_retention(deploy.lake_retention);
        let link_secret = LinkSecret::load(
            deploy.review_secret.as_deref(),
            stores.catalog.as_ref(),
            &settings.data_dir,
        )
        .await?;
        let id = settings.data_dir.instance_id_or_start_error()?;
        let mut scorer = build_scorer(
            &stores,
            model,
            deploy.scorer.scoring.clone(),
            None,
            id.clone(),
        )?;
        // The log: from here on a failure lets go of it before it returns.
        let instance = Instance::start_on(settings, stores, Some(deploy.log.clone())).await?;
        if let Err(error) = after_the_log_opened() {
            let ingestor = instance.ingestor.clone();
            drop(instance);
            drop(scorer);
            ingestor.halt().await;
            return Err(error);
        }
        scorer.flusher = Some(crate::scoring::flusher(instance.ingestor.clone()));
        let deletions = DeletionService::new(
            instance.stores.catalog.clone(),
            instance.stores.lake.clone(),
            Some(instance.ingestor.clone()),
            instance.id.clone(),
            deploy.instance_lease,
        );
        let scoring = ScoringService::new(scorer);
        let workers = Workers::start(&instance, &scoring, &deletions, &deploy.workers);
        let deployment = Deployment {
            instance,
            scoring,
            deletions,
            link_secret,
            first_key: parking_lot::Mutex::new(None),
            workers: parking_lot::Mutex::new(Some(workers)),
        };
        // Last, once nothing else can fail: a key made by a start that then failed would never
        // be shown, and the next start, finding an organization, would make none.
        match deployment.bootstrap().await {
            Ok(key) => *deployment.first_key.lock() = key,
            Err(error) => {
                if let Err(drained) = deployment.drain().await {
                    tracing::warn!(error = %drained, "could not drain the deployment of a failed start");
                }
                return Err(StartError::Bootstrap(error));
            }
        }
        Ok(deployment)
    }

    /// The key a first start on an empty catalog made, once: the caller shows it.
    pub fn take_first_key(&self) -> Option<catalog::CreatedKey> {
        self.first_key.lock().take()
    }

    /// [`Deployment::start`], again every `retry` while a store is down (`waiting` hears each
    /// such failure); any other failure is returned.
    pub async fn start_when_stores_answer(
        settings: Settings,
        deploy: &DeploymentSettings,
        retry: Duration,
        waiting: impl Fn(&StartError),
    ) -> Result<Deployment, StartError> {
        loop {
            match Deployment::start(settings.clone(), deploy).await {
                Ok(deployment) => return Ok(deployment),
                Err(error) if error.store_down() => {
                    waiting(&error);
                    tokio::time::sleep(retry).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The deployment's stores.
    pub fn stores(&self) -> &Stores {
        &self.instance.stores
    }

    /// On an empty catalog, creates an organization and a key with every scope and returns the
    /// key, for the caller to show once; `None` on a catalog that has an organization.
    async fn bootstrap(&self) -> Result<Option<catalog::CreatedKey>, catalog::Error> {
        let catalog = &self.instance.stores.catalog;
        if catalog.count_organizations().await? > 0 {
            return Ok(None);
        }
        let organization = catalog.create_organization("Default organization").await?;
        let key = catalog
            .create_key(&organization.id, "bootstrap", &catalog::Scope::ALL)
            .await?;
        Ok(Some(key))
    }

    /// Stops the workers (waiting until they let go), then flushes what the log holds and
    /// leaves the fleet. Runs in progress stay `running` with this instance as owner: the next
    /// start resumes them (or another instance once the lease expires); an erasure or
    /// compaction cut short is repeated from the start.
    pub async fn drain(&self) -> Result<FlushReport, IngestError> {
        let workers = self.workers.lock().take();
        if let Some(workers) = workers {
            workers.stop().await;
        }
        self.instance.ingestor.shutdown().await
    }
}

/// Where a step that can fail after the log was opened would fail; with the `failpoints`
/// feature, `FAILPOINTS=telltale-start-after-log=1*return` fails it once, as a store lost in the
/// middle of a start would (tests/it/start.rs).
fn after_the_log_opened() -> Result<(), StartError> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("telltale-start-after-log", |_| Err(
        StartError::Interrupted(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "a start step lost its store after the log was opened (fail point)",
        ))
    ));
    Ok(())
}

/// What [`drain_stopped`] did.
#[derive(Debug, Clone)]
pub struct Drained {
    pub instance: String,
    /// Logged batches this drain put into the lake.
    pub records_flushed: u64,
    pub position: ingest::LogPosition,
}

/// Why a stopped instance's log could not be drained.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error("{0} holds no write-ahead log of a telltale instance: nothing to drain")]
    NoLog(String),
    #[error(transparent)]
    Open(#[from] crate::OpenError),
    #[error("opening the write-ahead log (is a server still running on this data dir?): {0}")]
    Start(#[source] StartError),
    #[error("flushing the log: {0}")]
    Flush(#[source] IngestError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error("the data dir's instance id: {0}")]
    Id(#[source] std::io::Error),
}

/// `telltale drain`: replays a stopped instance's log into the lake and the catalog, flushes
/// what is left and leaves the fleet. [`ingest::LogPosition::is_drained`] of the answer says
/// whether nothing is left only in the log.
pub async fn drain_stopped(settings: Settings) -> Result<Drained, DrainError> {
    if !settings.data_dir.wal().exists() || !settings.data_dir.instance_id().exists() {
        return Err(DrainError::NoLog(
            settings.data_dir.root().display().to_string(),
        ));
    }
    let stores = Stores::open(&settings).await?;
    let instance = settings
        .data_dir
        .instance_id_or_new()
        .map_err(DrainError::Id)?;
    let applied_before = ingest::Ingestor::lake_position(&stores.lake, &instance).await?;
    // Starting replays the log and flushes what the lake lacks; the shutdown flushes the rest.
    let ingestor = Instance::start_on(settings, stores, None)
        .await
        .map_err(DrainError::Start)?
        .ingestor;
    ingestor.shutdown().await.map_err(DrainError::Flush)?;
    let position = ingestor.log_position();
    Ok(Drained {
        records_flushed: position.lake_watermark.saturating_sub(applied_before),
        instance,
        position,
    })
}
