//! Publishing a step: its features and scores files into the lake, then the scores into the
//! catalog, fenced by the run's lease; and taking back what an earlier attempt published but
//! never recorded, so that lookup and the lake agree.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use catalog::{NewScore, RunId, RunProgress, ScoringRun};
use lake::{NewFile, TableKind, tables};
use parking_lot::Mutex;

use super::pipeline::{Computed, Phases};
use super::{RunError, Scorer, Stop};
use crate::tables::{ScoredSession, features_batch, scores_batch};

/// How long a step's catalog record, its rows written, waits for the step's lake files before
/// it rolls back and records again after them (`Scorer::publish`).
const RECORD_WAITS_FOR_LAKE: Duration = Duration::from_secs(1);

impl Scorer {
    /// Takes back what an earlier attempt at this run wrote to the lake but never recorded in
    /// the catalog (it died, or lost its lease, between the two): files it committed whose
    /// sessions the catalog does not credit to this run are removed from the tables, and
    /// uploads no commit names are deleted. Lookup and the lake then agree on what the run
    /// published. That attempt has lost the run, and could no longer record anything.
    ///
    /// Returns the references whose latest score the run wrote (an earlier attempt's).
    pub(super) async fn remove_unpublished(
        &self,
        run: &ScoringRun,
    ) -> Result<HashSet<String>, Stop> {
        let credited: HashSet<String> = self
            .catalog
            .run_references(&run.survey_id, &run.id)
            .await?
            .into_iter()
            .collect();
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
                // An erasure's publication: the files leave the table and then the store.
                let removed = table
                    .publish(lake::Change::Erase, Vec::new(), &unrecorded, None)
                    .await?;
                match removed {
                    lake::Publication::Published(_) => {}
                    lake::Publication::Uncertain(error) => return Err(Stop::from(error)),
                    lake::Publication::Conflict
                    | lake::Publication::AlreadyApplied
                    | lake::Publication::Refused(_) => {
                        return Err(Stop::Failed(RunError::EarlierAttemptChanged));
                    }
                }
            }
            // Uploads of the earlier attempt that no commit names.
            let folder = tables::results_folder(kind, run.survey_id.as_str());
            for path in table
                .delete_uncommitted(&folder, |path| path.starts_with(&ours))
                .await?
            {
                tracing::info!(path, "removed an unpublished scoring file");
            }
        }
        Ok(credited)
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
            counted,
        } = step;
        let now = catalog::now_millis();
        let survey = run.survey_id.as_str();
        let run_id = run.id.as_str();
        let new_scores = score_records(&scored, &counted, &run.id, &self.model.version, now);
        // The lake first, then the fenced record: an attempt that dies in between leaves
        // files its successor removes (`remove_unpublished`); the other order would leave
        // scores lookup reports and the lake never gets. The record's rows are written while
        // the files are encoded and committed, and its transaction commits once they landed
        // (`record_scores_when`): the two overlap, the order of their commits holds.
        let (landed, ready) = tokio::sync::oneshot::channel::<bool>();
        let lake_side = async {
            let outcome = self
                .publish_files(survey, run_id, attempt, sequence, now, &scored)
                .await;
            let _ = landed.send(outcome.1.is_ok());
            outcome
        };
        // The transaction holds SQLite's write lock while it waits: it waits for the lake at
        // most RECORD_WAITS_FOR_LAKE once its rows are in, then gives the lock back and records
        // again after the files landed (a slow object store must not stall the catalog's other
        // writers for longer than that).
        let waited_out = AtomicBool::new(false);
        let record_side = async {
            let recording = std::time::Instant::now();
            let ready: catalog::Ready<'_> = Box::pin(async {
                match tokio::time::timeout(RECORD_WAITS_FOR_LAKE, ready).await {
                    Ok(landed) => landed.unwrap_or(false),
                    Err(_) => {
                        waited_out.store(true, Ordering::Relaxed);
                        false
                    }
                }
            });
            let recorded = self
                .catalog
                .record_scores_when(&run.survey_id, &run.id, &self.owner, &new_scores, ready)
                .await
                .map_err(Stop::from);
            (recorded, recording.elapsed())
        };
        let ((committed, files), (mut recorded, recording)) = tokio::join!(lake_side, record_side);
        phases.record += recording;
        if files.is_ok() && matches!(recorded, Ok(false)) && waited_out.load(Ordering::Relaxed) {
            let recording = std::time::Instant::now();
            recorded = self
                .catalog
                .record_scores(&run.survey_id, &run.id, &self.owner, &new_scores)
                .await
                .map_err(Stop::from);
            phases.record += recording.elapsed();
        }
        // The lake's failure first: the record was rolled back for it.
        let published = files.and(recorded);
        if !matches!(published, Ok(true)) {
            // Not recorded: the files are not data. Take them back now rather than leave them
            // to the next attempt (which would, with `remove_unpublished`).
            for (kind, path) in &committed {
                let removed = self
                    .lake
                    .table(*kind)
                    .publish(
                        lake::Change::Erase,
                        Vec::new(),
                        std::slice::from_ref(path),
                        None,
                    )
                    .await;
                if let Err(error) | Ok(lake::Publication::Uncertain(error)) = removed {
                    tracing::warn!(path, %error, "could not remove an unrecorded file from its table");
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

    /// Encodes a step's features and scores files and commits each to its table, side by
    /// side (each an fsync or a round trip to the object store, not CPU). Answers the files
    /// committed, and whether both were.
    async fn publish_files(
        &self,
        survey: &str,
        run_id: &str,
        attempt: &str,
        sequence: usize,
        now: i64,
        scored: &[ScoredSession],
    ) -> (Vec<(TableKind, String)>, Result<(), Stop>) {
        let mut committed = Vec::new();
        if scored.is_empty() {
            return (committed, Ok(()));
        }
        let encoded = async {
            let features = features_batch(survey, run_id, now, scored)?;
            let scores = scores_batch(survey, run_id, &self.model.version, now, scored)?;
            let rows = scored.len() as u64;
            let encode = |kind: TableKind, batch| async move {
                let bytes =
                    tokio::task::spawn_blocking(move || tables::encode(kind, &batch)).await??;
                let file = step_file(kind, survey, run_id, attempt, sequence, bytes.len(), rows);
                Ok::<_, Stop>((kind, (bytes, file)))
            };
            let (features, scores) = tokio::join!(
                encode(TableKind::Features, features),
                encode(TableKind::Scores, scores)
            );
            Ok::<_, Stop>(vec![features?, scores?])
        };
        let uploads = match encoded.await {
            Ok(uploads) => uploads,
            Err(stop) => return (committed, Err(stop)),
        };
        let publications = uploads.into_iter().map(|(kind, upload)| async move {
            let path = upload.1.path.clone();
            let outcome = self
                .lake
                .table(kind)
                .publish(lake::Change::Append, vec![upload], &[], None)
                .await;
            (kind, path, outcome)
        });
        let mut published = Ok(());
        for (kind, path, outcome) in futures::future::join_all(publications).await {
            match outcome {
                Ok(lake::Publication::Published(_)) => committed.push((kind, path)),
                // A step's files are new names, never a replay, and unguarded: nothing else is
                // possible.
                Ok(
                    lake::Publication::Conflict
                    | lake::Publication::AlreadyApplied
                    | lake::Publication::Refused(_),
                ) => {}
                // It may have landed all the same: the next attempt's `remove_unpublished` looks
                // at the table; the object stays until then.
                Ok(lake::Publication::Uncertain(error)) | Err(error) => {
                    published = Err(Stop::from(error));
                }
            }
        }
        (committed, published)
    }
}

/// The lake file of one step's rows of `kind`, `size` bytes long.
fn step_file(
    kind: TableKind,
    survey: &str,
    run_id: &str,
    attempt: &str,
    sequence: usize,
    size: usize,
    rows: u64,
) -> NewFile {
    NewFile {
        path: tables::results_file_path(kind, survey, run_id, attempt, sequence),
        survey_id: survey.to_owned(),
        date: None,
        size: size as u64,
        rows,
        received: None,
    }
}

/// The catalog's records of a step's scored sessions, as the latest scores of their references.
fn score_records(
    scored: &[ScoredSession],
    counted: &HashMap<String, u64>,
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
            cohort: session.cohort.clone(),
            reasons: session
                .score
                .reasons
                .iter()
                .map(|reason| reason.describe())
                .collect(),
            cluster: session.cluster,
            events: counted
                .get(&session.reference)
                .copied()
                .unwrap_or(session.features.event_count.max(0.0) as u64),
        })
        .collect()
}

#[cfg(test)]
mod tests;
