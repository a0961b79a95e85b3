//! A run's work once claimed: make events visible, plan, then scan pass by pass and score
//! step by step, each step's publishing overlapping the next step's computing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use catalog::{CohortPoint, RunProgress, ScoringFailure, ScoringRun, StoredCohortPoint};
use lake::TableKind;
use parking_lot::Mutex;
use rayon::prelude::*;

use super::plan::{EventsFile, PlannedSession, pass_files, passes_of, rescored};
use super::{RunError, Scorer, Stop};
use crate::cohort::survey::{Cohort, Entrant, People, Placer};
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
        let credited = self.remove_unpublished(run).await?;
        let mut phases = Phases::default();
        let started = std::time::Instant::now();
        if let Some(flusher) = &self.flusher {
            flusher
                .make_visible()
                .await
                .map_err(|error| Stop::Failed(RunError::Flush(error)))?;
        }
        // Then the rest of the fleet: what the other instances acknowledged (horizon.rs).
        let silent = self.flush_fleet().await?;
        let waiting_on = self.may_still_deliver(&silent).await?;
        phases.flush = started.elapsed();
        let planning = std::time::Instant::now();
        let mut plan = self.plan(run).await?;
        // A resumed run does not score again what it published before (it counts as done). Each
        // such session the plan counted as one to score again, not as skipped: it is neither.
        let planned = plan.sessions.len();
        plan.sessions
            .retain(|session| !(session.scored_before && credited.contains(&session.reference)));
        plan.skipped += (planned - plan.sessions.len()) as u64;
        phases.plan = planning.elapsed();
        {
            let mut p = progress.lock();
            *p = RunProgress {
                total: plan.total,
                scored: plan.already_scored,
                skipped: plan.skipped,
                ..RunProgress::default()
            };
        }
        self.report(run, progress, on_progress).await?;
        if plan.sessions.is_empty() {
            return Ok(());
        }

        let files: Vec<EventsFile> = self
            .lake
            .table(TableKind::Events)
            .live_files(Some(run.survey_id.as_str()))
            .await?
            .into_iter()
            .map(|file| EventsFile {
                path: file.path,
                received: file.received,
            })
            .collect();
        phases.files_live = files.len();
        // Names this attempt's files apart from a crashed attempt's leftovers.
        let attempt = &catalog::ids::random_hex24()[..6];
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
        // The survey's cohort as earlier runs left it: its spread now, its places probed pass
        // by pass.
        let bins = self.catalog.cohort_bins(&run.survey_id).await?;
        let mut cohort = Cohort::new(&bins).with_people(People::new(&self.model));
        let mut rescore: BTreeSet<String> = BTreeSet::new();
        let mut deferred = HashSet::new();
        let mut passes = Passes {
            waiting_on: &waiting_on,
            deferred: &mut deferred,
            short: HashMap::new(),
            files: &files,
            sequence: 0,
            cohort: &mut cohort,
            rescore: &mut rescore,
            // A survey with no bins has no stored places: any the catalog holds later are this
            // run's own, which a pass does not compare with (a first run asked an empty table
            // for the 27 ranges around each of its places).
            probe: !bins.is_empty(),
        };
        for pass in plan.passes(self.settings.max_events_per_pass) {
            self.score_pass(run, &pass, &mut passes, &mut pipeline, &mut phases)
                .await?;
        }
        // Sessions scored by earlier runs whose cluster grew with this run's sessions: scored
        // again, from their events, and counted as scored rather than skipped. (Those an
        // earlier attempt of this run scored are counted as done already.)
        let again_references: Vec<String> = std::mem::take(&mut *passes.rescore)
            .into_iter()
            .filter(|reference| {
                !passes.cohort.in_run(reference)
                    && !credited.contains(reference)
                    && !passes.deferred.contains(reference)
            })
            .collect();
        let again = if again_references.is_empty() {
            Vec::new()
        } else {
            rescored(
                self.catalog
                    .reference_sessions(&run.survey_id, &again_references)
                    .await?,
            )
        };
        if !again.is_empty() {
            {
                let mut p = progress.lock();
                p.skipped = p.skipped.saturating_sub(again.len() as u64);
            }
            tracing::info!(run = %run.id, sessions = again.len(), "re-scoring sessions whose cohort cluster grew");
            for pass in passes_of(&again, self.settings.max_events_per_pass) {
                self.score_pass(run, &pass, &mut passes, &mut pipeline, &mut phases)
                    .await?;
            }
            // Re-scoring names no one new to re-score: the run's sessions saw each other.
            passes.rescore.clear();
        }
        let nothing = async { Ok::<(), Stop>(()) };
        self.overlapped(&mut pipeline, &mut phases, nothing).await?;
        if !passes.short.is_empty() {
            tracing::warn!(
                run = %run.id,
                sessions = passes.short.len(),
                "sessions scored on fewer events than the catalog counted for them, with no \
                 instance left that could still deliver the rest"
            );
        }
        tracing::info!(
            run = %run.id,
            sessions = plan.sessions.len(),
            rescored = again.len(),
            flush_ms = phases.flush.as_millis() as u64,
            plan_ms = phases.plan.as_millis() as u64,
            files_live = phases.files_live,
            files_scanned = phases.files_scanned,
            scan_ms = phases.scan.as_millis() as u64,
            features_ms = phases.features.as_millis() as u64,
            publish_ms = phases.publish.as_millis() as u64,
            record_ms = phases.record.as_millis() as u64,
            "scoring run phases"
        );
        Ok(())
    }

    /// Scans one pass's sessions, computes their features, stands them in the survey's cohort
    /// and scores them step by step (each step published while the next is computed).
    async fn score_pass(
        &self,
        run: &ScoringRun,
        pass: &[&PlannedSession],
        passes: &mut Passes<'_>,
        pipeline: &mut Pipeline<'_>,
        phases: &mut Phases,
    ) -> Result<(), Stop> {
        let mut session_of_identifier = HashMap::new();
        for (index, session) in pass.iter().enumerate() {
            for identifier in &session.identifiers {
                session_of_identifier.insert(identifier.clone(), index as u32);
            }
        }
        // Only the files whose `received_at` range meets the pass's sessions' (a run of new
        // sessions reads the files written since they arrived). Rows of sessions outside the
        // pass are dropped while routing. A `session_id IN` filter in the scan would only pay
        // off where row-group statistics can prune, that is on files sorted by session across
        // the survey (compaction); flush files each hold a slice of time of every session, so
        // the scan reads them whole.
        let files = pass_files(passes.files, pass);
        phases.files_scanned += files.len();
        let target = ScanTarget {
            session_of_identifier: Arc::new(session_of_identifier),
            sessions: pass.len(),
        };
        let scan = async {
            scan_traces(&self.query, &files, &target)
                .await
                .map_err(Stop::from)
        };
        let (traces, scanning) = self.overlapped(pipeline, phases, scan).await?;
        phases.scan += scanning;
        // A session whose scan found fewer events than the fleet acknowledged for it (the rest
        // still in another instance's log) is deferred to a later run, never scored on part,
        // while some instance could still deliver the rest (horizon.rs).
        let mut work: Vec<(String, bool, SessionTrace)> = Vec::with_capacity(pass.len());
        let mut deferred = 0u64;
        for (session, trace) in pass.iter().zip(traces) {
            if (trace.events.len() as u64) < session.events {
                if !passes.waiting_on.is_empty() {
                    deferred += 1;
                    passes.deferred.insert(session.reference.clone());
                    continue;
                }
                passes
                    .short
                    .insert(session.reference.clone(), session.events);
            }
            work.push((session.reference.clone(), session.scored_before, trace));
        }
        if deferred > 0 {
            let mut p = pipeline.progress.lock();
            p.deferred += deferred;
            p.deferred_reason = Some(super::horizon::deferred_reason(
                p.deferred,
                passes.waiting_on,
            ));
        }
        // The pass's features and places first, then its standing in the survey's cohort (the
        // stored places around its sessions, and this run's), before any of its scores: a
        // score needs its cohort.
        let cohort = std::mem::take(&mut *passes.cohort);
        let probe = passes.probe;
        let featurize = async {
            let computed = featurize(self.model.clone(), work).await?;
            let stored = if probe {
                let probes = cohort.probes(
                    computed
                        .iter()
                        .filter_map(|result| result.as_ref().ok())
                        .flat_map(|session| &session.places),
                );
                self.catalog.probe_cohort(&run.survey_id, &probes).await?
            } else {
                Vec::new()
            };
            stand(cohort, computed, stored).await
        };
        let ((cohort, mut featured, rescore), computing) =
            self.overlapped(pipeline, phases, featurize).await?;
        *passes.cohort = cohort;
        passes.rescore.extend(rescore);
        phases.features += computing;
        while !featured.is_empty() {
            let rest = featured.split_off(featured.len().min(self.settings.chunk_sessions));
            let chunk = std::mem::replace(&mut featured, rest);
            passes.sequence += 1;
            let compute = self.compute(chunk, passes.sequence);
            let (mut computed, computing) = self.overlapped(pipeline, phases, compute).await?;
            computed.counted = computed
                .scored
                .iter()
                .filter_map(|session| {
                    let counted = passes.short.get(&session.reference)?;
                    Some((session.reference.clone(), *counted))
                })
                .collect();
            phases.features += computing;
            pipeline.pending = Some(computed);
        }
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
            counted: HashMap::new(),
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

/// A session's features, its standing in the cohort and its places, or why it has none.
type Featured = Result<(String, Features, Option<Standing>, Vec<CohortPoint>), ScoringFailure>;

/// A session's features and places in the cohort, not yet stood.
struct Placed {
    reference: String,
    counted: bool,
    features: Features,
    places: Vec<CohortPoint>,
}

/// Features and places of a pass's sessions, on rayon's pool, off the async runtime.
async fn featurize(
    model: Arc<Model>,
    sessions: Vec<(String, bool, SessionTrace)>,
) -> Result<Vec<Result<Placed, ScoringFailure>>, Stop> {
    on_pool(move || {
        let placer = Placer::new(&model);
        sessions
            .into_par_iter()
            .map(|(reference, counted, trace)| {
                features_of(reference, trace).map(|(reference, features)| Placed {
                    places: placer.places(&features),
                    reference,
                    counted,
                    features,
                })
            })
            .collect()
    })
    .await
}

/// Stands a pass's sessions in the cohort (given the stored places its probes found), on
/// rayon's pool; hands the cohort back with the sessions and the stored ones to re-score.
async fn stand(
    mut cohort: Cohort,
    computed: Vec<Result<Placed, ScoringFailure>>,
    stored: Vec<StoredCohortPoint>,
) -> Result<(Cohort, Vec<Featured>, Vec<String>), Stop> {
    on_pool(move || {
        let entrants: Vec<Entrant> = computed
            .iter()
            .filter_map(|result| result.as_ref().ok())
            .map(|session| Entrant {
                reference: session.reference.clone(),
                places: session.places.clone(),
                counted: session.counted,
            })
            .collect();
        let stood = cohort.stand(&entrants, &stored);
        let mut standings = stood.standings.into_iter();
        let featured = computed
            .into_iter()
            .map(|result| {
                result.map(|mut session| {
                    let standing = standings.next().flatten();
                    session.features.cohort_alike =
                        standing.map_or(f64::NAN, |s| f64::from(s.alike));
                    (
                        session.reference,
                        session.features,
                        standing,
                        session.places,
                    )
                })
            })
            .collect();
        (cohort, featured, stood.rescore)
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
                let (reference, features, standing, places) = featured?;
                let cluster = standing
                    .filter(Standing::clustered)
                    .map(|s| (s.modality as u8, s.cluster_alike()));
                let score = cohort::adjust(&model, model.score(&features), standing);
                Ok(ScoredSession {
                    reference,
                    features,
                    score,
                    cohort: places,
                    cluster,
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

/// What a run's passes share: the survey's files, the steps' numbering, the cohort and the
/// stored sessions to score again.
struct Passes<'a> {
    /// Instances whose logs may still hold acknowledged events (horizon.rs): while there is
    /// one, a session the lake holds in part is deferred.
    waiting_on: &'a [String],
    /// The sessions deferred so far: none is scored again as a grown cluster's member.
    deferred: &'a mut HashSet<String>,
    /// Sessions scored on fewer events than counted, with no one left to deliver the rest, and
    /// the count: their scores record it as the events they cover, so that no later run that
    /// is not forced plans them again for the events that never come.
    short: HashMap<String, u64>,
    files: &'a [EventsFile],
    sequence: usize,
    cohort: &'a mut Cohort,
    rescore: &'a mut BTreeSet<String>,
    /// Whether the survey had stored places when the run began (else none are probed for).
    probe: bool,
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
    /// Sessions scored on fewer events than the catalog counted (no one left to deliver the
    /// rest), with that count: what their scores record as covered.
    pub(super) counted: HashMap<String, u64>,
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
    /// `events` files scanned, summed over passes, and the survey's live ones.
    files_scanned: usize,
    files_live: usize,
}

#[cfg(test)]
mod tests;
