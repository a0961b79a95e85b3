//! The lake: every Parquet file Telltale writes, and the only code that writes or replaces one.
//!
//! - [`store`]: object-store access (a local folder or an S3-compatible bucket), with writes and
//!   deletes that are durable once they return.
//! - [`tables`]: the three tables (`events`, `features`, `scores`): schemas, Parquet writer
//!   settings and the object path layout, a public contract data scientists read.
//! - [`rewrite`]: replacing live files safely: erasing a session's rows with a row-group
//!   rewrite, merging sorted files.
//! - [`compaction`]: merging the small files flushes write into large sorted ones.
//! - [`delta`]: the tables as Delta Lake tables (commits with application transactions,
//!   snapshots, time travel, checkpoints).
//!
//! Which files are live is recorded in the catalog; this crate writes objects and asks the
//! catalog to commit them, never the other way round. Collection (`ingest`) and scoring
//! (`scorer`) both write through it; neither knows the other.

mod bucket_prefix;
pub mod compaction;
pub mod delta;
pub mod rewrite;
pub mod store;
pub mod tables;

pub use store::{Lake, LakeError};
