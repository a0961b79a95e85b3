//! Whether a file holds a session's rows, read by ranges: the footer, then the session columns
//! of the row groups whose statistics do not rule the session out. Nothing else of the file is
//! read, so an erasure pays for the whole of a file only where it rewrites one.
//!
//! Before this, every live file of the survey was read whole and its page index loaded to find
//! the one or two that held the session (an events flush file holds a slice of time of every
//! session, so the Delta statistics cannot rule it out): 117-169 ms of a 0.25-0.35 s erasure
//! in benches/README.md (`scoring_run`).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData,
};
use parquet::file::statistics::Statistics;
use parquet::schema::types::SchemaDescriptor;

use super::{RewriteError, SessionRows, keep_mask, session_columns};

/// Whether the Parquet file at `path` of `store` (`size` bytes) holds a row of `session`.
/// Errors are the store's or the file's (one that is not Parquet): the caller decides what such
/// a file counts as.
pub async fn holds_session(
    store: &Arc<dyn ObjectStore>,
    path: &str,
    size: u64,
    session: &SessionRows,
) -> Result<bool, RewriteError> {
    let reader = RangeReader::new(store, path, size);
    let builder = ParquetRecordBatchStreamBuilder::new_with_options(
        reader,
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Skip),
    )
    .await?;
    let columns = session_columns(builder.schema().fields());
    if columns.is_empty() {
        return Ok(false);
    }
    let metadata = Arc::clone(builder.metadata());
    let descriptor = metadata.file_metadata().schema_descr();
    let leaves = session_leaves(descriptor, &columns);
    let candidates: Vec<usize> = (0..metadata.num_row_groups())
        .filter(|group| {
            leaves
                .as_ref()
                .is_none_or(|leaves| may_hold(metadata.row_group(*group), leaves, session))
        })
        .collect();
    if candidates.is_empty() {
        return Ok(false);
    }
    let mask = ProjectionMask::roots(descriptor, columns.iter().map(|(index, _)| *index));
    let mut batches = builder
        .with_projection(mask)
        .with_row_groups(candidates)
        .with_batch_size(64 * 1024)
        .build()?;
    while let Some(batch) = batches.try_next().await? {
        if keep_mask(&batch, session)?.true_count() < batch.num_rows() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The leaf index of each session column (flat schemas: a root column is one leaf).
/// `None` when a session column has no leaf of its name: then no statistics are trusted.
pub(super) fn session_leaves(
    descriptor: &SchemaDescriptor,
    columns: &[(usize, &'static str)],
) -> Option<Vec<(usize, &'static str)>> {
    columns
        .iter()
        .map(|(_, name)| {
            descriptor
                .columns()
                .iter()
                .position(|leaf| leaf.path().string() == *name)
                .map(|leaf| (leaf, *name))
        })
        .collect()
}

/// False only when the row group's statistics of every session column rule the session out
/// (its minimum and maximum, or a null count of every row); a column without statistics rules
/// nothing out. Truncated statistics stay bounds (the minimum is cut, the maximum rounded up).
pub(super) fn may_hold(
    group: &RowGroupMetaData,
    leaves: &[(usize, &str)],
    session: &SessionRows,
) -> bool {
    leaves.iter().any(|(leaf, name)| {
        let Some(statistics) = group.column(*leaf).statistics() else {
            return true;
        };
        let deprecated = statistics.is_min_max_deprecated();
        let Statistics::ByteArray(statistics) = statistics else {
            return true;
        };
        let (Some(min), Some(max)) = (statistics.min_opt(), statistics.max_opt()) else {
            // Only nulls: no value to match.
            let rows = u64::try_from(group.num_rows()).ok();
            return statistics.null_count_opt().is_none() || statistics.null_count_opt() != rows;
        };
        // The old min/max fields (other writers') were in signed byte order.
        if deprecated {
            return true;
        }
        let within = |value: &str| min.data() <= value.as_bytes() && value.as_bytes() <= max.data();
        match *name {
            "reference" => within(&session.reference),
            _ => session
                .identifiers
                .iter()
                .any(|identifier| within(identifier)),
        }
    })
}

/// Byte ranges of one object of the lake's (read-only) store, for parquet's async reader.
#[derive(Clone)]
pub(crate) struct RangeReader {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    size: u64,
}

impl RangeReader {
    pub(crate) fn new(store: &Arc<dyn ObjectStore>, path: &str, size: u64) -> RangeReader {
        RangeReader {
            store: Arc::clone(store),
            path: ObjectPath::from(path),
            size,
        }
    }
}

fn store_error(error: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

impl AsyncFileReader for RangeReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(store_error)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(store_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}
