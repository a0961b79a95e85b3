//! Compaction: the many small events files that flushes write are merged, per survey and date,
//! into few large files sorted by session, so scans open fewer files and an erasure rewrites
//! one file rather than every flush's.
//!
//! What a compaction needs of the deployment (whether a scoring run reads a survey's files, and
//! a claim on a partition so instances sharing the lake split the work) it asks a
//! [`CompactionGuard`], which the caller implements over its catalog.
//!
//! A group is merged in bounded memory, by byte ranges and a chunk of rows at a time
//! ([`rewrite::merge_sorted_files`]).
//!
//! A partition is compacted when it holds at least two small files (fewer rows than half of
//! the target). Its small files, in commit order, are cut into groups of at most the target's
//! rows; each group of two or more files becomes one file, replaced with
//! [`rewrite::replace_files`](crate::rewrite::replace_files). A group whose inputs another
//! rewrite (an erasure) replaced meanwhile is skipped; the next compaction takes it again.

use std::collections::BTreeMap;

use crate::rewrite::{self, RewriteError};
use crate::{Change, Lake, LiveFile, NewFile, TableKind, tables};

/// An error of the deployment a [`CompactionGuard`] asks (its catalog, say).
pub type GuardError = Box<dyn std::error::Error + Send + Sync>;

/// What compaction asks of the deployment around the lake.
#[async_trait::async_trait]
pub trait CompactionGuard: Send + Sync {
    /// Whether a scoring run reads the survey's events now: a file replaced under its scan
    /// would be lost to it, so the survey is left alone.
    async fn survey_is_scanned(&self, survey_id: &str) -> Result<bool, GuardError>;
    /// Takes a partition (`survey_id`, date or "") for this compaction; false when another
    /// worker holds it.
    async fn claim(&self, survey_id: &str, partition: &str) -> Result<bool, GuardError>;
    /// Gives a claimed partition back.
    async fn release(&self, survey_id: &str, partition: &str) -> Result<(), GuardError>;
}

/// Settings of a compaction pass.
#[derive(Debug, Clone)]
pub struct CompactionConfig {
    /// Rows a compacted file holds at most. Files under half of this count as small.
    pub target_rows: u64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        // About 5 MB of Parquet for pointer events, and a few hundred MB of Arrow while the
        // group is merged; an erasure rewrites at most this many rows per file it touches.
        CompactionConfig {
            target_rows: 2_000_000,
        }
    }
}

/// What a compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionReport {
    /// Files merged away, and the files they became.
    pub files_in: usize,
    pub files_out: usize,
    pub rows: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Groups skipped because a concurrent rewrite replaced one of their files first, or a
    /// scoring run started on the survey meanwhile.
    pub conflicts: usize,
}

/// Compacts the events files of `survey` (or of every survey), skipping surveys a scoring run
/// is scanning and partitions another worker holds (`guard`).
pub async fn compact(
    guard: &dyn CompactionGuard,
    lake: &Lake,
    survey: Option<&str>,
    config: &CompactionConfig,
) -> Result<CompactionReport, RewriteError> {
    let files = lake.table(TableKind::Events).live_files(survey).await?;
    let mut partitions: BTreeMap<(String, Option<String>), Vec<LiveFile>> = BTreeMap::new();
    for file in files {
        if !tables::is_survey_id(&file.survey_id) {
            tracing::warn!(
                path = file.path,
                "an events file outside any survey's partition"
            );
            continue;
        }
        if rows(&file) < config.target_rows / 2 {
            partitions
                .entry((file.survey_id.clone(), file.date.clone()))
                .or_default()
                .push(file);
        }
    }
    let mut report = CompactionReport::default();
    for ((survey_id, date), mut small) in partitions {
        if small.len() < 2 {
            continue;
        }
        if guard
            .survey_is_scanned(&survey_id)
            .await
            .map_err(RewriteError::Guard)?
        {
            tracing::debug!(survey = %survey_id, "compaction skips a survey being scored");
            continue;
        }
        let partition = date.as_deref().unwrap_or("");
        if !guard
            .claim(&survey_id, partition)
            .await
            .map_err(RewriteError::Guard)?
        {
            tracing::debug!(survey = %survey_id, partition, "another worker compacts this partition");
            continue;
        }
        // In the order of their events, which the merge keeps within each session.
        small.sort_by(|a, b| (a.received, &a.path).cmp(&(b.received, &b.path)));
        let mut compacted = Ok(());
        for group in groups(&small, config.target_rows) {
            compacted =
                compact_group(guard, lake, &survey_id, date.as_deref(), group, &mut report).await;
            if compacted.is_err() {
                break;
            }
        }
        // Released even after a failure; a claim that is never released lapses with its lease.
        guard
            .release(&survey_id, partition)
            .await
            .map_err(RewriteError::Guard)?;
        compacted?;
    }
    Ok(report)
}

