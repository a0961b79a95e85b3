//! Collection: everything between a collector request and a committed Parquet file.
//!
//! The collector validates a batch without building a JSON tree, appends it to the write-ahead
//! log and answers once the log is fsync'd. Background consumers turn the log into session
//! statistics (for lookup) and Parquet files in the lake, each committing to the catalog together
//! with how far in the log it got, so a crash replays every acknowledged batch exactly once.
//!
//! - [`batch`]: request validation on the hot path (limits, identifiers, references).
//! - [`wal`]: the write-ahead log with group commit and crash replay.
//! - [`event_row`]: typed decoding of events, lossless or with the raw `payload` kept.
//! - [`events_batch`]: decoded events into the columns of the lake's `events` table.
//! - [`pipeline`]: the [`Ingestor`] tying them together, writing files through the `lake` crate.

pub mod batch;
pub mod event_row;
pub mod events_batch;
pub mod pipeline;
pub mod wal;

/// The time-bounded fuzzing engine the fuzz tests of [`event_row`] and [`wal`] use.
#[cfg(test)]
#[path = "../../tests/fuzz/mutator.rs"]
mod fuzz_mutator;

pub use pipeline::{Accepted, FlushReport, IngestConfig, IngestError, Ingestor, LogPosition};
