//! A run's work once claimed: make events visible, plan, then scan pass by pass and score
//! step by step, each step's publishing overlapping the next step's computing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use catalog::{RunProgress, ScoringFailure, ScoringRun};
use lake::TableKind;
use parking_lot::Mutex;
use rayon::prelude::*;

use super::plan::PlannedSession;
use super::{RunError, Scorer, Stop};
use crate::features;
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
            let mut work: Vec<(&PlannedSession, SessionTrace)> =
                pass.iter().copied().zip(traces).collect();
            while !work.is_empty() {
                let rest = work.split_off(work.len().min(self.settings.chunk_sessions));
                let chunk = std::mem::replace(&mut work, rest);
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

    /// Features and scores of one step's sessions.
    async fn compute(
        &self,
        chunk: Vec<(&PlannedSession, SessionTrace)>,
        sequence: usize,
    ) -> Result<Computed, Stop> {
        let owned: Vec<(String, SessionTrace)> = chunk
            .into_iter()
            .map(|(session, trace)| (session.reference.clone(), trace))
            .collect();
        let results = score_sessions(self.model.clone(), owned).await?;
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

/// Computes features and scores on rayon's pool, off the async runtime.
async fn score_sessions(
    model: Arc<Model>,
    sessions: Vec<(String, SessionTrace)>,
) -> Result<Vec<Result<ScoredSession, ScoringFailure>>, Stop> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let results: Vec<_> = sessions
            .into_par_iter()
            .map(|(reference, trace)| score_one(&model, reference, trace))
            .collect();
        let _ = sender.send(results);
    });
    receiver
        .await
        .map_err(|_| Stop::Failed(RunError::PoolStopped))
}

fn score_one(
    model: &Model,
    reference: String,
    mut trace: SessionTrace,
) -> Result<ScoredSession, ScoringFailure> {
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
        let features = features::compute(&trace);
        let score = model.score(&features);
        (features, score)
    }));
    match outcome {
        Ok((features, score)) => Ok(ScoredSession {
            reference,
            features,
            score,
        }),
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
