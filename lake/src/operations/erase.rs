//! An erasure's rewrite of the lake: one session's rows taken out of a survey's three tables.
//!
//! [`rewrite_tables`] finds the live files of each table that hold the session (by byte ranges:
//! footer, statistics, session columns) and rewrites each without its rows, the three tables side
//! by side and two files of a table at a time; [`commit`] swaps every table's files in one
//! commit each; [`sweep`] deletes copies of the session no snapshot names any more. The steps
//! are the caller's to order around its own (a deletion waits for scoring runs and for every
//! instance's log purge between them).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::rewrite::{self, Erased, RewriteError, SessionRows};
use crate::{Change, Lake, LiveFile, NewFile, TableKind, tables};

/// Files of one table an erasure reads and rewrites at once: the work is CPU on blocking
/// threads, and a machine of two cores is busy with two.
const FILES_AT_ONCE: usize = 2;

/// One table's rewrite: the live files probed, the files it replaces or removes, and their
/// replacements.
#[derive(Debug)]
pub struct TableRewrite {
    pub kind: TableKind,
    pub probed: usize,
    pub removed: Vec<String>,
    pub added: Vec<(Vec<u8>, NewFile)>,
}

/// The three tables of `survey_id` rewritten without `session`'s rows, side by side (uploads
/// are not made yet: [`commit`] publishes them).
pub async fn rewrite_tables(
    lake: &Lake,
    survey_id: &str,
    session: &Arc<SessionRows>,
) -> Result<Vec<TableRewrite>, RewriteError> {
    futures::future::try_join_all(
        TableKind::ALL.map(|kind| rewrite_table(lake, kind, survey_id, session)),
    )
    .await
}

/// Publishes every table's swap, one commit a table, side by side. False when another rewrite
/// replaced one of the files first (nothing of that table is committed; the caller tries again).
pub async fn commit(lake: &Lake, rewrites: Vec<TableRewrite>) -> Result<bool, RewriteError> {
    let commits = rewrites
        .into_iter()
        .filter(|rewrite| !rewrite.removed.is_empty())
        .map(|rewrite| {
            rewrite::replace_files(
                lake,
                rewrite.kind,
                Change::Erase,
                rewrite.removed,
                rewrite.added,
            )
        });
    Ok(!futures::future::try_join_all(commits)
        .await?
        .contains(&false))
}

/// Deletes, in every table of the survey, copies of the session no snapshot names (what a
/// crashed attempt replaced, compaction inputs kept for readers, uploads of dead writers).
/// Answers whether an upload not yet committed still holds the session (try again later).
pub async fn sweep(
    lake: &Lake,
    survey_id: &str,
    session: &Arc<SessionRows>,
) -> Result<bool, RewriteError> {
    let sweeps = futures::future::try_join_all(
        TableKind::ALL.map(|kind| rewrite::delete_unlinked_copies(lake, kind, survey_id, session)),
    )
    .await?;
    Ok(sweeps.iter().any(|sweep| sweep.in_flight > 0))
}

/// The live files of one table of the survey that hold the session, and what replaces them.
/// Files are read and rewritten [`FILES_AT_ONCE`] at a time.
async fn rewrite_table(
    lake: &Lake,
    kind: TableKind,
    survey_id: &str,
    session: &Arc<SessionRows>,
) -> Result<TableRewrite, RewriteError> {
    let files = lake.table(kind).live_files(Some(survey_id)).await?;
    let probed = files.len();
    let erasures: Vec<(String, FileErasure)> = futures::stream::iter(files)
        .map(|file| async move {
            let erasure = erase_from(lake, kind, &file, session).await?;
            Ok::<_, RewriteError>((file.path, erasure))
        })
        .buffered(FILES_AT_ONCE)
        .try_collect()
        .await?;
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for (path, erasure) in erasures {
        match erasure {
            FileErasure::Untouched => continue,
            FileErasure::Removed => {}
            FileErasure::Replaced(bytes, new) => added.push((bytes, new)),
        }
        removed.push(path);
    }
    Ok(TableRewrite {
        kind,
        probed,
        removed,
        added,
    })
}

enum FileErasure {
    Untouched,
    Removed,
    Replaced(Vec<u8>, NewFile),
}

/// What becomes of one live file: left alone, removed, or replaced by a rewrite.
async fn erase_from(
    lake: &Lake,
    kind: TableKind,
    file: &LiveFile,
    session: &Arc<SessionRows>,
) -> Result<FileErasure, RewriteError> {
    // Most files of a survey do not hold the session: their footer and session columns tell.
    if !rewrite::holds_session(lake.store(), &file.path, file.size, session).await? {
        return Ok(FileErasure::Untouched);
    }
    let bytes = lake.read(&file.path).await?;
    let properties = tables::writer_properties(kind);
    let rows = Arc::clone(session);
    let erased = tokio::task::spawn_blocking(move || rewrite::erase_rows(bytes, &rows, properties))
        .await??;
    let rewritten = match erased {
        Erased::Untouched => return Ok(FileErasure::Untouched),
        Erased::Emptied => return Ok(FileErasure::Removed),
        Erased::Rewritten(rewritten) => rewritten,
    };
    let new = NewFile {
        path: tables::rewritten_file_path(kind, &file.survey_id, file.date.as_deref()),
        survey_id: file.survey_id.clone(),
        date: file.date.clone(),
        size: rewritten.bytes.len() as u64,
        rows: rewritten.rows,
        // The original's range still bounds the rows kept.
        received: file.received,
    };
    Ok(FileErasure::Replaced(rewritten.bytes, new))
}
