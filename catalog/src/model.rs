//! Records stored in and returned by the catalog.

use crate::ids::{OrganizationId, RunId, SurveyId, TrackingKey};
use crate::keys::{IntegrationKeySecret, KeyPrefix, Scope};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    pub id: OrganizationId,
    pub name: String,
    pub created_at: i64,
}

/// A key as listed: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    pub prefix: KeyPrefix,
    pub organization_id: OrganizationId,
    pub label: String,
    pub scopes: Vec<Scope>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// A key as a link made with it sees it: revoked or not, its organization deleted or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyStanding {
    pub key: KeyInfo,
    pub organization_deleted: bool,
}

impl KeyStanding {
    /// The key still speaks for its live organization with `scope`.
    pub fn allows(&self, scope: Scope) -> bool {
        self.key.revoked_at.is_none()
            && !self.organization_deleted
            && self.key.scopes.contains(&scope)
    }
}

/// A key just created; `secret` exists only in this value.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    pub secret: IntegrationKeySecret,
    pub info: KeyInfo,
}

/// The result of authenticating a presented key.
#[derive(Debug, Clone)]
pub struct AuthenticatedKey {
    pub key: KeyInfo,
    pub organization_name: String,
    /// The organization was deleted: context answers 404, everything else 401.
    pub organization_deleted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    pub id: SurveyId,
    pub organization_id: OrganizationId,
    pub external_survey_id: String,
    pub name: String,
    pub tracking_key: TrackingKey,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which consumer of a write-ahead log a watermark belongs to. (The lake's position is kept in
/// the `events` table's own Delta log, with the files it covers.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalConsumer {
    /// Session statistics for lookup.
    Stats,
}

impl WalConsumer {
    pub fn as_str(self) -> &'static str {
        match self {
            WalConsumer::Stats => "stats",
        }
    }
}

/// Statistics to add to one browser session (identifier) of a survey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDelta {
    pub survey_id: SurveyId,
    pub identifier: String,
    /// Normalized (lowercase, hyphenated) UUID, when known. A known reference is never replaced
    /// by `None`.
    pub reference: Option<String>,
    /// The reference was named by the embed (`interviewId`), rather than defaulted from a UUID
    /// identifier; only an explicit reference replaces an explicit one.
    pub reference_explicit: bool,
    pub event_count: u64,
    pub first_event_at: i64,
    pub last_event_at: i64,
    /// When the collector received the first and the last of these events' batches (Unix ms):
    /// a run reads only the `events` files whose `received_at` range meets its sessions'.
    pub first_received_at: i64,
    pub last_received_at: i64,
}

/// What lookup reports for one reference.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub reference: String,
    pub event_count: u64,
    pub first_event_at: Option<i64>,
    pub last_event_at: Option<i64>,
    pub score: Option<SessionScore>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionScore {
    pub human_score_percent: f64,
    pub score_band: String,
    pub scored_at: i64,
    pub model_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub id: i64,
    pub survey_id: SurveyId,
    pub reference: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Canceled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Canceled => "canceled",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "running" => Some(RunStatus::Running),
            "completed" => Some(RunStatus::Completed),
            "failed" => Some(RunStatus::Failed),
            "canceled" => Some(RunStatus::Canceled),
            _ => None,
        }
    }
}

/// One session a run could not score; the run still completes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoringFailure {
    /// The session's external reference.
    pub session_id: String,
    pub code: Option<String>,
    pub message: String,
}

/// A scoring run as the catalog holds it. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringRun {
    pub id: RunId,
    pub survey_id: SurveyId,
    pub force: bool,
    pub status: RunStatus,
    pub total: u64,
    pub scored: u64,
    pub skipped: u64,
    pub failed: u64,
    pub failures: Vec<ScoringFailure>,
    /// Sessions left for a later run (their acknowledged events not all in the lake yet), and
    /// why.
    pub deferred: u64,
    pub deferred_reason: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub cancel_requested_at: Option<i64>,
    pub cancel_requested_by: Option<String>,
    pub canceled_at: Option<i64>,
    pub canceled_by: Option<String>,
    /// The worker holding the run, and until when its lease lasts.
    pub owner: Option<String>,
    pub lease_until: Option<i64>,
}

/// Counters a worker reports while a run progresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunProgress {
    pub total: u64,
    pub scored: u64,
    pub skipped: u64,
    pub failed: u64,
    pub failures: Vec<ScoringFailure>,
    /// Sessions left unscored for a later run: some of their acknowledged events were not in
    /// the lake yet (another instance's log holds them).
    pub deferred: u64,
    pub deferred_reason: Option<String>,
}

/// How a worker ends a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Completed,
    Failed {
        error: String,
    },
    /// Stopped after a cancel request; `canceledBy` is whoever asked.
    Canceled,
}

/// What a worker learns when it reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunControl {
    Continue,
    /// A cancel was requested: stop and end the run as canceled.
    CancelRequested,
    /// Another worker holds the run now, or it is no longer running: stop without writing.
    LeaseLost,
}

