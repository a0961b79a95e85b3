//! A run's work once claimed: make events visible, plan, then scan pass by pass and score
//! step by step, each step's publishing overlapping the next step's computing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use catalog::{RunProgress, ScoringFailure, ScoringRun};
use lake::TableKind;
use parking_lot::Mutex;
use rayon::prelude::*;

use super::{RunError, Scorer, Stop};
use crate::cohort::{self, Standing};
use crate::features::{self, Features};
use crate::model::Model;
use crate::scan::{ScanTarget, scan_traces};
use crate::tables::ScoredSession;
use crate::trace::SessionTrace;

impl Scorer {
    /// Everything between the claim and the end of the run; the caller records the end.
    pub(super) async fn work(
        &self,
        run: &ScoringRun,
        progress: &Mutex<RunProgress>,
        on_progress: &(dyn Fn(&RunProgress) + Send + Sync),
    ) -> Result<(), Stop> {
        if run.cancel_requested_at.is_some() {
            return Err(Stop::Canceled);
        }
        self.remove_unpublished(run).await?;
        let mut phases = Phases::default();
        let started = std::time::Instant::now();
        if let Some(flusher) = &self.flusher {
            flusher
                .make_visible()
                .await
                .map_err(|error| Stop::Failed(RunError::Flush(error)))?;
        }
        phases.flush = started.elapsed();
        let planning = std::time::Instant::now();
        let plan = self.plan(run).await?;
        phases.plan = planning.elapsed();
        {
            let mut p = progress.lock();
            *p = RunProgress {
                total: plan.total,
                scored: plan.already_scored,
                skipped: plan.skipped,
                failed: 0,
                failures: Vec::new(),
            };
        }
        self.report(run, progress, on_progress).await?;
        if plan.sessions.is_empty() {
            return Ok(());
        }

        let files: Vec<String> = self
            .lake
            .table(TableKind::Events)
            .live_files(Some(run.survey_id.as_str()))
            .await?
            .into_iter()
            .map(|file| file.path)
            .collect();
        // Names this attempt's files apart from a crashed attempt's leftovers.
        let attempt = &catalog::ids::random_hex24()[..6];
        let mut sequence = 0usize;
        // A step's publishing (encoding, uploads, Delta commits, the catalog's upsert: mostly
        // waits on fsyncs and round trips) overlaps the next step's computing or the next
        // pass's scan (CPU on rayon's pool and DataFusion's threads). At most one step waits
        // to be published; its counters move once it is.
        let mut pipeline = Pipeline {
            run,
            attempt,
            progress,
            on_progress,
            pending: None,
        };
        let passes = plan.passes(self.settings.max_events_per_pass);
        for pass in passes {
            let mut session_of_identifier = HashMap::new();
            for (index, session) in pass.iter().enumerate() {
                for identifier in &session.identifiers {
                    session_of_identifier.insert(identifier.clone(), index as u32);
                }
            }
            // Rows of sessions outside the pass are dropped while routing. A `session_id IN`
            // filter in the scan would only pay off where row-group statistics can prune, that
            // is on files sorted by session across the survey (compaction); flush files each
            // hold a slice of time of every session, so the scan reads them whole.
            let target = ScanTarget {
                session_of_identifier: Arc::new(session_of_identifier),
                sessions: pass.len(),
            };
            let scan = async {
                scan_traces(&self.query, &files, &target)
                    .await
                    .map_err(Stop::from)
            };
            let (traces, scanning) = self.overlapped(&mut pipeline, &mut phases, scan).await?;
            phases.scan += scanning;
            let work: Vec<(String, SessionTrace)> = pass
                .iter()
                .map(|session| session.reference.clone())
                .zip(traces)
                .collect();
            // The pass's features first, and its cohort (every session of the pass compared
            // with the others), before any of its scores: a score needs its cohort.
            let featurize = featurize(self.model.clone(), work);
            let (mut featured, computing) = self
                .overlapped(&mut pipeline, &mut phases, featurize)
                .await?;
            phases.features += computing;
            while !featured.is_empty() {
                let rest = featured.split_off(featured.len().min(self.settings.chunk_sessions));
                let chunk = std::mem::replace(&mut featured, rest);
                sequence += 1;
                let compute = self.compute(chunk, sequence);
                let (computed, computing) =
                    self.overlapped(&mut pipeline, &mut phases, compute).await?;
                phases.features += computing;
                pipeline.pending = Some(computed);
            }
        }
        let nothing = async { Ok::<(), Stop>(()) };
        self.overlapped(&mut pipeline, &mut phases, nothing).await?;
        tracing::info!(
            run = %run.id,
            sessions = plan.sessions.len(),
            flush_ms = phases.flush.as_millis() as u64,
            plan_ms = phases.plan.as_millis() as u64,
            scan_ms = phases.scan.as_millis() as u64,
            features_ms = phases.features.as_millis() as u64,
            publish_ms = phases.publish.as_millis() as u64,
            record_ms = phases.record.as_millis() as u64,
            "scoring run phases"
        );
        Ok(())
    }

