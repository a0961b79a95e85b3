//! The survey's cohort: how many of a run's sessions behave alike, against how many would among
//! people.
//!
//! One generator with one set of settings, driven on one machine, makes sessions that resemble
//! each other far more than different people's do: a session's medians average over many
//! movements and keys drawn from the generator's distribution, so a farm's sessions land close
//! together, while each person keeps a style of their own (and the same person twice does not
//! repeat either). A scoring run sees a survey's sessions together, so it can count, for each
//! session, the others that are its near-duplicates.
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
//!
//! Work: sessions are grouped by the features they measured and, within a group, put on a grid
//! of cells [`RADIUS`] wide over the two axes that spread them most, so a session's alike ones
//! are in its cell or the eight around it; each session checks at most [`MAX_CHECKS`] of those
//! (its count is then a lower bound), so a run does O(n log n) sorting and binary searches and
//! at most `n · MAX_CHECKS` comparisons, on rayon's pool.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::features::Features;
use crate::model::{Model, Reason, Score};

/// The behaviour a session's place in its cohort is judged on: how it points, presses, types,
/// touches and pauses. Not counts or durations (how much a page asked for), not environment or
/// delivery facts (a survey's people share browsers). Compared modality by modality
/// ([`MODALITIES`]): a farm alike in one (one generator's pointing) is found when another varies
/// (each session typing a different real person's keys).
pub const COHORT_FEATURES: &[&str] = &[
    "movement_peak_speed_ratio",
    "movement_peak_time",
    "movement_submovements",
    "movement_deviation",
    "movement_efficiency",
    "movement_log_jerk",
    "pause_log_sd",
    "moving_fraction",
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
}

