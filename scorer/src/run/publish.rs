//! Publishing a step: its features and scores files into the lake, then the scores into the
//! catalog, fenced by the run's lease; and taking back what an earlier attempt published but
//! never recorded, so that lookup and the lake agree.

use std::collections::HashSet;

use catalog::{NewScore, RunId, RunProgress, ScoredReference, ScoringRun};
use futures::TryStreamExt;
use lake::{NewFile, TableKind, tables};
use parking_lot::Mutex;

use super::pipeline::{Computed, Phases};
use super::{RunError, Scorer, Stop};
use crate::tables::{ScoredSession, features_batch, scores_batch};

impl Scorer {
    /// Takes back what an earlier attempt at this run wrote to the lake but never recorded in
    /// the catalog (it died, or lost its lease, between the two): files it committed whose
    /// sessions the catalog does not credit to this run are removed from the tables, and
    /// uploads no commit names are deleted. Lookup and the lake then agree on what the run
    /// published. That attempt has lost the run, and could no longer record anything.
    pub(super) async fn remove_unpublished(&self, run: &ScoringRun) -> Result<(), Stop> {
        let credited = credited_to(
            self.catalog.scored_references(&run.survey_id).await?,
            &run.id,
        );
        for kind in [TableKind::Features, TableKind::Scores] {
            let table = self.lake.table(kind);
            let ours = tables::results_run_prefix(kind, run.survey_id.as_str(), run.id.as_str());
            let live: Vec<String> = table
                .live_files(Some(run.survey_id.as_str()))
                .await?
                .into_iter()
                .map(|file| file.path)
                .filter(|path| path.starts_with(&ours))
                .collect();
            let mut unrecorded = Vec::new();
            for path in &live {
                let bytes = self.lake.read(path).await?;
                let references = tokio::task::spawn_blocking(move || {
                    lake::rewrite::column_values(bytes, "reference")
                })
                .await??;
                if !references
                    .iter()
                    .all(|reference| credited.contains(reference))
                {
                    unrecorded.push(path.clone());
                }
            }
            if !unrecorded.is_empty() {
                tracing::info!(
                    files = unrecorded.len(),
                    table = kind.as_str(),
                    "removing files of an attempt that did not record them"
                );
                let removed = table
                    .commit(lake::Change::Erase, &[], &unrecorded, None)
                    .await?;
                if !matches!(removed, lake::Committed::Version(_)) {
                    return Err(Stop::Failed(RunError::EarlierAttemptChanged));
                }
            }
            let folder = tables::results_folder(kind, run.survey_id.as_str());
            let prefix = object_store::path::Path::from(folder.as_str());
            let objects: Vec<object_store::ObjectMeta> =
                self.lake.store().list(Some(&prefix)).try_collect().await?;
            let live: HashSet<String> = live.into_iter().collect();
            for object in objects {
                let path = object.location.to_string();
                if is_leftover(&path, &ours, &live, &unrecorded) {
                    tracing::info!(path, "removing an unpublished scoring file");
                    self.lake.delete(&path).await?;
                }
            }
        }
        Ok(())
    }