/// A browser session (identifier) of a survey and the reference it is linked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    pub identifier: String,
    pub reference: Option<String>,
    pub event_count: u64,
    /// When the collector received its first and last batch (Unix ms); `None` for a session
    /// counted before the catalog kept it (migration 0011), until its next batch.
    pub received: Option<(i64, i64)>,
}

/// What a run that is not forced reads to plan: the survey's counts, and the browser sessions
/// of only the references no run has scored. Reading it costs in proportion to the unscored
/// sessions, plus one count over an index of the survey's references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnscoredSessions {
    /// References of the survey that have browser sessions and no tombstone.
    pub references: u64,
    /// Of them, those that have a score.
    pub scored: u64,
    /// Of those, the ones the run itself scored (a resumed run).
    pub scored_by_run: u64,
    /// The browser sessions of the references without a score.
    pub sessions: Vec<SessionIdentity>,
    /// The browser sessions of the references whose acknowledged events grew past the ones
    /// their latest score was computed from (scored again; counted in `scored` above).
    pub grown: Vec<SessionIdentity>,
}

/// A reference that has a score, and the run that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredReference {
    pub reference: String,
    pub run_id: String,
}

/// A score to record as the latest of its session.
#[derive(Debug, Clone, PartialEq)]
pub struct NewScore {
    pub reference: String,
    pub human_score_percent: f64,
    pub score_band: String,
    pub scored_at: i64,
    pub model_version: String,
    pub run_id: RunId,
    /// The session's places in the survey's cohort, which replace the ones it had.
    pub cohort: Vec<CohortPoint>,
    /// The score's reasons, most important first (kept for the survey's review desk).
    pub reasons: Vec<String>,
    /// Where the run found the session in a cluster of its survey: the modality (an index
    /// into the scorer's cohort modalities) and how many sessions were alike with it.
    pub cluster: Option<(u8, u32)>,
    /// The events the score was computed from: a later run that is not forced scores the
    /// session again once its acknowledged events outnumber them.
    pub events: u64,
}

/// Score bins of a survey's desk histogram: `[5k, 5k + 5)` for k in 0..19, and `[95, 100]`.
pub const DESK_HISTOGRAM_BINS: usize = 20;

/// A survey's scored sessions at a glance (its review desk).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeskCounts {
    /// Scored references per band (bands with none are absent), tombstoned ones left out.
    pub bands: Vec<(String, u64)>,
    /// Scored references per score bin ([`DESK_HISTOGRAM_BINS`] bins of 5 points).
    pub histogram: Vec<u64>,
    /// References with captured sessions and no score.
    pub unscored: u64,
}

/// What a survey's clusters are drawn from has changed when any of these has: counts that only
/// grow while the survey lives (runs are kept, tombstones are never removed), so unlike the
/// latest run by start time they cannot be fooled by two instances' clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeskVersion {
    /// Scoring runs started for the survey.
    pub runs: u64,
    /// Of those, runs that ended (completed, failed or canceled).
    pub ended_runs: u64,
    /// References erased (the survey's tombstones).
    pub erased: u64,
}

/// The order of a desk page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeskOrder {
    /// Lowest score first: the sessions to look at first.
    #[default]
    Ascending,
    Descending,
}

/// Which scored references a desk page lists, from where.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeskQuery {
    pub band: Option<String>,
    /// Only these references (a cluster's members).
    pub references: Option<Vec<String>>,
    pub order: DeskOrder,
    /// The last (score, reference) of the previous page.
    pub after: Option<(f64, String)>,
    pub limit: u32,
}

/// One scored reference as the desk lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeskRow {
    pub reference: String,
    pub human_score_percent: f64,
    pub score_band: String,
    pub scored_at: i64,
    pub model_version: String,
    pub reasons: Vec<String>,
    /// The modality it clustered in and how many were alike (see [`NewScore::cluster`]).
    pub cluster: Option<(u8, u32)>,
    pub event_count: u64,
    pub first_event_at: Option<i64>,
    pub last_event_at: Option<i64>,
}

/// A clustered reference's place in the modality it clustered in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusteredPlace {
    pub reference: String,
    pub point: CohortPoint,
}

/// Bins a cohort axis is counted in per (survey, modality, mask): a value `v` (0..=10,000) is in
/// bin `min(v / 100, 99)`.
pub const COHORT_BINS: u16 = 100;

/// A value of a [`CohortPoint`] the session did not measure.
pub const COHORT_UNMEASURED: u16 = u16::MAX;

/// The key of one of a reference's stored places, but the survey and the reference: what
/// `reference_summaries` keeps of them so that they are found without an index by reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CohortCell {
    pub modality: u8,
    pub mask: u32,
    pub cell: i64,
}

/// A scored session's place in one modality of its survey's cohort (the scorer's
/// `cohort::survey` decides what each field means; the catalog keeps and finds them): which
/// features it measured (`mask`), the grid cell it lies in (`cell`, what a probe asks for), and
/// its percentiles among people in 1/10,000ths, one per feature of the modality
/// ([`COHORT_UNMEASURED`] where it measured none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohortPoint {
    pub modality: u8,
    pub mask: u32,
    pub cell: i64,
    pub values: Vec<u16>,
}

