//! One deployment and its owner. The binary's adapters (HTTP, command line) ask this crate for
//! an instance's parts; the libraries below it know nothing of each other's files.
//!
//! - [`DataDir`] (`data_dir`): the instance's folder, every file of it by name, and the one
//!   durable small-file write.
//! - [`Stores`]: the catalog and the lake, opened in one place ([`Stores::open`]), and the one
//!   answer to "is a store down" for every caller ([`Stores::down`], over the `outage` policy).
//! - [`Instance`]: a serving or draining instance: its stores, its id and its write-ahead log.
//! - `deployment`: a whole running deployment, assembled and drained in one place
//!   ([`deployment::Deployment`]).
//! - `scoring`: the deployment's scorer (its model, its query engine, its flusher).
//! - `links`: the fleet's one secret that signs the links a deployment hands out.
//! - `erasure`: session deletion's worker and the log purger of fleet-wide erasure.
//! - `compaction`: the background compaction and vacuum, and the catalog's claims behind the
//!   lake's [`lake::operations::compact::CompactionGuard`].
//! - `workers`: the background workers a server runs, started and stopped together.
//! - `backup`: a consistent copy of the deployment while it serves, and its restore, each
//!   crate copying its own part.

pub mod backup;
pub mod compaction;
pub mod data_dir;
pub mod deployment;
pub mod erasure;
pub mod links;
pub mod scoring;
pub mod workers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use catalog::Catalog;
use ingest::{IngestConfig, Ingestor};
use lake::Lake;

pub use data_dir::DataDir;

/// Where a deployment's stores are.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: DataDir,
    /// `sqlite://...` or `postgres://...`.
    pub catalog_url: String,
    /// A folder, `file:///...` or `s3://bucket[/prefix]`.
    pub lake_url: String,
    /// An S3 lake's settings (`AWS_*` names and values).
    pub s3: Vec<(String, String)>,
}

impl Settings {
    /// The embedded defaults inside `data_dir` where no URL is given.
    pub fn new(
        data_dir: PathBuf,
        catalog_url: Option<String>,
        lake_url: Option<String>,
    ) -> Settings {
        let data_dir = DataDir::new(data_dir);
        Settings {
            catalog_url: catalog_url
                .unwrap_or_else(|| format!("sqlite://{}", data_dir.catalog_db().display())),
            lake_url: lake_url.unwrap_or_else(|| data_dir.lake().display().to_string()),
            data_dir,
            s3: Vec::new(),
        }
    }
}

/// Why the stores could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("creating the data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening catalog {url}: {source}")]
    Catalog {
        url: String,
        #[source]
        source: catalog::Error,
    },
    #[error("opening the lake: {0}")]
    Lake(#[source] lake::LakeError),
}

impl OpenError {
    /// Whether a store was down (worth waiting for) rather than misconfigured or newer.
    pub fn store_down(&self) -> bool {
        outage::is_store_down(self)
    }
}

/// The two stores of a deployment. Cheap to clone.
#[derive(Clone)]
pub struct Stores {
    pub catalog: Arc<dyn Catalog>,
    pub lake: Lake,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    /// Opens the catalog (applying its migrations) and the lake (creating its tables): the one
    /// place a deployment's stores are opened.
    pub async fn open(settings: &Settings) -> Result<Stores, OpenError> {
        settings
            .data_dir
            .create()
            .map_err(|source| OpenError::DataDir {
                path: settings.data_dir.root().to_owned(),
                source,
            })?;
        let catalog = open_catalog(&settings.catalog_url).await?;
        let lake = Lake::open(&settings.lake_url, scorer::Features::NAMES, &settings.s3)
            .await
            .map_err(OpenError::Lake)?;
        Ok(Stores { catalog, lake })
    }