/// The cohort's modalities.
pub const MODALITIES: [Modality; 3] = [
    Modality {
        name: "pointing",
        features: 0..9,
        min_measured: 5,
    },
    Modality {
        name: "typing",
        features: 9..14,
        min_measured: 4,
    },
    Modality {
        name: "touch",
        features: 14..18,
        min_measured: 3,
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
}

impl Standing {
    /// In a cluster: enough alike, and far more than chance, by the survey's own spread or by
    /// the people's.
    pub fn clustered(&self) -> bool {
        let alike = f64::from(self.alike);
        self.alike >= MIN_ALIKE
            && (alike >= SURPRISE * self.expected
                || alike >= SURPRISE * REFERENCE_MARGIN * self.expected_reference)
    }

    /// How far past chance it stands: the larger of its two ratios.
    fn surprise(&self) -> f64 {
        let alike = f64::from(self.alike);
        (alike / self.expected.max(1e-12))
            .max(alike / (REFERENCE_MARGIN * self.expected_reference).max(1e-12))
    }
}

/// Sessions placed in one modality's behaviour space: one row of its features' percentiles
/// (0-1, NaN where unmeasured) per session.
struct Space {
    dims: usize,
    points: Vec<f32>,
}

impl Space {
    fn point(&self, i: usize) -> &[f32] {
        &self.points[i * self.dims..(i + 1) * self.dims]
    }

    fn mask(&self, i: usize) -> u32 {
        self.point(i)
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .fold(0, |mask, (d, _)| mask | (1 << d))
    }
}

/// Each session's standing among `features` (one survey's sessions), or `None` for a session
/// placed in no modality (it measured too little of every one), or when the model carries no
/// people's ranges to place sessions by. A session placed in several modalities stands where it
/// is clustered, and there where it stands out most.
pub fn standings(model: &Model, features: &[&Features]) -> Vec<Option<Standing>> {
    let mut out: Vec<Option<Standing>> = vec![None; features.len()];
    for (index, modality) in MODALITIES.iter().enumerate() {
        for (i, standing) in modality_standings(model, features, modality)
            .into_iter()
            .enumerate()
        {
            let Some(mut standing) = standing else {
                continue;
            };
            standing.modality = index;
            let better = match out[i] {
                None => true,
                Some(current) => {
                    (standing.clustered(), standing.surprise())
                        > (current.clustered(), current.surprise())
                }
            };
            if better {
                out[i] = Some(standing);
            }
        }
    }
    out
}

/// Standings in one modality.
fn modality_standings(
    model: &Model,
    features: &[&Features],
    modality: &Modality,
) -> Vec<Option<Standing>> {
    let names = &COHORT_FEATURES[modality.features.clone()];
    let dims = names.len();
    let ranges: Vec<_> = names
        .iter()
        .map(|name| model.human_ranges.iter().find(|r| r.feature == *name))
        .collect();
    if ranges.iter().all(Option::is_none) {
        return vec![None; features.len()];
    }
    let indexes: Vec<Option<usize>> = names
        .iter()
        .map(|name| Features::NAMES.iter().position(|n| n == name))
        .collect();
    let points: Vec<f32> = features
        .par_iter()
        .flat_map_iter(|f| {
            let values = f.values();
            indexes.iter().zip(&ranges).map(move |(index, range)| {
                let value = index.map_or(f64::NAN, |index| values[index]);
                range
                    .and_then(|r| r.percentile(value))
                    .map_or(f32::NAN, |p| (p / 100.0) as f32)
            })
        })
        .collect();
    let space = Space { dims, points };
    let mut groups: HashMap<u32, Vec<usize>> = HashMap::new();
    for i in 0..features.len() {
        let mask = space.mask(i);
        if mask.count_ones() as usize >= modality.min_measured {
            groups.entry(mask).or_default().push(i);
        }
    }
    let mut out = vec![None; features.len()];
    for (mask, members) in groups {
        for (i, standing) in group_standings(&space, mask, &members) {
            out[i] = Some(standing);
        }
    }
    out
}

/// The share of people within [`RADIUS`] of `v` on one axis: people's percentiles are uniform.
fn reference_share(v: f32) -> f64 {
    f64::from((v + RADIUS).min(1.0) - (v - RADIUS).max(0.0))
}

/// Standings within one group of sessions that measured the same features (`mask`).
fn group_standings(space: &Space, mask: u32, members: &[usize]) -> Vec<(usize, Standing)> {
    let axes: Vec<usize> = (0..space.dims).filter(|d| mask & (1 << d) != 0).collect();
    // Each axis's values, sorted, for the share of the group within RADIUS of a value.
    let sorted: Vec<Vec<f32>> = axes
        .iter()
        .map(|&d| {
            let mut values: Vec<f32> = members.iter().map(|&i| space.point(i)[d]).collect();
            values.sort_by(f32::total_cmp);
            values
        })
        .collect();
    let n = members.len();
    let share = |axis: usize, v: f32| -> f64 {
        let values = &sorted[axis];
        let low = values.partition_point(|&x| x < v - RADIUS);
        let high = values.partition_point(|&x| x <= v + RADIUS);
        // Less the session itself.
        (high - low).saturating_sub(1) as f64 / (n - 1).max(1) as f64
    };
    // A grid over the two axes whose windows hold the fewest sessions on average, in cells of
    // RADIUS: a session's alike ones are in its cell or the eight around it.
    let crowding: Vec<f64> = (0..axes.len())
        .map(|axis| sorted[axis].iter().map(|&v| share(axis, v)).sum::<f64>())
        .collect();
    let mut by_crowding: Vec<usize> = (0..axes.len()).collect();
    by_crowding.sort_by(|&a, &b| crowding[a].total_cmp(&crowding[b]));
    let (first, second) = (axes[by_crowding[0]], axes[by_crowding[1]]);
    let cell = |i: usize| -> (i32, i32) {
        let point = space.point(i);
        let at = |v: f32| (v / RADIUS).floor() as i32;
        (at(point[first]), at(point[second]))
    };
    let mut grid: HashMap<(i32, i32), Vec<usize>> = HashMap::new();
    for &i in members {
        grid.entry(cell(i)).or_default().push(i);
    }
    const AROUND: [(i32, i32); 9] = [
        (0, 0),
        (-1, -1),
        (-1, 0),
        (-1, 1),
        (0, -1),
        (0, 1),
        (1, -1),
        (1, 0),
        (1, 1),
    ];
    members
        .par_iter()
        .map(|&i| {
            let here = space.point(i);
            let alike_with = |j: usize| {
                let there = space.point(j);
                axes.iter().all(|&d| (here[d] - there[d]).abs() <= RADIUS)
            };
            let (a, b) = cell(i);
            let alike = AROUND
                .iter()
                .filter_map(|(da, db)| grid.get(&(a + da, b + db)))
                .flatten()
                .filter(|&&j| j != i)
                .take(MAX_CHECKS)
                .filter(|&&j| alike_with(j))
                .count();
            let chance: f64 = (0..axes.len()).map(|a| share(a, here[axes[a]])).product();
            let reference: f64 = axes.iter().map(|&d| reference_share(here[d])).product();
            let standing = Standing {
                modality: 0,
                alike: u32::try_from(alike).unwrap_or(u32::MAX),
                expected: chance * (n - 1) as f64,
                expected_reference: reference * (n - 1) as f64,
            };
            (i, standing)
        })
        .collect()
}

/// The score of a session given its standing: a clustered session loses [`PENALTY`] log-odds,
/// no lower than the bottom of `review` for a cluster under [`LARGE_CLUSTER`], and its reasons
/// start with the cluster's size.
pub fn adjust(model: &Model, mut score: Score, standing: Option<Standing>) -> Score {
    let Some(standing) = standing.filter(Standing::clustered) else {
        return score;
    };
    let p = (score.human_score_percent / 100.0).clamp(1e-6, 1.0 - 1e-6);
    let z = (p / (1.0 - p)).ln() - PENALTY;
    let mut percent = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
    if standing.alike + 1 < LARGE_CLUSTER {
        let floor = model.bands.review_from.min(score.human_score_percent);
        percent = percent.max(floor);
    }
    score.human_score_percent = percent;
    score.band = model.band(percent);
    score.reasons.insert(
        0,
        Reason::Cohort {
            alike: standing.alike,
            modality: MODALITIES
                .get(standing.modality)
                .map_or("pointing", |m| m.name),
        },
    );
    score.reasons.truncate(crate::model::REASONS_PER_SCORE);
    score
}

#[cfg(test)]
mod tests;
