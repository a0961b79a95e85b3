//! Rewrites of lake files: erasing one session's rows, and merging small files into large ones.
//!
//! Both produce new files that replace live ones, with [`replace_files`] (a
//! [`Table::publish`](crate::Table::publish)): the new files are written whole and durably,
//! then one Delta commit removes the old files and adds the new; it commits nothing when another
//! rewrite removed one of the old files first (the uploads are then deleted). Readers of any
//! snapshot see either the old files or the new.
//!
//! A crash before the commit leaves uploads no commit names, which the vacuum deletes once they
//! are older than its retention ([`Table::vacuum`](crate::Table::vacuum)); a crash after an
//! erasure's commit leaves the replaced files, which the retried erasure deletes
//! ([`delete_unlinked_copies`]) before it completes.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::{SortColumn, concat_batches, filter_record_batch, lexsort_to_indices};
use arrow::datatypes::{DataType, Int32Type};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::arrow_writer::{ArrowRowGroupWriterFactory, compute_leaves};
use parquet::arrow::{ArrowWriter, ProjectionMask, add_encoded_arrow_schema_to_metadata};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use crate::{Change, Lake, LakeError, NewFile, Publication, TableKind, tables};

mod merge;
mod probe;
pub use merge::{MergeInput, merge_sorted_files};
pub use probe::holds_session;

#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("reading or writing parquet failed: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow computation failed: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// What the deployment around the lake answered (a compaction's guard: its catalog).
    #[error("{0}")]
    Guard(#[source] crate::operations::compact::GuardError),
    #[error("background task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// The rows of one session: those whose `reference` is the session's reference, and (in
/// `events` files) those whose `session_id` is one of the identifiers linked to it.
#[derive(Debug, Clone)]
pub struct SessionRows {
    pub reference: String,
    pub identifiers: HashSet<String>,
}

impl SessionRows {
    fn matches_reference(&self, value: &str) -> bool {
        value == self.reference
    }

    fn matches_identifier(&self, value: &str) -> bool {
        self.identifiers.contains(value)
    }
}

/// A file written by a rewrite: its bytes and its row count.
#[derive(Debug)]
pub struct Rewritten {
    pub bytes: Vec<u8>,
    pub rows: u64,
}

/// What erasing a session from one file gave.
#[derive(Debug)]
pub enum Erased {
    /// The file holds no row of the session.
    Untouched,
    /// Every row was the session's: the file goes, with no replacement.
    Emptied,
    Rewritten(Rewritten),
}

/// Erases the session's rows from a Parquet file, writing what is left with `properties`.
///
/// Work is done per row group. The session columns of each row group are read first on their
/// own (cheap: two dictionary columns); a row group without the session is copied into the new
/// file as it is, compressed pages and all, and only the row groups holding the session are
/// decoded, filtered and encoded again. Erasing one session from a large compacted file
/// therefore costs about one row group's worth of work, not the file's.
pub fn erase_rows(
    bytes: Bytes,
    session: &SessionRows,
    properties: WriterProperties,
) -> Result<Erased, RewriteError> {
    // With the page index: copied column chunks carry their offset and column indexes over.
    let reader_metadata = ArrowReaderMetadata::load(
        &bytes,
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional),
    )?;
    let schema = Arc::clone(reader_metadata.schema());
    let metadata = Arc::clone(reader_metadata.metadata());
    let columns = session_columns(schema.fields());
    if columns.is_empty() {
        return Ok(Erased::Untouched);
    }
    let builder = || {
        ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), reader_metadata.clone())
            .with_batch_size(64 * 1024)
    };
    let probe_columns = ProjectionMask::roots(
        metadata.file_metadata().schema_descr(),
        columns.iter().map(|(index, _)| *index),
    );
    let leaves = probe::session_leaves(metadata.file_metadata().schema_descr(), &columns);
    let mut touched = vec![false; metadata.num_row_groups()];
    for (group, hit) in touched.iter_mut().enumerate() {
        // A compacted file is sorted by session: its statistics rule out all but a group or two.
        if let Some(leaves) = &leaves
            && !probe::may_hold(metadata.row_group(group), leaves, session)
        {
            continue;
        }
        let probe = builder()
            .with_projection(probe_columns.clone())
            .with_row_groups(vec![group])
            .build()?;
        for batch in probe {
            let batch = batch?;
            let keep = keep_mask(&batch, session)?;
            if keep.true_count() < batch.num_rows() {
                *hit = true;
            }
        }
    }
    if !touched.contains(&true) {
        return Ok(Erased::Untouched);
    }
    // A file without page indexes (not one Telltale wrote) is re-encoded whole: the writer
    // cannot mix row groups with and without them.
    let (Some(offset_indexes), Some(column_indexes)) =
        (metadata.offset_index(), metadata.column_index())
    else {
        return erase_decoded(&bytes, &reader_metadata, session, properties);
    };

    let mut properties = properties;
    add_encoded_arrow_schema_to_metadata(&schema, &mut properties);
    let properties = Arc::new(properties);
    let mut out = Vec::with_capacity(bytes.len());
    let mut writer = SerializedFileWriter::new(
        &mut out,
        metadata.file_metadata().schema_descr().root_schema_ptr(),
        Arc::clone(&properties),
    )?;
    let factory = ArrowRowGroupWriterFactory::new(&writer, Arc::clone(&schema));
    let mut rows = 0u64;
    let mut groups_written = 0;
    for (group, hit) in touched.iter().enumerate() {
        let group_metadata = metadata.row_group(group);
        if !hit {
            let mut row_group = writer.next_row_group()?;
            for (index, column) in group_metadata.columns().iter().enumerate() {
                row_group.append_column(
                    &bytes,
                    ColumnCloseResult {
                        bytes_written: u64::try_from(column.compressed_size()).unwrap_or(0),
                        rows_written: u64::try_from(group_metadata.num_rows()).unwrap_or(0),
                        metadata: column.clone(),
                        bloom_filter: None,
                        column_index: column_indexes
                            .get(group)
                            .and_then(|columns| columns.get(index))
                            .cloned(),
                        offset_index: offset_indexes
                            .get(group)
                            .and_then(|columns| columns.get(index))
                            .cloned(),
                    },
                )?;
            }
            row_group.close()?;
            rows += u64::try_from(group_metadata.num_rows()).unwrap_or(0);
            groups_written += 1;
            continue;
        }
        let mut kept = Vec::new();
        for batch in builder().with_row_groups(vec![group]).build()? {
            let batch = batch?;
            let filtered = filter_record_batch(&batch, &keep_mask(&batch, session)?)?;
            if filtered.num_rows() > 0 {
                kept.push(filtered);
            }
        }
        let kept = concat_batches(&schema, &kept)?;
        if kept.num_rows() == 0 {
            continue;
        }
        let mut column_writers = factory.create_column_writers(groups_written)?;
        {
            let mut leaves_out = column_writers.iter_mut();
            for (field, column) in schema.fields().iter().zip(kept.columns()) {
                for leaf in compute_leaves(field, column)? {
                    let column_writer = leaves_out.next().ok_or_else(|| {
                        parquet::errors::ParquetError::General(
                            "more leaf columns than column writers".to_owned(),
                        )
                    })?;
                    column_writer.write(&leaf)?;
                }
            }
        }
        let mut row_group = writer.next_row_group()?;
        for column_writer in column_writers {
            column_writer.close()?.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        rows += kept.num_rows() as u64;
        groups_written += 1;
    }
    if rows == 0 {
        return Ok(Erased::Emptied);
    }
    writer.close()?;
    Ok(Erased::Rewritten(Rewritten { bytes: out, rows }))
}

