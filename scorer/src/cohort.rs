//! The survey's cohort: how many of a survey's scored sessions behave alike, against how many
//! would among people.
//!
//! One generator with one set of settings, driven on one machine, makes sessions that resemble
//! each other far more than different people's do: a session's medians average over many
//! movements and keys drawn from the generator's distribution, so a farm's sessions land close
//! together, while each person keeps a style of their own (and the same person twice does not
//! repeat either). A scoring run compares its sessions with every session the survey has
//! scored (kept in the catalog across runs), so it can count, for each session, the others that
//! are its near-duplicates, however a farm's sessions are spread over runs.
//!
//! - **Behaviour space, modality by modality.** Each session is placed by [`COHORT_FEATURES`],
//!   each as its percentile among the TRAIN people (the model file's `human_ranges`), so that
//!   every axis spreads people evenly and no unit dominates, and compared in each of
//!   [`MODALITIES`] (pointing, typing, touch) apart: a farm alike in one modality is found when
//!   another varies. Two sessions are **alike** in a modality when they measured the same of its
//!   features (at least its `min_measured`) and lie within [`RADIUS`] of each other on every one.
//! - **Expected by chance, twice.** From the survey itself: the share of its sessions within
//!   [`RADIUS`] on each axis alone, multiplied across axes (the axes taken as independent: what
//!   a set of unrelated people looks like). And from the people: a person's percentile is
//!   uniform on every axis, so the share within [`RADIUS`] is the window's width; a farm that is
//!   most of a survey sets the survey's spread itself, never the people's. A farm's sessions
//!   agree on every axis at once, far beyond either product.
//! - **The finding.** A session with at least [`MIN_ALIKE`] alike and at least [`SURPRISE`]
//!   times the survey's expected count (or [`REFERENCE_MARGIN`] times more than that against the
//!   people's) is in a cluster. The score then loses [`PENALTY`] log-odds with a named reason
//!   (`41 sessions in this survey move alike (pointing)`) and, for a cluster of fewer than
//!   [`LARGE_CLUSTER`] sessions, goes no lower than `review` on that account alone.
//! - **The people test** (models that carry a `cohort_reference`, from telltale-v7). A tool
//!   that draws each session's style afresh (ghost-cursor's timing, a Perlin path's bend) makes
//!   a farm tight on most axes and spread over one or two, which "alike on every axis" misses,
//!   and the independent product above is far from what people do (their behaviours correlate,
//!   hence its margin of 1000). So a second count: sessions within [`PEOPLE_RADIUS`] on every
//!   feature but at most the modality's `people_skip`, against how many of the TRAIN people in
//!   the model file are alike with the session in that same way (+1 smoothed, as a share of the
//!   people placed in the modality, times the survey's placed sessions). At least
//!   [`MIN_ALIKE`] alike and [`PEOPLE_SURPRISE`] times that expectation is a cluster too. Chosen
//!   on the corpus's TRAIN farms and people (`lab/cohort_rule.py`, docs/scoring.md). With a
//!   reference of n people it cannot tell chance below 1 / (n + 1), so a survey of more than
//!   [`PEOPLE_LIMIT`] placed sessions in a modality is not given this test there (a farm would
//!   need over [`PEOPLE_LIMIT`] x [`PEOPLE_SURPRISE`] / (n + 1) alike sessions to be found).
//!
//! Work: places are kept on a grid of cells [`RADIUS`] wide over the first four features a
//! session measured, so the places alike with one are in the cells around it: a run reads those
//! cells of the survey's stored places (the catalog's `cohort_points`) and of its own sessions,
//! and checks at most [`MAX_CHECKS`] of them a place (its count is then a lower bound). The
//! survey's spread is kept as counts per percentile bin ([`survey`]), so a run costs what its
//! own sessions' cells hold, not the survey's size.

use crate::model::{Model, Reason, Score};

/// The behaviour a session's place in its cohort is judged on: how it points, presses, types
/// and touches. Not counts or durations (how much a page asked for), not environment or
/// delivery facts (a survey's people share browsers), and not the pauses between movements or
/// the share of time spent moving: typing and reading fill those, so they would make a farm's
/// pointing differ with its typists. Compared modality by modality ([`MODALITIES`]): a farm
/// alike in one (one generator's pointing) is found when another varies (each session typing a
/// different real person's keys).
pub const COHORT_FEATURES: &[&str] = &[
    "movement_peak_speed_ratio",
    "movement_peak_time",
    "movement_submovements",
    "movement_deviation",
    "movement_efficiency",
    "movement_log_jerk",
    "press_dwell_mean_ms",
    "key_hold_mean_ms",
    "key_flight_mean_ms",
    "key_hold_log_sd",
    "key_flight_log_sd",
    "key_flight_lag1",
    "tap_dwell_mean_ms",
    "tap_dwell_log_sd",
    "swipe_peak_time",
    "swipe_log_jerk",
];

/// A modality of the cohort: its features (a range of [`COHORT_FEATURES`]) and how many of them
/// a session must have measured to be placed in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modality {
    /// `pointing`, `typing`, `touch`: the word of a cohort's reason.
    pub name: &'static str,
    /// Indexes into [`COHORT_FEATURES`].
    pub features: std::ops::Range<usize>,
    pub min_measured: usize,
    /// Features on which two sessions may differ by more than [`PEOPLE_RADIUS`] and still be
    /// alike in the people test.
    pub people_skip: usize,
}

/// The cohort's modalities.
pub const MODALITIES: [Modality; 3] = [
    Modality {
        name: "pointing",
        features: 0..7,
        min_measured: 5,
        people_skip: 2,
    },
    Modality {
        name: "typing",
        features: 7..12,
        min_measured: 4,
        people_skip: 1,
    },
    Modality {
        name: "touch",
        features: 12..16,
        min_measured: 3,
        people_skip: 1,
    },
];