impl CohortPoint {
    /// The values as stored: two bytes each, little-endian.
    pub fn encode_values(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    pub fn decode_values(bytes: &[u8]) -> Vec<u16> {
        bytes
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect()
    }

    /// The (axis, bin) of each measured value.
    pub fn bins(&self) -> impl Iterator<Item = (u8, u16)> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != COHORT_UNMEASURED)
            .map(|(axis, v)| (axis as u8, (*v / 100).min(COHORT_BINS - 1)))
    }
}

/// The points of one (modality, mask) whose cell is in `cells` (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CohortProbe {
    pub modality: u8,
    pub mask: u32,
    pub cells: (i64, i64),
}

/// A stored point and the reference whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCohortPoint {
    pub reference: String,
    pub point: CohortPoint,
}

/// How many of a survey's scored sessions of one (modality, mask) have a value in `bin` of
/// `axis`: the survey's spread, kept with the points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CohortBin {
    pub modality: u8,
    pub mask: u32,
    pub axis: u8,
    pub bin: u16,
    pub sessions: i64,
}

/// What moves in the bins when `removed` points go and `added` ones come: one row per
/// (modality, mask, axis, bin) whose count changes, with the change.
pub(crate) fn cohort_bin_deltas(removed: &[CohortPoint], added: &[CohortPoint]) -> Vec<CohortBin> {
    let mut deltas: std::collections::BTreeMap<(u8, u32, u8, u16), i64> = Default::default();
    for (points, sign) in [(removed, -1), (added, 1)] {
        for point in points {
            for (axis, bin) in point.bins() {
                *deltas
                    .entry((point.modality, point.mask, axis, bin))
                    .or_default() += sign;
            }
        }
    }
    deltas
        .into_iter()
        .filter(|(_, delta)| *delta != 0)
        .map(|((modality, mask, axis, bin), sessions)| CohortBin {
            modality,
            mask,
            axis,
            bin,
            sessions,
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionStatus {
    Pending,
    Completed,
    Failed,
}

impl DeletionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionStatus::Pending => "pending",
            DeletionStatus::Completed => "completed",
            DeletionStatus::Failed => "failed",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "pending" => Some(DeletionStatus::Pending),
            "completed" => Some(DeletionStatus::Completed),
            "failed" => Some(DeletionStatus::Failed),
            _ => None,
        }
    }
}

/// A request to erase one session (reference) of a survey. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDeletion {
    pub survey_id: SurveyId,
    pub reference: String,
    pub status: DeletionStatus,
    /// Erasure attempts made so far (failed ones, plus the one that completed).
    pub attempts: u32,
    pub requested_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub error: Option<String>,
    /// A pending deletion is not tried again before this time (the retry backoff).
    pub next_attempt_at: i64,
    /// The worker holding the deletion, and until when its lease lasts.
    pub owner: Option<String>,
    pub lease_until: Option<i64>,
    /// What a pending deletion waits for (`instance <id>`, `run <id>`), and why, as its last
    /// attempt saw it; cleared when an attempt fails or completes.
    pub waiting_on: Option<String>,
    pub wait_reason: Option<String>,
}

/// How an erasure attempt that did not complete ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionSetback {
    /// The attempt failed: it counts, and after `max_attempts` the deletion is `failed`.
    Failed {
        error: String,
        retry_at: i64,
        max_attempts: u32,
    },
    /// The attempt could not go on (a scoring run is writing the survey's scores, an instance
    /// has not purged its log, a concurrent rewrite replaced a file first): try again at
    /// `retry_at`, not counted. `waiting_on` names what it waits for (`instance <id>`,
    /// `run <id>`), and `reason` says why; both are shown on the deletion.
    Deferred {
        retry_at: i64,
        waiting_on: Option<String>,
        reason: String,
    },
}

/// A tombstoned browser-session identifier, as `sha256("survey_id:identifier")` in hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TombstonedIdentifier {
    pub id: i64,
    pub survey_id: SurveyId,
    pub identifier_sha256: String,
}

/// What a session's erasure removes from the catalog (see [`Deletions::erase_session_rows`](crate::Deletions::erase_session_rows)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionErasure {
    pub survey_id: SurveyId,
    pub reference: String,
    /// Every identifier linked to the reference (their `sessions` rows are deleted).
    pub identifiers: Vec<String>,
    /// Their tombstone entries, `sha256("survey_id:identifier")` in hex.
    pub identifier_hashes: Vec<String>,
}

/// How a tombstone names a browser-session identifier: `sha256("survey_id:identifier")` in hex.
pub fn identifier_tombstone_hash(survey: &SurveyId, identifier: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(survey.as_str().as_bytes());
    hasher.update(b":");
    hasher.update(identifier.as_bytes());
    hex::encode(hasher.finalize())
}

/// The answer to one integration API request under a per-key limit counted in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiAdmission {
    Accepted,
    /// Refused; a request would be accepted again after `wait_ms` milliseconds.
    Refused {
        wait_ms: i64,
    },
}

/// The answer to a compaction claim ([`crate::Fleet::claim_compaction`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionClaim {
    Claimed,
    /// Another worker holds the partition, until its lease lapses or it releases it.
    HeldBy(String),
}