/// [`erase_rows`] for a file whose row groups cannot be copied: every row is decoded.
fn erase_decoded(
    bytes: &Bytes,
    reader_metadata: &ArrowReaderMetadata,
    session: &SessionRows,
    properties: WriterProperties,
) -> Result<Erased, RewriteError> {
    let reader =
        ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), reader_metadata.clone())
            .with_batch_size(64 * 1024)
            .build()?;
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(
        &mut out,
        Arc::clone(reader_metadata.schema()),
        Some(properties),
    )?;
    let mut rows = 0u64;
    for batch in reader {
        let batch = batch?;
        let kept = filter_record_batch(&batch, &keep_mask(&batch, session)?)?;
        rows += kept.num_rows() as u64;
        writer.write(&kept)?;
    }
    if rows == 0 {
        return Ok(Erased::Emptied);
    }
    writer.close()?;
    Ok(Erased::Rewritten(Rewritten { bytes: out, rows }))
}

/// Merges Parquet files of one schema into one file whose rows are sorted by `session_column`,
/// keeping the files' order (and each file's row order) within a session.
pub fn merge_sorted(
    files: &[Bytes],
    session_column: &str,
    properties: WriterProperties,
) -> Result<Rewritten, RewriteError> {
    let mut batches = Vec::new();
    let mut schema = None;
    for bytes in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?;
        schema.get_or_insert_with(|| Arc::clone(reader.schema()));
        for batch in reader.build()? {
            batches.push(batch?);
        }
    }
    let Some(schema) = schema else {
        return Ok(Rewritten {
            bytes: Vec::new(),
            rows: 0,
        });
    };
    let all = concat_batches(&schema, &batches)?;
    drop(batches);
    let rows = all.num_rows();
    let sessions = arrow::compute::cast(session_array(&all, session_column)?, &DataType::Utf8)?;
    // The row number as a second key makes the sort stable: events of a session stay in the
    // order they were logged.
    let positions = UInt32Array::from_iter_values(0..u32::try_from(rows).unwrap_or(u32::MAX));
    let order = lexsort_to_indices(
        &[
            SortColumn {
                values: sessions,
                options: None,
            },
            SortColumn {
                values: Arc::new(positions),
                options: None,
            },
        ],
        None,
    )?;
    let sorted = arrow::compute::take_record_batch(&all, &order)?;
    drop(all);
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(properties))?;
    writer.write(&sorted)?;
    writer.close()?;
    Ok(Rewritten {
        bytes: out,
        rows: rows as u64,
    })
}