    /// Writes one step's results to the lake and records them in the catalog, then moves the
    /// counters.
    pub(super) async fn publish(
        &self,
        run: &ScoringRun,
        step: Computed,
        attempt: &str,
        progress: &Mutex<RunProgress>,
        phases: &mut Phases,
    ) -> Result<(), Stop> {
        let publishing = std::time::Instant::now();
        let Computed {
            scored,
            failures,
            sequence,
        } = step;
        let now = catalog::now_millis();
        let survey = run.survey_id.as_str();
        let run_id = run.id.as_str();
        let mut files = Vec::new();
        if !scored.is_empty() {
            let features = features_batch(survey, run_id, now, &scored)?;
            let scores = scores_batch(survey, run_id, &self.model.version, now, &scored)?;
            // The two tables' files are encoded, uploaded and (below) committed side by side:
            // each costs an fsync or a round trip to the object store, not CPU.
            let rows = scored.len() as u64;
            let upload = |kind: TableKind, batch| async move {
                let bytes =
                    tokio::task::spawn_blocking(move || tables::encode(kind, &batch)).await??;
                let size = bytes.len() as u64;
                let file = step_file(kind, survey, run_id, attempt, sequence, size, rows);
                self.lake.put_durable(&file.path, bytes).await?;
                Ok::<_, Stop>((kind, file))
            };
            let (features, scores) = tokio::join!(
                upload(TableKind::Features, features),
                upload(TableKind::Scores, scores)
            );
            files.push(features?);
            files.push(scores?);
        }
        let new_scores = score_records(&scored, &run.id, &self.model.version, now);
        // The lake first, then the fenced record: an attempt that dies in between leaves
        // files its successor removes (`remove_unpublished`); the other order would leave
        // scores lookup reports and the lake never gets.
        let commits = files.iter().map(|(kind, file)| async move {
            self.lake
                .table(*kind)
                .commit(lake::Change::Append, std::slice::from_ref(file), &[], None)
                .await
        });
        let mut committed = Vec::new();
        let mut uncertain = HashSet::new();
        let mut published = Ok(true);
        for ((kind, file), outcome) in files.iter().zip(futures::future::join_all(commits).await) {
            match outcome {
                Ok(_) => committed.push((*kind, file.path.clone())),
                Err(error) => {
                    // It may have landed all the same: the next attempt's `remove_unpublished`
                    // looks at the table; the object stays until then.
                    uncertain.insert(file.path.as_str());
                    published = Err(Stop::from(error));
                }
            }
        }
        if matches!(published, Ok(true)) {
            let recording = std::time::Instant::now();
            published = self
                .catalog
                .record_scores(&run.survey_id, &run.id, &self.owner, &new_scores)
                .await
                .map_err(Stop::from);
            phases.record += recording.elapsed();
        }
        if !matches!(published, Ok(true)) {
            // Not recorded: the files are not data. Take them back now rather than leave them
            // to the next attempt. An object goes only once no snapshot names it: a file whose
            // removal from its table failed, or whose commit may have landed, is left to the
            // next attempt's `remove_unpublished`.
            let mut keep = uncertain;
            for (kind, path) in &committed {
                if let Err(error) = self
                    .lake
                    .table(*kind)
                    .commit(lake::Change::Erase, &[], std::slice::from_ref(path), None)
                    .await
                {
                    tracing::warn!(path, %error, "could not remove an unrecorded file from its table");
                    keep.insert(path);
                }
            }
            for (_, file) in files
                .iter()
                .filter(|(_, file)| !keep.contains(file.path.as_str()))
            {
                if let Err(error) = self.lake.delete(&file.path).await {
                    tracing::warn!(path = file.path, %error, "could not remove an unpublished file");
                }
            }
        }
        if !published? {
            return Err(Stop::LeaseLost);
        }
        phases.publish += publishing.elapsed();
        let mut p = progress.lock();
        p.scored += scored.len() as u64;
        p.failed += failures.len() as u64;
        p.failures.extend(failures);
        Ok(())
    }
}

/// The references the catalog credits to `run`: those whose latest score it recorded.
fn credited_to(scored: Vec<ScoredReference>, run: &RunId) -> HashSet<String> {
    scored
        .into_iter()
        .filter(|scored| scored.run_id == run.as_str())
        .map(|scored| scored.reference)
        .collect()
}

/// Whether an object in a results folder is a leftover of the run whose files start with
/// `ours`: an upload no commit names (not `live`), or a file just taken out of its table as
/// `unrecorded`.
fn is_leftover(path: &str, ours: &str, live: &HashSet<String>, unrecorded: &[String]) -> bool {
    path.starts_with(ours) && (!live.contains(path) || unrecorded.iter().any(|u| u == path))
}

/// The lake file of one step's rows of `kind`, `size` bytes long.
fn step_file(
    kind: TableKind,
    survey: &str,
    run_id: &str,
    attempt: &str,
    sequence: usize,
    size: u64,
    rows: u64,
) -> NewFile {
    NewFile {
        path: tables::results_file_path(kind, survey, run_id, attempt, sequence),
        survey_id: survey.to_owned(),
        date: None,
        size,
        rows,
        received: None,
    }
}

/// The catalog's records of a step's scored sessions, as the latest scores of their references.
fn score_records(
    scored: &[ScoredSession],
    run: &RunId,
    model_version: &str,
    now: i64,
) -> Vec<NewScore> {
    scored
        .iter()
        .map(|session| NewScore {
            reference: session.reference.clone(),
            human_score_percent: session.score.human_score_percent,
            score_band: session.score.band.to_owned(),
            scored_at: now,
            model_version: model_version.to_owned(),
            run_id: run.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
