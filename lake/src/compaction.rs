//! Compaction: the many small events files that flushes write are merged, per survey and date,
//! into few large files sorted by session, so scans open fewer files and an erasure rewrites
//! one file rather than every flush's.
//!
//! A partition is compacted when it holds at least two small files (fewer rows than half of
//! the target). Its small files, in commit order, are cut into groups of at most the target's
//! rows; each group of two or more files becomes one file, replaced with
//! [`rewrite::replace_files`](crate::rewrite::replace_files). A group whose inputs another
//! rewrite (an erasure) replaced meanwhile is skipped; the next compaction takes it again.

use std::collections::BTreeMap;
use std::sync::Arc;

use catalog::{Catalog, CompactionClaim, LakeFile, LakeFileKind, NewLakeFile, SurveyId};

use crate::Lake;
use crate::rewrite::{self, RewriteError};
use crate::tables;

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
/// is scanning. `owner` names this process in the catalog's record of pending uploads.
pub async fn compact(
    catalog: &Arc<dyn Catalog>,
    lake: &Lake,
    owner: &str,
    survey: Option<&SurveyId>,
    config: &CompactionConfig,
) -> Result<CompactionReport, RewriteError> {
    let files = catalog.live_files(LakeFileKind::Events, survey).await?;
    let mut partitions: BTreeMap<(SurveyId, Option<String>), Vec<LakeFile>> = BTreeMap::new();
    for file in files {
        if file.file.row_count < config.target_rows / 2 {
            partitions
                .entry((
                    file.file.survey_id.clone(),
                    file.file.partition_date.clone(),
                ))
                .or_default()
                .push(file);
        }
    }
    let mut report = CompactionReport::default();
    for ((survey_id, date), mut small) in partitions {
        if small.len() < 2 {
            continue;
        }
        if catalog.has_active_scoring_run(&survey_id).await? {
            tracing::debug!(survey = %survey_id, "compaction skips a survey being scored");
            continue;
        }
        let partition = date.as_deref().unwrap_or("");
        if !claim(catalog, &survey_id, partition, owner).await? {
            tracing::debug!(survey = %survey_id, partition, "another worker compacts this partition");
            continue;
        }
        // Commit order is log order, which the merge keeps within each session.
        small.sort_by_key(|file| file.id);
        let mut compacted = Ok(());
        for group in groups(&small, config.target_rows) {
            compacted = compact_group(
                catalog,
                lake,
                owner,
                &survey_id,
                date.as_deref(),
                group,
                &mut report,
            )
            .await;
            if compacted.is_err() {
                break;
            }
        }
        // Released even after a failure; a claim that is never released lapses with its lease.
        catalog
            .release_compaction(&survey_id, partition, owner)
            .await?;
        compacted?;
    }
    Ok(report)
}

/// Claims a partition, taking it over from a command-line compaction of this host that died
/// holding it (a server's claim lapses with its lease, or returns to it when it restarts).
async fn claim(
    catalog: &Arc<dyn Catalog>,
    survey: &SurveyId,
    partition: &str,
    owner: &str,
) -> Result<bool, RewriteError> {
    match catalog
        .claim_compaction(survey, partition, owner, CLAIM_LEASE_MS)
        .await?
    {
        CompactionClaim::Claimed => Ok(true),
        CompactionClaim::HeldBy(holder) if rewrite::command_line_owner_is_dead(&holder) => {
            catalog
                .release_compaction(survey, partition, &holder)
                .await?;
            Ok(catalog
                .claim_compaction(survey, partition, owner, CLAIM_LEASE_MS)
                .await?
                == CompactionClaim::Claimed)
        }
        CompactionClaim::HeldBy(_) => Ok(false),
    }
}

/// How long a compaction claim holds without release. A partition's compaction takes seconds to
/// minutes; one that outlasts the claim can meet a second worker, whose file swap then loses.
const CLAIM_LEASE_MS: i64 = 10 * 60 * 1000;

/// Consecutive runs of files of at most `target_rows` rows in all, of two files or more.
fn groups(files: &[LakeFile], target_rows: u64) -> Vec<&[LakeFile]> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut rows = 0;
    for (index, file) in files.iter().enumerate() {
        if index > start && rows + file.file.row_count > target_rows {
            groups.push(&files[start..index]);
            start = index;
            rows = 0;
        }
        rows += file.file.row_count;
    }
    groups.push(&files[start..]);
    groups.retain(|group| group.len() >= 2);
    groups
}

async fn compact_group(
    catalog: &Arc<dyn Catalog>,
    lake: &Lake,
    owner: &str,
    survey_id: &SurveyId,
    date: Option<&str>,
    group: &[LakeFile],
    report: &mut CompactionReport,
) -> Result<(), RewriteError> {
    let mut inputs = Vec::with_capacity(group.len());
    for file in group {
        inputs.push(lake.read(&file.file.path).await?);
    }
    let merged = tokio::task::spawn_blocking(move || {
        rewrite::merge_sorted(
            &inputs,
            tables::session_column(LakeFileKind::Events),
            tables::writer_properties(LakeFileKind::Events),
        )
    })
    .await??;
    let path = tables::rewritten_file_path(LakeFileKind::Events, survey_id.as_str(), date);
    let file = NewLakeFile {
        path,
        kind: LakeFileKind::Events,
        survey_id: survey_id.clone(),
        partition_date: date.map(str::to_owned),
        row_count: merged.rows,
        size_bytes: merged.bytes.len() as u64,
        min_session: merged.min_session,
        max_session: merged.max_session,
    };
    let (rows, bytes_out) = (file.row_count, file.size_bytes);
    // A run that started during the merge would lose the inputs under its scan: leave them.
    if catalog.has_active_scoring_run(survey_id).await? {
        report.conflicts += 1;
        return Ok(());
    }
    let removed: Vec<String> = group.iter().map(|file| file.file.path.clone()).collect();
    let replaced = rewrite::replace_files(
        catalog,
        lake,
        owner,
        removed,
        vec![(merged.bytes, file)],
        None,
    )
    .await?;
    if replaced {
        report.files_in += group.len();
        report.files_out += 1;
        report.rows += rows;
        report.bytes_in += group.iter().map(|file| file.file.size_bytes).sum::<u64>();
        report.bytes_out += bytes_out;
    } else {
        report.conflicts += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(id: i64, rows: u64) -> LakeFile {
        LakeFile {
            id,
            created_at: 0,
            file: NewLakeFile {
                path: format!("f{id}"),
                kind: LakeFileKind::Events,
                survey_id: SurveyId::parse("00112233445566778899aabb").expect("id"),
                partition_date: None,
                row_count: rows,
                size_bytes: 0,
                min_session: None,
                max_session: None,
            },
        }
    }

    #[test]
    fn groups_stay_under_the_target_and_single_files_are_left_alone() {
        let files: Vec<LakeFile> = [40, 40, 30, 90, 10, 5]
            .iter()
            .enumerate()
            .map(|(index, rows)| file(index as i64, *rows))
            .collect();
        let ids: Vec<Vec<i64>> = groups(&files, 100)
            .iter()
            .map(|group| group.iter().map(|file| file.id).collect())
            .collect();
        assert_eq!(ids, vec![vec![0, 1], vec![3, 4]]);
    }
}