/// Half the width of "alike" on each axis, in people's percentiles (0-1).
pub const RADIUS: f32 = 0.03;
/// Sessions alike with one (besides itself) before it is in a cluster.
pub const MIN_ALIKE: u32 = 5;
/// How many times the count expected by chance a cluster's count must be.
pub const SURPRISE: f64 = 20.0;
/// Against the people's spread (a person's percentile is uniform on every axis, by the model's
/// ranges, and the axes are taken as independent), a cluster must be this many more times alike
/// than [`SURPRISE`] asks: people's behaviours correlate across axes, which the product of the
/// axes ignores. The survey's own spread is the first test; this one holds where a farm is most
/// of the survey and sets that spread itself.
pub const REFERENCE_MARGIN: f64 = 1000.0;
/// A cluster of at least this many sessions (itself included) may take a session below
/// `review` on its own; a smaller one only to `review`.
pub const LARGE_CLUSTER: u32 = 20;
/// The log-odds a clustered session loses.
pub const PENALTY: f64 = 4.0;
/// Sessions in the cells around a session checked per session.
pub const MAX_CHECKS: usize = 1024;
/// Half the width of "alike" in the people test, in people's percentiles (0-1).
pub const PEOPLE_RADIUS: f32 = 0.12;
/// How many times the people's expected count a cluster's count must be in the people test.
pub const PEOPLE_SURPRISE: f64 = 4.0;
/// Placed sessions of a survey in a modality up to which the people test is made there.
pub const PEOPLE_LIMIT: i64 = 10_000;

/// A session's place in its cohort, in the modality where it stands out most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// The modality (an index into [`MODALITIES`]).
    pub modality: usize,
    /// Other sessions alike with this one in that modality (a lower bound past [`MAX_CHECKS`]
    /// neighbours).
    pub alike: u32,
    /// How many would be alike by chance, from the survey's own spread on each axis.
    pub expected: f64,
    /// How many would be alike among people (uniform percentiles, independent axes).
    pub expected_reference: f64,
    /// The people test: other sessions alike with this one within [`PEOPLE_RADIUS`] but for
    /// the modality's `people_skip` features (0 when the test is not made).
    pub alike_people: u32,
    /// How many would be so alike among the model's reference people (infinite when the test
    /// is not made).
    pub expected_people: f64,
}

impl Standing {
    /// In a cluster: enough alike, and far more than chance, by the survey's own spread or by
    /// the people's.
    pub fn clustered(&self) -> bool {
        self.clustered_alike() || self.clustered_by_people()
    }

    /// In a cluster by the test of alike on every feature.
    pub(crate) fn clustered_alike(&self) -> bool {
        let alike = f64::from(self.alike);
        self.alike >= MIN_ALIKE
            && (alike >= SURPRISE * self.expected
                || alike >= SURPRISE * REFERENCE_MARGIN * self.expected_reference)
    }

    /// In a cluster by the people test.
    pub(crate) fn clustered_by_people(&self) -> bool {
        self.alike_people >= MIN_ALIKE
            && f64::from(self.alike_people) >= PEOPLE_SURPRISE * self.expected_people
    }

    /// The cluster's size less the session: the count of the test that found it (the larger,
    /// when both did).
    pub fn cluster_alike(&self) -> u32 {
        match (self.clustered_alike(), self.clustered_by_people()) {
            (true, true) => self.alike.max(self.alike_people),
            (false, true) => self.alike_people,
            _ => self.alike,
        }
    }

    /// How far past chance it stands: the largest of its ratios, each over its own threshold.
    fn surprise(&self) -> f64 {
        let alike = f64::from(self.alike);
        let people = f64::from(self.alike_people) / self.expected_people.max(1e-12);
        (alike / self.expected.max(1e-12))
            .max(alike / (REFERENCE_MARGIN * self.expected_reference).max(1e-12))
            .max(people * SURPRISE / PEOPLE_SURPRISE)
    }
}

pub use survey::{People, standings};

/// The score of a session given its standing: a clustered session loses [`PENALTY`] log-odds,
/// no lower than the bottom of `review` for a cluster under [`LARGE_CLUSTER`] or one only the
/// people test found, and its reasons start with the cluster's size.
///
/// Why the people test never takes a session below `review` on its own: it is looser (alike
/// within 12 points, some features free), so a person whose style lies inside a large farm's
/// spread is alike with the farm. Measured on the corpus's TRAIN chunks scored as one survey
/// (69 % automation): 1 of 167 people clustered, a SapiMouse person alike in pointing with 42
/// automation sessions, who without this floor went from 95.8 to 29.4 (`automation-like`).
pub fn adjust(model: &Model, mut score: Score, standing: Option<Standing>) -> Score {
    let Some(standing) = standing.filter(Standing::clustered) else {
        return score;
    };
    let p = (score.human_score_percent / 100.0).clamp(1e-6, 1.0 - 1e-6);
    let z = (p / (1.0 - p)).ln() - PENALTY;
    let mut percent = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
    let alike = standing.cluster_alike();
    if alike + 1 < LARGE_CLUSTER || !standing.clustered_alike() {
        let floor = model.bands.review_from.min(score.human_score_percent);
        percent = percent.max(floor);
    }
    score.human_score_percent = percent;
    score.band = model.band(percent);
    score.reasons.insert(
        0,
        Reason::Cohort {
            alike,
            modality: MODALITIES
                .get(standing.modality)
                .map_or("pointing", |m| m.name),
        },
    );
    score.reasons.truncate(crate::model::REASONS_PER_SCORE);
    score
}

pub mod groups;
pub mod survey;

#[cfg(test)]
mod tests;
