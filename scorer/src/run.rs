//! Executing scoring runs: claim, make events visible, plan, scan, score, publish, report.
//!
//! A worker (a server instance or `telltale score`) owns a run through a lease in the catalog
//! and renews it while it works; every write it makes is fenced by that ownership, so two
//! workers never both publish for one run. A run whose worker died is claimed again (by the
//! same instance on restart at once, by any other once the lease expires) and resumed:
//! sessions the run already scored count as scored and are not scored again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use catalog::{
    Catalog, NewScore, RunControl, RunId, RunOutcome, RunProgress, ScoringFailure, ScoringRun,
    SurveyId,
};
use futures::TryStreamExt;
use lake::{Lake, NewFile, TableKind};
use parking_lot::Mutex;
use query::LakeQuery;
use rayon::prelude::*;

use crate::features;
use crate::model::Model;
use crate::scan::{ScanTarget, scan_traces};
use crate::tables::{ScoredSession, features_batch, scores_batch};
use crate::trace::SessionTrace;
use lake::tables;

/// Tuning of the scoring worker.
#[derive(Debug, Clone)]
pub struct ScoringSettings {
    /// Sessions scored and published per step; counters move after each step. A step costs a
    /// Delta commit to each results table and a catalog transaction besides its sessions'
    /// work, so steps are large: at 5,000 small sessions the commits took longer than the
    /// scoring (benches/README.md, scoring_run).
    pub chunk_sessions: usize,
    /// Most events held in memory at once: a larger survey is scanned in several passes over
    /// ranges of its sessions.
    pub max_events_per_pass: u64,
    /// Pause between steps, so a run can be throttled (and observed mid-way in tests).
    pub pause_between_chunks: Duration,
    /// How long a worker's claim on a run lasts without renewal.
    pub lease: Duration,
}

impl Default for ScoringSettings {
    fn default() -> Self {
        ScoringSettings {
            chunk_sessions: 50_000,
            max_events_per_pass: 12_000_000,
            pause_between_chunks: Duration::ZERO,
            lease: Duration::from_secs(30),
        }
    }
}

/// What holds acknowledged events that may not be in the lake yet (a server's collection
/// pipeline): a run asks it to commit them before it plans. The scorer knows nothing else of
/// collection.
#[async_trait::async_trait]
pub trait Flusher: Send + Sync {
    /// Returns once every event acknowledged before the call is in a committed lake file.
    async fn make_visible(&self) -> Result<(), String>;
}

/// Everything a run needs.
#[derive(Clone)]
pub struct Scorer {
    pub catalog: Arc<dyn Catalog>,
    pub lake: Lake,
    pub query: LakeQuery,
    pub model: Arc<Model>,
    /// The instance's collection pipeline, flushed before a run so it scores everything
    /// acknowledged before it started. `None` for `telltale score` (see its help).
    pub flusher: Option<Arc<dyn Flusher>>,
    pub settings: ScoringSettings,
    /// This worker's name in run leases.
    pub owner: String,
}

impl std::fmt::Debug for Scorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scorer")
            .field("owner", &self.owner)
            .field("model", &self.model.version)
            .finish_non_exhaustive()
    }
}

/// Why a run stopped before completing.
#[derive(Debug)]
enum Stop {
    Canceled,
    LeaseLost,
    Failed(String),
}

impl<E: std::fmt::Display> From<E> for Stop {
    fn from(error: E) -> Self {
        Stop::Failed(error.to_string())
    }
}

/// How a claimed run ended for this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Finished,
    /// Another worker holds the run now; it carries on there.
    Abandoned,
}

impl Scorer {
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.settings.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Claims `run` and works it to its end. `on_progress` sees every counter update.
    pub async fn execute(
        &self,
        run: &RunId,
        on_progress: &(dyn Fn(&RunProgress) + Send + Sync),
    ) -> Result<RunEnd, catalog::Error> {
        let Some(claimed) = self
            .catalog
            .claim_scoring_run(run, &self.owner, self.lease_ms())
            .await?
        else {
            return Ok(RunEnd::Abandoned);
        };
        let started = std::time::Instant::now();
        let progress = Arc::new(Mutex::new(RunProgress::default()));
        let heartbeat = self.spawn_heartbeat(claimed.id.clone(), progress.clone());
        let outcome = self.work(&claimed, &progress, on_progress).await;
        heartbeat.abort();
        let final_progress = progress.lock().clone();
        let outcome = match outcome {
            Ok(()) => RunOutcome::Completed,
            Err(Stop::Canceled) => RunOutcome::Canceled,
            Err(Stop::Failed(error)) => {
                tracing::warn!(run = %claimed.id, %error, "scoring run failed");
                RunOutcome::Failed { error }
            }
            Err(Stop::LeaseLost) => return Ok(RunEnd::Abandoned),
        };
        let finished = self
            .catalog
            .finish_scoring_run(&claimed.id, &self.owner, &final_progress, &outcome)
            .await?;
        if finished {
            let status = match outcome {
                RunOutcome::Completed => "completed",
                RunOutcome::Canceled => "canceled",
                RunOutcome::Failed { .. } => "failed",
            };
            metrics::counter!("telltale_scoring_runs_total", "status" => status).increment(1);
            metrics::histogram!("telltale_scoring_run_seconds", "status" => status)
                .record(started.elapsed());
            metrics::counter!("telltale_scoring_sessions_total", "outcome" => "scored")
                .increment(final_progress.scored);
            metrics::counter!("telltale_scoring_sessions_total", "outcome" => "failed")
                .increment(final_progress.failed);
        }
        Ok(if finished {
            RunEnd::Finished
        } else {
            RunEnd::Abandoned
        })
    }