/// Replaces live files of one table by rewritten ones with one
/// [`Table::publish`](crate::Table::publish). `added` pairs each new file's bytes with its
/// record. Returns false, having committed nothing (and deleted its own uploads), when another
/// rewrite replaced one of `removed` first.
///
/// An erasure's replaced files are deleted as soon as the commit is in: they hold the erased
/// session. A compaction's stay until [`Table::vacuum`](crate::Table::vacuum), for readers of
/// the snapshots that still name them.
pub async fn replace_files(
    lake: &Lake,
    kind: TableKind,
    change: Change,
    removed: Vec<String>,
    added: Vec<(Vec<u8>, NewFile)>,
) -> Result<bool, RewriteError> {
    match lake
        .table(kind)
        .publish(change, added, &removed, None)
        .await?
    {
        Publication::Published(_) => Ok(true),
        // No guard here, so no refusal; counted as losing the race if one ever came back.
        Publication::Conflict | Publication::AlreadyApplied | Publication::Refused(_) => Ok(false),
        // Left to the retry: an erasure sweeps what it finds, a compaction takes the group again.
        Publication::Uncertain(error) => Err(error.into()),
    }
}

/// What [`delete_unlinked_copies`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Objects deleted.
    pub deleted: usize,
    /// Young objects no commit names that hold rows of the session: uploads of a writer that
    /// may still commit them (another erasure's rewrite, say). Sweep again later.
    pub in_flight: usize,
}

/// Uploads no commit names are left alone this long (a writer commits within seconds of its
/// upload); older ones are a dead writer's.
const UPLOAD_GRACE: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Deletes the objects of a survey's folders in the table of `kind` that no live file names and
/// that hold rows of `session`: files a commit removed (an erasure that crashed before deleting
/// what it replaced, a compaction's inputs kept for readers) and uploads older than
/// [`UPLOAD_GRACE`] that no commit added. Younger uploads holding the session are counted in
/// [`Sweep::in_flight`], not deleted: their writer may still commit them.
pub async fn delete_unlinked_copies(
    lake: &Lake,
    kind: TableKind,
    survey_id: &str,
    session: &Arc<SessionRows>,
) -> Result<Sweep, RewriteError> {
    let table = lake.table(kind);
    let live = table.live_paths(Some(survey_id)).await?;
    let removed = table.removed_paths().await?;
    let folder = tables::results_folder(kind, survey_id);
    let objects: Vec<object_store::ObjectMeta> = lake
        .store()
        .list(Some(&object_store::path::Path::from(folder.as_str())))
        .try_collect()
        .await
        .map_err(LakeError::from)?;
    let young_since = chrono::Utc::now()
        - chrono::Duration::from_std(UPLOAD_GRACE).unwrap_or(chrono::Duration::zero());
    let candidates = objects.into_iter().filter(|object| {
        let path = object.location.as_ref();
        !live.contains(path) && path.ends_with(".parquet")
    });
    // Two objects probed at a time (footer and session columns, decoded on the async runtime:
    // two dictionary columns), a whole file read only when that fails.
    let held: Vec<Option<object_store::ObjectMeta>> = futures::stream::iter(candidates)
        .map(|object| async move {
            let path = object.location.to_string();
            if let Ok(holds) = holds_session(lake.store(), &path, object.size, session).await {
                return Ok(holds.then_some(object));
            }
            let bytes = match lake.read(&path).await {
                Ok(bytes) => bytes,
                // A vacuum got to it first.
                Err(LakeError::Store(object_store::Error::NotFound { .. })) => return Ok(None),
                Err(error) => return Err(RewriteError::from(error)),
            };
            let rows = Arc::clone(session);
            let properties = tables::writer_properties(kind);
            let holds = tokio::task::spawn_blocking(move || {
                // A file that cannot be read as Parquet may be an upload cut short: it counts as
                // holding the session.
                erase_rows(bytes, &rows, properties)
                    .map_or(true, |erased| !matches!(erased, Erased::Untouched))
            })
            .await?;
            Ok(holds.then_some(object))
        })
        .buffered(2)
        .try_collect()
        .await?;
    let mut sweep = Sweep::default();
    for object in held.into_iter().flatten() {
        let path = object.location.to_string();
        if removed.contains(&path) || object.last_modified < young_since {
            lake.delete(&path).await?;
            sweep.deleted += 1;
        } else {
            sweep.in_flight += 1;
        }
    }
    Ok(sweep)
}

