//! A deployment's scorer: the model it scores with, the query engine over the lake, and the
//! collection pipeline a run flushes first. Built here for a serving instance and for
//! `telltale score` alike.

use std::path::PathBuf;
use std::sync::Arc;

use ingest::Ingestor;
use query::LakeQuery;
use scorer::{Model, Scorer, ScoringSettings};

use crate::Stores;

/// How a deployment scores.
#[derive(Debug, Clone, Default)]
pub struct ScorerSettings {
    /// A model file; `None`: the built-in model.
    pub model: Option<PathBuf>,
    pub scoring: ScoringSettings,
}

/// Why the scorer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ScorerError {
    #[error("reading model file {path}: {source}")]
    ReadModel {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("model file {path}: {source}")]
    Model {
        path: String,
        #[source]
        source: scorer::model::ModelError,
    },
    #[error("the built-in model: {0}")]
    BuiltIn(#[source] scorer::model::ModelError),
    #[error("starting the lake's query engine: {0}")]
    Query(#[from] query::QueryError),
}

/// The model `settings` names, or the built-in one.
pub fn load_model(settings: &ScorerSettings) -> Result<Model, ScorerError> {
    match &settings.model {
        Some(path) => {
            let json = std::fs::read_to_string(path).map_err(|source| ScorerError::ReadModel {
                path: path.display().to_string(),
                source,
            })?;
            Model::from_json(&json).map_err(|source| ScorerError::Model {
                path: path.display().to_string(),
                source,
            })
        }
        None => Model::default_model().map_err(ScorerError::BuiltIn),
    }
}

/// A serving instance's collection pipeline, as the scorer sees it: something to flush before
/// a run.
struct IngestorFlusher(Ingestor);

#[async_trait::async_trait]
impl scorer::run::Flusher for IngestorFlusher {
    async fn make_visible(&self) -> Result<(), scorer::run::FlushError> {
        Ok(self.0.make_visible().await?)
    }
}

/// `ingestor` as the flusher a run asks first.
pub fn flusher(ingestor: Ingestor) -> Arc<dyn scorer::run::Flusher> {
    Arc::new(IngestorFlusher(ingestor))
}

/// The scorer of `stores`, as `owner` in run leases; `ingestor` is flushed before each run
/// (`None` for `telltale score`, which scores what the lake holds once the fleet flushed).
pub fn build_scorer(
    stores: &Stores,
    model: Model,
    scoring: ScoringSettings,
    ingestor: Option<Ingestor>,
    owner: String,
) -> Result<Scorer, ScorerError> {
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let query = LakeQuery::new(stores.lake.store().clone(), threads)?;
    Ok(Scorer {
        catalog: stores.catalog.clone(),
        lake: stores.lake.clone(),
        query,
        model: Arc::new(model),
        flusher: ingestor.map(flusher),
        settings: scoring,
        owner,
    })
}
