//! Telltale's read side: DataFusion over the lake's live files.
//!
//! Readers never list the lake's folders: a file is visible only once the catalog has committed
//! it (an upload in flight, or one a crash left behind, is not data). So every table here is
//! built from an explicit list of live files, which also gives partition pruning for free: a
//! survey's scan names only that survey's files.
//!
//! The lake's object store is registered under one URL scheme, so the same code reads a local
//! folder or an S3 bucket.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::config::TableParquetOptions;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::context::SessionContext;
use datafusion::prelude::SessionConfig;
use object_store::ObjectStore;
use url::Url;

pub use datafusion;

/// The URL the lake's object store is registered under inside DataFusion.
const LAKE_URL: &str = "telltale-lake://lake/";

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("query failed: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    #[error("invalid lake path {0:?}")]
    Path(String),
}

/// A DataFusion session that reads the lake.
#[derive(Clone)]
pub struct LakeQuery {
    ctx: SessionContext,
}

impl std::fmt::Debug for LakeQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LakeQuery").finish_non_exhaustive()
    }
}

impl LakeQuery {
    /// A session over `store` (the lake root) using `threads` partitions for scans.
    pub fn new(store: Arc<dyn ObjectStore>, threads: usize) -> Result<LakeQuery, QueryError> {
        let config = SessionConfig::new()
            .with_target_partitions(threads.max(1))
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config(config);
        let url = Url::parse(LAKE_URL).map_err(|_| QueryError::Path(LAKE_URL.to_owned()))?;
        ctx.register_object_store(&url, store);
        Ok(LakeQuery { ctx })
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// A table over exactly `paths` (object paths relative to the lake root), all of `schema`.
    pub fn table(
        &self,
        schema: SchemaRef,
        paths: &[String],
    ) -> Result<Arc<dyn TableProvider>, QueryError> {
        self.table_with(schema, paths, TableParquetOptions::default())
    }

    /// [`LakeQuery::table`] for a query that keeps a few rows of many (one session's): its
    /// filters are evaluated while decoding (`pushdown_filters`), so only the filter's columns
    /// are decoded whole and the other columns' pages without a kept row are skipped. A scan
    /// that keeps most rows is faster without it.
    pub fn selective_table(
        &self,
        schema: SchemaRef,
        paths: &[String],
    ) -> Result<Arc<dyn TableProvider>, QueryError> {
        let mut options = TableParquetOptions::default();
        options.global.pushdown_filters = true;
        options.global.reorder_filters = true;
        self.table_with(schema, paths, options)
    }

    fn table_with(
        &self,
        schema: SchemaRef,
        paths: &[String],
        options: TableParquetOptions,
    ) -> Result<Arc<dyn TableProvider>, QueryError> {
        if paths.is_empty() {
            return Ok(Arc::new(EmptyTable::new(schema)));
        }
        let urls = paths
            .iter()
            .map(|path| {
                if path.starts_with('/') || path.contains("..") {
                    return Err(QueryError::Path(path.clone()));
                }
                Ok(ListingTableUrl::parse(format!("{LAKE_URL}{path}"))?)
            })
            .collect::<Result<Vec<_>, QueryError>>()?;
        let format = ParquetFormat::default().with_options(options);
        let options = ListingOptions::new(Arc::new(format)).with_file_extension(".parquet");
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .with_schema(schema);
        Ok(Arc::new(ListingTable::try_new(config)?))
    }

    /// Registers (or replaces) `name` as a table over `paths`.
    pub fn register(
        &self,
        name: &str,
        schema: SchemaRef,
        paths: &[String],
    ) -> Result<(), QueryError> {
        let table = self.table(schema, paths)?;
        self.ctx.deregister_table(name)?;
        self.ctx.register_table(name, table)?;
        Ok(())
    }
}
