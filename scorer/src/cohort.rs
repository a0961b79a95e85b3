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
//! - **Behaviour space.** Each session is placed by [`COHORT_FEATURES`], each as its percentile
//!   among the TRAIN people (the model file's `human_ranges`), so that every axis spreads people
//!   evenly and no unit dominates. Two sessions are **alike** when they measured the same
//!   features (at least [`MIN_MEASURED`]) and lie within [`RADIUS`] of each other on every one.
//! - **Expected among people.** The count a session would have by chance is taken from the
//!   survey itself: the share of its sessions within [`RADIUS`] on each axis alone, multiplied
//!   across axes (the axes taken as independent: what a set of unrelated people looks like).
//!   A farm's sessions agree on every axis at once, far beyond that product.
//! - **The finding.** A session with at least [`MIN_ALIKE`] alike and at least [`SURPRISE`]
//!   times the expected count is in a cluster. The score then loses [`PENALTY`] log-odds with a
//!   named reason (`41 sessions in this survey move alike`) and, for a cluster of fewer than
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
/// delivery facts (a survey's people share browsers).
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
/// Half the width of "alike" on each axis, in people's percentiles (0-1).
pub const RADIUS: f32 = 0.03;
/// Features a session must have measured to take part.
pub const MIN_MEASURED: usize = 5;
/// Alike sessions (besides itself) before a session is in a cluster.
pub const MIN_ALIKE: u32 = 5;
/// How many times the count expected among people a cluster's count must be.
pub const SURPRISE: f64 = 20.0;
/// A cluster of at least this many sessions (itself included) may take a session below
/// `review` on its own; a smaller one only to `review`.
pub const LARGE_CLUSTER: u32 = 20;
/// The log-odds a clustered session loses.
pub const PENALTY: f64 = 4.0;
/// Sessions in the cells around a session checked per session.
pub const MAX_CHECKS: usize = 1024;

/// A session's place in its cohort.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Other sessions of the run alike with this one (a lower bound past [`MAX_CHECKS`]
    /// neighbours).
    pub alike: u32,
    /// How many would be alike by chance, from the survey's own spread on each axis.
    pub expected: f64,
}

impl Standing {
    /// In a cluster: enough alike, and far more than chance.
    pub fn clustered(&self) -> bool {
        self.alike >= MIN_ALIKE && f64::from(self.alike) >= SURPRISE * self.expected
    }
}

/// Sessions placed in behaviour space: one row of [`COHORT_FEATURES`] percentiles (0-1, NaN
/// where unmeasured) per session.
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

/// Each session's standing among `features` (one run's sessions of one survey), or `None`
/// for a session that measured too little to be placed, or when the model carries no people's
/// ranges to place sessions by.
pub fn standings(model: &Model, features: &[&Features]) -> Vec<Option<Standing>> {
    let dims = COHORT_FEATURES.len();
    let ranges: Vec<_> = COHORT_FEATURES
        .iter()
        .map(|name| model.human_ranges.iter().find(|r| r.feature == *name))
        .collect();
    if ranges.iter().all(Option::is_none) {
        return vec![None; features.len()];
    }
    let indexes: Vec<Option<usize>> = COHORT_FEATURES
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
        if mask.count_ones() as usize >= MIN_MEASURED {
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
            let standing = Standing {
                alike: u32::try_from(alike).unwrap_or(u32::MAX),
                expected: chance * (n - 1) as f64,
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
    score.reasons.insert(0, Reason::Cohort(standing.alike));
    score.reasons.truncate(crate::model::REASONS_PER_SCORE);
    score
}

#[cfg(test)]
mod tests;