    /// Which store is down now, if any: each is probed within the outage policy's probe time.
    /// The one answer to "is a store down" a caller needs when an error alone does not say (a
    /// failed read of a store that answers is a fault of ours, of one that does not an outage).
    pub async fn down(&self) -> Option<&'static str> {
        self.probe().await.down()
    }

    /// What each store answered a probe ([`outage::probe_stores`]).
    pub async fn probe(&self) -> outage::StoresProbe {
        outage::probe_stores(self.catalog.ping(), self.lake.probe()).await
    }
}

/// Opens (and migrates) the catalog at `url` alone: for commands that need no lake (`org`,
/// `key`, a restore's catalogs), and for [`Stores::open`].
pub async fn open_catalog(url: &str) -> Result<Arc<dyn Catalog>, OpenError> {
    catalog::open(url)
        .await
        .map_err(|source| OpenError::Catalog {
            url: url.to_owned(),
            source,
        })
}

/// Opens the catalog at `url` to read it, changing nothing (no migration): another
/// deployment's, such as the catalog a backup was taken from.
pub async fn open_catalog_read_only(url: &str) -> Result<Arc<dyn Catalog>, OpenError> {
    catalog::open_read_only(url)
        .await
        .map_err(|source| OpenError::Catalog {
            url: url.to_owned(),
            source,
        })
}

/// How an instance's log is flushed.
#[derive(Debug, Clone)]
pub struct LogSettings {
    pub flush_interval: Duration,
    pub flush_bytes: usize,
}

/// A serving or draining instance: its stores, its id, and its write-ahead log replayed into
/// them.
#[derive(Clone)]
pub struct Instance {
    pub settings: Settings,
    pub stores: Stores,
    pub id: String,
    pub ingestor: Ingestor,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").field("id", &self.id).finish()
    }
}

/// Why an instance could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("reading or making the instance id in {path}: {source}")]
    Id {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the ingest pipeline: {0}")]
    Ingest(#[source] ingest::IngestError),
    #[error(transparent)]
    Scorer(#[from] scoring::ScorerError),
    #[error("the review link secret: {0}")]
    Secret(#[from] links::SecretError),
    /// A start step lost a store after the log was opened (the start released what it took).
    #[error("starting: {0}")]
    Interrupted(#[source] std::io::Error),
    #[error("making the first start's organization and key: {0}")]
    Bootstrap(#[source] catalog::Error),
}

impl StartError {
    pub fn store_down(&self) -> bool {
        outage::is_store_down(self)
    }
}

impl DataDir {
    /// [`DataDir::instance_id_or_new`], its failure a start's.
    fn instance_id_or_start_error(&self) -> Result<String, StartError> {
        self.instance_id_or_new().map_err(|source| StartError::Id {
            path: self.instance_id(),
            source,
        })
    }
}

impl Instance {
    /// Opens the stores, takes the data dir's log (replaying what it holds into them) and
    /// starts its consumers. `log: None` keeps the defaults (`telltale drain`, `log import`).
    pub async fn start(
        settings: Settings,
        log: Option<LogSettings>,
    ) -> Result<Instance, StartError> {
        let stores = Stores::open(&settings).await?;
        Instance::start_on(settings, stores, log).await
    }

    /// [`Instance::start`] on stores opened already.
    pub async fn start_on(
        settings: Settings,
        stores: Stores,
        log: Option<LogSettings>,
    ) -> Result<Instance, StartError> {
        let id = settings.data_dir.instance_id_or_start_error()?;
        let mut config = IngestConfig::new(id.clone(), settings.data_dir.wal());
        if let Some(log) = log {
            config.flush_interval = log.flush_interval;
            config.flush_bytes = log.flush_bytes;
            config.max_buffered_bytes = config
                .max_buffered_bytes
                .max(config.flush_bytes.saturating_mul(4));
        }
        let ingestor = Ingestor::start(config, stores.catalog.clone(), stores.lake.clone())
            .await
            .map_err(StartError::Ingest)?;
        Ok(Instance {
            settings,
            stores,
            id,
            ingestor,
        })
    }
}