    /// Renews the lease while a long step (a scan) reports nothing.
    fn spawn_heartbeat(
        &self,
        run: RunId,
        progress: Arc<Mutex<RunProgress>>,
    ) -> tokio::task::JoinHandle<()> {
        let scorer = self.clone();
        tokio::spawn(async move {
            let period = scorer.settings.lease / 3;
            loop {
                tokio::time::sleep(period).await;
                let current = progress.lock().clone();
                if let Err(error) = scorer
                    .catalog
                    .report_run_progress(&run, &scorer.owner, scorer.lease_ms(), &current)
                    .await
                {
                    tracing::warn!(%run, %error, "could not renew the run's lease");
                }
            }
        })
    }

    async fn report(
        &self,
        run: &ScoringRun,
        progress: &Mutex<RunProgress>,
        on_progress: &(dyn Fn(&RunProgress) + Send + Sync),
    ) -> Result<(), Stop> {
        let current = progress.lock().clone();
        on_progress(&current);
        match self
            .catalog
            .report_run_progress(&run.id, &self.owner, self.lease_ms(), &current)
            .await?
        {
            RunControl::Continue => Ok(()),
            RunControl::CancelRequested => Err(Stop::Canceled),
            RunControl::LeaseLost => Err(Stop::LeaseLost),
        }
    }