    /// Publishes the pipeline's pending step (when there is one) while `work` runs, then
    /// reports the progress and pauses as the settings ask. Returns `work`'s output and its own
    /// duration.
    async fn overlapped<T>(
        &self,
        pipeline: &mut Pipeline<'_>,
        phases: &mut Phases,
        work: impl std::future::Future<Output = Result<T, Stop>>,
    ) -> Result<(T, Duration), Stop> {
        let step = pipeline.pending.take();
        let published_one = step.is_some();
        let timed = async {
            let started = std::time::Instant::now();
            let output = work.await;
            (output, started.elapsed())
        };
        let publish = async {
            match step {
                Some(step) => {
                    self.publish(
                        pipeline.run,
                        step,
                        pipeline.attempt,
                        pipeline.progress,
                        phases,
                    )
                    .await
                }
                None => Ok(()),
            }
        };
        let (published, (output, took)) = tokio::join!(publish, timed);
        // A failed or fenced-off publication ends the run whatever the work came to.
        published?;
        if published_one {
            self.report(pipeline.run, pipeline.progress, pipeline.on_progress)
                .await?;
            if !self.settings.pause_between_chunks.is_zero() {
                tokio::time::sleep(self.settings.pause_between_chunks).await;
            }
        }
        Ok((output?, took))
    }

    /// Scores of one step's sessions, from their features and standings.
    async fn compute(&self, chunk: Vec<Featured>, sequence: usize) -> Result<Computed, Stop> {
        let results = score_sessions(self.model.clone(), chunk).await?;
        let mut computed = Computed {
            scored: Vec::new(),
            failures: Vec::new(),
            sequence,
        };
        for result in results {
            match result {
                Ok(session) => computed.scored.push(session),
                Err(failure) => computed.failures.push(failure),
            }
        }
        Ok(computed)
    }
}

/// A session's features and its standing in the cohort, or why it has none.
type Featured = Result<(String, Features, Option<Standing>), ScoringFailure>;

/// Features of a pass's sessions and their cohort, on rayon's pool, off the async runtime.
async fn featurize(
    model: Arc<Model>,
    sessions: Vec<(String, SessionTrace)>,
) -> Result<Vec<Featured>, Stop> {
    on_pool(move || {
        let computed: Vec<Result<(String, Features), ScoringFailure>> = sessions
            .into_par_iter()
            .map(|(reference, trace)| features_of(reference, trace))
            .collect();
        let placed: Vec<&Features> = computed
            .iter()
            .filter_map(|result| result.as_ref().ok().map(|(_, features)| features))
            .collect();
        let mut standings = cohort::standings(&model, &placed).into_iter();
        computed
            .into_iter()
            .map(|result| {
                result.map(|(reference, mut features)| {
                    let standing = standings.next().flatten();
                    features.cohort_alike = standing.map_or(f64::NAN, |s| f64::from(s.alike));
                    (reference, features, standing)
                })
            })
            .collect()
    })
    .await
}

/// Scores from features and standings, on rayon's pool.
async fn score_sessions(
    model: Arc<Model>,
    sessions: Vec<Featured>,
) -> Result<Vec<Result<ScoredSession, ScoringFailure>>, Stop> {
    on_pool(move || {
        sessions
            .into_par_iter()
            .map(|featured| {
                let (reference, features, standing) = featured?;
                let score = cohort::adjust(&model, model.score(&features), standing);
                Ok(ScoredSession {
                    reference,
                    features,
                    score,
                })
            })
            .collect()
    })
    .await
}

async fn on_pool<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Stop> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let _ = sender.send(work());
    });
    receiver
        .await
        .map_err(|_| Stop::Failed(RunError::PoolStopped))
}

fn features_of(
    reference: String,
    mut trace: SessionTrace,
) -> Result<(String, Features), ScoringFailure> {
    if trace.events.is_empty() {
        return Err(ScoringFailure {
            session_id: reference,
            code: Some("no_events".to_owned()),
            message: "none of the session's events are in the lake".to_owned(),
        });
    }
    // A bug in one session's features must not take the run down with it.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        trace.finish();
        features::compute(&trace)
    }));
    match outcome {
        Ok(features) => Ok((reference, features)),
        Err(_) => Err(ScoringFailure {
            session_id: reference,
            code: Some("internal".to_owned()),
            message: "computing the session's features failed".to_owned(),
        }),
    }
}

/// What publishing a run's steps needs, and the step computed but not yet published.
struct Pipeline<'a> {
    run: &'a ScoringRun,
    attempt: &'a str,
    progress: &'a Mutex<RunProgress>,
    on_progress: &'a (dyn Fn(&RunProgress) + Send + Sync),
    pending: Option<Computed>,
}

/// A step's sessions with their features and scores, waiting to be published.
#[derive(Debug)]
pub(super) struct Computed {
    pub(super) scored: Vec<ScoredSession>,
    pub(super) failures: Vec<ScoringFailure>,
    pub(super) sequence: usize,
}

/// Where a run's time went, logged when it completes. Publishing overlaps the next step's
/// features or the next pass's scan, so the phases can add up to more than the run.
#[derive(Debug, Default)]
pub(super) struct Phases {
    flush: Duration,
    plan: Duration,
    scan: Duration,
    features: Duration,
    /// Encoding, uploading and committing the features and scores files, and `record`.
    pub(super) publish: Duration,
    /// The catalog's fenced upsert of the scores (part of `publish`).
    pub(super) record: Duration,
}

#[cfg(test)]
mod tests;