/// A file's row count (the log records it for every file we write).
fn rows(file: &LiveFile) -> u64 {
    file.rows.unwrap_or(u64::MAX)
}

/// Consecutive runs of files of at most `target_rows` rows in all, of two files or more.
fn groups(files: &[LiveFile], target_rows: u64) -> Vec<&[LiveFile]> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut total = 0u64;
    for (index, file) in files.iter().enumerate() {
        if index > start && total.saturating_add(rows(file)) > target_rows {
            groups.push(&files[start..index]);
            start = index;
            total = 0;
        }
        total = total.saturating_add(rows(file));
    }
    groups.push(&files[start..]);
    groups.retain(|group| group.len() >= 2);
    groups
}

async fn compact_group(
    guard: &dyn CompactionGuard,
    lake: &Lake,
    survey_id: &str,
    date: Option<&str>,
    group: &[LiveFile],
    report: &mut CompactionReport,
) -> Result<(), RewriteError> {
    // Read by byte ranges, a chunk of rows at a time: the merge's memory does not grow with
    // the group's files (rewrite::merge_sorted_files).
    let inputs: Vec<rewrite::MergeInput> = group
        .iter()
        .map(|file| rewrite::MergeInput {
            path: file.path.clone(),
            size: file.size,
        })
        .collect();
    let merged = rewrite::merge_sorted_files(
        lake.store(),
        &inputs,
        tables::session_column(TableKind::Events),
        tables::writer_properties(TableKind::Events),
    )
    .await?;
    let received = group
        .iter()
        .map(|file| file.received)
        .collect::<Option<Vec<_>>>()
        .and_then(|ranges| {
            let min = ranges.iter().map(|range| range.0).min()?;
            let max = ranges.iter().map(|range| range.1).max()?;
            Some((min, max))
        });
    let file = NewFile {
        path: tables::rewritten_file_path(TableKind::Events, survey_id, date),
        survey_id: survey_id.to_owned(),
        date: date.map(str::to_owned),
        size: merged.bytes.len() as u64,
        rows: merged.rows,
        received,
    };
    let (rows_out, bytes_out) = (file.rows, file.size);
    // A run that started during the merge would lose the inputs under its scan: leave them.
    if guard
        .survey_is_scanned(survey_id)
        .await
        .map_err(RewriteError::Guard)?
    {
        report.conflicts += 1;
        return Ok(());
    }
    let removed: Vec<String> = group.iter().map(|file| file.path.clone()).collect();
    let replaced = rewrite::replace_files(
        lake,
        TableKind::Events,
        Change::Compact,
        removed,
        vec![(merged.bytes, file)],
    )
    .await?;
    if replaced {
        report.files_in += group.len();
        report.files_out += 1;
        report.rows += rows_out;
        report.bytes_in += group.iter().map(|file| file.size).sum::<u64>();
        report.bytes_out += bytes_out;
    } else {
        report.conflicts += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(id: usize, rows: u64) -> LiveFile {
        LiveFile {
            path: format!("f{id}"),
            survey_id: "00112233445566778899aabb".to_owned(),
            date: None,
            size: 0,
            rows: Some(rows),
            added_at: 0,
            received: None,
        }
    }

    #[test]
    fn groups_stay_under_the_target_and_single_files_are_left_alone() {
        let files: Vec<LiveFile> = [40, 40, 30, 90, 10, 5]
            .iter()
            .enumerate()
            .map(|(index, rows)| file(index, *rows))
            .collect();
        let ids: Vec<Vec<String>> = groups(&files, 100)
            .iter()
            .map(|group| group.iter().map(|file| file.path.clone()).collect())
            .collect();
        assert_eq!(ids, vec![vec!["f0", "f1"], vec!["f3", "f4"]]);
    }
}