    async fn work(
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
                .map_err(|error| Stop::Failed(format!("could not flush the event log: {error}")))?;
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

    /// Takes back what an earlier attempt at this run wrote to the lake but never recorded in
    /// the catalog (it died, or lost its lease, between the two): files it committed whose
    /// sessions the catalog does not credit to this run are removed from the tables, and
    /// uploads no commit names are deleted. Lookup and the lake then agree on what the run
    /// published. That attempt has lost the run, and could no longer record anything.
    async fn remove_unpublished(&self, run: &ScoringRun) -> Result<(), Stop> {
        let credited: HashSet<String> = self
            .catalog
            .scored_references(&run.survey_id)
            .await?
            .into_iter()
            .filter(|scored| scored.run_id == run.id.as_str())
            .map(|scored| scored.reference)
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
                let removed = table
                    .commit(lake::Change::Erase, &[], &unrecorded, None)
                    .await?;
                if !matches!(removed, lake::Committed::Version(_)) {
                    return Err(Stop::Failed(
                        "the files of an earlier attempt changed while they were removed"
                            .to_owned(),
                    ));
                }
            }
            let folder = tables::results_folder(kind, run.survey_id.as_str());
            let prefix = object_store::path::Path::from(folder.as_str());
            let objects: Vec<object_store::ObjectMeta> =
                self.lake.store().list(Some(&prefix)).try_collect().await?;
            let live: HashSet<String> = live.into_iter().collect();
            for object in objects {
                let path = object.location.to_string();
                if path.starts_with(&ours) && (!live.contains(&path) || unrecorded.contains(&path))
                {
                    tracing::info!(path, "removing an unpublished scoring file");
                    self.lake.delete(&path).await?;
                }
            }
        }
        Ok(())
    }

    /// Which sessions the run scores, and how many it counts as skipped or already done.
    async fn plan(&self, run: &ScoringRun) -> Result<Plan, Stop> {
        let identities = self.catalog.survey_sessions(&run.survey_id).await?;
        let mut by_reference: BTreeMap<String, PlannedSession> = BTreeMap::new();
        for identity in identities {
            let Some(reference) = identity.reference else {
                // Without a reference nobody can look the session up; it is not scored.
                continue;
            };
            let entry = by_reference
                .entry(reference.clone())
                .or_insert_with(|| PlannedSession {
                    reference,
                    identifiers: Vec::new(),
                    events: 0,
                });
            entry.identifiers.push(identity.identifier);
            entry.events += identity.event_count;
        }
        let scored: HashMap<String, String> = self
            .catalog
            .scored_references(&run.survey_id)
            .await?
            .into_iter()
            .map(|s| (s.reference, s.run_id))
            .collect();
        let mut plan = Plan {
            total: by_reference.len() as u64,
            ..Plan::default()
        };
        for (reference, session) in by_reference {
            match scored.get(&reference) {
                Some(run_id) if run_id == run.id.as_str() => plan.already_scored += 1,
                Some(_) if !run.force => plan.skipped += 1,
                _ => plan.sessions.push(session),
            }
        }
        Ok(plan)
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

    /// Writes one step's results to the lake and records them in the catalog, then moves the
    /// counters.
    async fn publish(
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
                let file = NewFile {
                    path: tables::results_file_path(kind, survey, run_id, attempt, sequence),
                    survey_id: survey.to_owned(),
                    date: None,
                    size: bytes.len() as u64,
                    rows,
                    received: None,
                };
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
        let new_scores: Vec<NewScore> = scored
            .iter()
            .map(|session| NewScore {
                reference: session.reference.clone(),
                human_score_percent: session.score.human_score_percent,
                score_band: session.score.band.to_owned(),
                scored_at: now,
                model_version: self.model.version.clone(),
                run_id: run.id.clone(),
            })
            .collect();
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
        .map_err(|_| Stop::Failed("the scoring pool stopped".to_owned()))
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
struct Computed {
    scored: Vec<ScoredSession>,
    failures: Vec<ScoringFailure>,
    sequence: usize,
}

/// Where a run's time went, logged when it completes. Publishing overlaps the next step's
/// features or the next pass's scan, so the phases can add up to more than the run.
#[derive(Debug, Default)]
struct Phases {
    flush: Duration,
    plan: Duration,
    scan: Duration,
    features: Duration,
    /// Encoding, uploading and committing the features and scores files, and `record`.
    publish: Duration,
    /// The catalog's fenced upsert of the scores (part of `publish`).
    record: Duration,
}

#[derive(Debug, Clone)]
struct PlannedSession {
    reference: String,
    identifiers: Vec<String>,
    events: u64,
}

#[derive(Debug, Default)]
struct Plan {
    total: u64,
    already_scored: u64,
    skipped: u64,
    sessions: Vec<PlannedSession>,
}

impl Plan {
    /// Splits the sessions to score into passes of at most `max_events` events each (a session
    /// larger than that gets a pass of its own).
    fn passes(&self, max_events: u64) -> Vec<Vec<&PlannedSession>> {
        let mut passes = Vec::new();
        let mut current = Vec::new();
        let mut events = 0u64;
        for session in &self.sessions {
            if !current.is_empty() && events + session.events > max_events {
                passes.push(std::mem::take(&mut current));
                events = 0;
            }
            events += session.events;
            current.push(session);
        }
        if !current.is_empty() {
            passes.push(current);
        }
        passes
    }
}

/// Runs scoring in the background for a server: starts runs, and claims runs left by crashed
/// or stalled workers.
#[derive(Debug, Clone)]
pub struct ScoringService {
    scorer: Scorer,
    active: Arc<Mutex<HashSet<RunId>>>,
}

impl ScoringService {
    pub fn new(scorer: Scorer) -> ScoringService {
        ScoringService {
            scorer,
            active: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Works `run` in the background unless this instance already does.
    pub fn spawn(&self, run: RunId) {
        if !self.active.lock().insert(run.clone()) {
            return;
        }
        let service = self.clone();
        tokio::spawn(async move {
            match service.scorer.execute(&run, &|_| {}).await {
                Ok(end) => {
                    tracing::info!(%run, ?end, "scoring run ended");
                    // The run's scores are fresh in the catalog's log; fold them in so that
                    // lookups read them directly. Best effort: a busy moment skips it.
                    match service.scorer.catalog.checkpoint().await {
                        Ok(true) => {}
                        Ok(false) => tracing::debug!("catalog busy; checkpoint skipped"),
                        Err(error) => tracing::warn!(%error, "catalog checkpoint failed"),
                    }
                }
                Err(error) => {
                    tracing::error!(%run, %error, "scoring run stopped on a catalog error; it will be resumed")
                }
            }
            service.active.lock().remove(&run);
        });
    }

    /// Claims every run that has no live worker: this instance's runs after a restart at once,
    /// other workers' once their lease has expired.
    pub async fn resume_claimable(&self) -> Result<usize, catalog::Error> {
        let runs = self
            .scorer
            .catalog
            .claimable_scoring_runs(&self.scorer.owner)
            .await?;
        let mut resumed = 0;
        for run in runs {
            if !self.active.lock().contains(&run.id) {
                tracing::info!(run = %run.id, survey = %run.survey_id, "resuming scoring run");
                self.spawn(run.id);
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Resumes claimable runs now and then every `period`, until the task is dropped.
    pub fn spawn_janitor(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = service.resume_claimable().await {
                    tracing::warn!(%error, "could not look for scoring runs to resume");
                }
                tokio::time::sleep(period).await;
            }
        })
    }

    /// Starts a run for `survey` (or returns the active one) and works it here.
    pub async fn start(
        &self,
        survey: &SurveyId,
        force: bool,
    ) -> Result<ScoringRun, catalog::Error> {
        let (run, created) = self.scorer.catalog.start_scoring_run(survey, force).await?;
        if created {
            self.spawn(run.id.clone());
        }
        Ok(run)
    }

    pub fn scorer(&self) -> &Scorer {
        &self.scorer
    }
}