/// The distinct values of one string column of a Parquet file (read alone).
pub fn column_values(bytes: Bytes, column: &str) -> Result<HashSet<String>, RewriteError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let Some((index, _)) = builder.schema().fields().find(column) else {
        return Ok(HashSet::new());
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
    let mut values = HashSet::new();
    for batch in builder.with_projection(mask).build()? {
        let strings = arrow::compute::cast(batch?.column(0), &DataType::Utf8)?;
        values.extend(
            strings
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::to_owned),
        );
    }
    Ok(values)
}

/// The owner name of a command-line process (`telltale compact`): `cli-<pid>@<host>`, so that
/// once the process is gone any process of the same host can tell, and clean up after it.
pub fn command_line_owner() -> String {
    format!("cli-{}@{}", std::process::id(), host_name())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// Whether `owner` names a command-line process of this host that no longer runs.
pub fn command_line_owner_is_dead(owner: &str) -> bool {
    let Some((pid, host)) = owner
        .strip_prefix("cli-")
        .and_then(|rest| rest.split_once('@'))
    else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == host_name()
        && pid != std::process::id()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Indices and names of the columns that identify a session, among `fields`.
fn session_columns(fields: &arrow::datatypes::Fields) -> Vec<(usize, &'static str)> {
    ["session_id", "reference"]
        .into_iter()
        .filter_map(|name| fields.find(name).map(|(index, _)| (index, name)))
        .collect()
}

/// True for the rows that do not belong to the session.
fn keep_mask(batch: &RecordBatch, session: &SessionRows) -> Result<BooleanArray, RewriteError> {
    let mut keep = vec![true; batch.num_rows()];
    if let Some(column) = batch.column_by_name("reference") {
        mark(column, &mut keep, |value| session.matches_reference(value))?;
    }
    if let Some(column) = batch.column_by_name("session_id") {
        mark(column, &mut keep, |value| session.matches_identifier(value))?;
    }
    Ok(BooleanArray::from(keep))
}

/// Clears `keep` for the rows whose string value matches. Dictionary columns are matched once
/// per dictionary value, not once per row.
fn mark(
    column: &ArrayRef,
    keep: &mut [bool],
    matches: impl Fn(&str) -> bool,
) -> Result<(), RewriteError> {
    match column.data_type() {
        DataType::Dictionary(key, value)
            if **key == DataType::Int32 && **value == DataType::Utf8 =>
        {
            let dictionary = column.as_dictionary::<Int32Type>();
            let values = dictionary.values().as_string::<i32>();
            let hit: Vec<bool> = (0..values.len())
                .map(|index| values.is_valid(index) && matches(values.value(index)))
                .collect();
            if !hit.contains(&true) {
                return Ok(());
            }
            for (row, key) in dictionary.keys().iter().enumerate() {
                if let Some(key) = key
                    && hit.get(key as usize).copied().unwrap_or(false)
                {
                    keep[row] = false;
                }
            }
        }
        _ => {
            let strings = arrow::compute::cast(column, &DataType::Utf8)?;
            let strings = strings.as_string::<i32>();
            for (row, value) in strings.iter().enumerate() {
                if value.is_some_and(&matches) {
                    keep[row] = false;
                }
            }
        }
    }
    Ok(())
}

fn session_array<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, RewriteError> {
    batch.column_by_name(name).ok_or_else(|| {
        RewriteError::Arrow(arrow::error::ArrowError::SchemaError(format!(
            "no column {name:?}"
        )))
    })
}

#[cfg(test)]
mod tests;
