//! The cohort as a survey keeps it across runs: every scored session's place in each modality
//! is stored in the catalog (`cohort_points`, found by grid cell) with the survey's spread
//! (`cohort_bins`), so a run compares its sessions with every session of the survey the survey
//! has scored, reading only the cells around its own sessions.
//!
//! - **A place** ([`CohortPoint`]) is a session's percentiles in one modality, in 1/10,000ths,
//!   with the mask of the features it measured. Its **cell** is the grid cell of width
//!   [`RADIUS`] over the first [`CELL_AXES`] features of its mask, packed into one integer, so
//!   the places alike with it are in the 3^[`CELL_AXES`] cells around it: 3^([`CELL_AXES`]-1)
//!   ranges of consecutive cells, one indexed read each ([`probes`]).
//! - **The spread**: per (modality, mask) and feature, the survey's places counted in bins of
//!   one percentile point; the share within [`RADIUS`] of a value is read off them (partial
//!   bins pro rata), and the number of places is the group's size.
//! - **A run** ([`Cohort`]) admits its sessions' places (into its own grid, and into the
//!   spread unless the survey counted them already), then stands each session among the
//!   stored places its probes found (less those of sessions this run scores again, which are
//!   stale) and this run's own. A stored session alike with a session that stands in a cluster
//!   is in a cluster that has grown: the run scores it again ([`Stood::rescore`]).
//!
//! - **The people test** needs every place of the session's group, not the cells around it (it
//!   lets features differ past the grid's reach): where a survey holds at most
//!   [`PEOPLE_LIMIT`](super::PEOPLE_LIMIT) placed sessions in a modality, a run asks for its
//!   groups whole ([`Cohort::probes`]) and counts against every place of the group.
//!
//! Sessions in one run are compared both ways; a session scored in an earlier pass of the
//! same run does not see a later pass's sessions until a later run re-scores it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use catalog::{
    COHORT_BINS, COHORT_UNMEASURED, CohortBin, CohortPoint, CohortProbe, StoredCohortPoint,
};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

#[cfg(test)]
use super::RADIUS;
use super::{COHORT_FEATURES, MAX_CHECKS, MODALITIES, PEOPLE_LIMIT, Standing};
use crate::features::Features;
use crate::model::{HumanRange, Model};

/// Percentiles are kept in 1/10,000ths (a percentile point is 100).
pub(crate) const UNITS: u16 = 10_000;
/// [`RADIUS`] in those units.
pub(crate) const RADIUS_UNITS: u16 = 300;
/// [`PEOPLE_RADIUS`](super::PEOPLE_RADIUS) in those units.
pub(crate) const PEOPLE_RADIUS_UNITS: u16 = 1_200;
/// The features of a place's mask its cell spans (at most: a touch place may measure three).
pub const CELL_AXES: usize = 4;
/// Cells per feature: `0..CELLS` cover 0-10,000 in cells of [`RADIUS_UNITS`].
const CELLS: i64 = (UNITS / RADIUS_UNITS) as i64 + 1;
/// Width of a spread bin in units.
const BIN_UNITS: u16 = UNITS / COHORT_BINS;

/// Places sessions: each modality's features as (index into the features, people's range).
pub struct Placer<'m> {
    modalities: Vec<Vec<(Option<usize>, Option<&'m HumanRange>)>>,
}

impl<'m> Placer<'m> {
    pub fn new(model: &'m Model) -> Self {
        let modalities = MODALITIES
            .iter()
            .map(|modality| {
                COHORT_FEATURES[modality.features.clone()]
                    .iter()
                    .map(|name| {
                        (
                            Features::NAMES.iter().position(|n| n == name),
                            model.human_ranges.iter().find(|r| r.feature == *name),
                        )
                    })
                    .collect()
            })
            .collect();
        Placer { modalities }
    }

    /// A session's places: one for each modality it measured enough of.
    pub fn places(&self, features: &Features) -> Vec<CohortPoint> {
        let values = features.values();
        let mut out = Vec::new();
        for (index, (modality, axes)) in MODALITIES.iter().zip(&self.modalities).enumerate() {
            let point: Vec<u16> = axes
                .iter()
                .map(|(feature, range)| {
                    let value = feature.map_or(f64::NAN, |i| values[i]);
                    range.and_then(|r| r.percentile(value)).map_or(
                        COHORT_UNMEASURED,
                        // Percentile 0-100 into units; the bounds keep it a measured value.
                        |p| (p * 100.0).round().clamp(0.0, f64::from(UNITS)) as u16,
                    )
                })
                .collect();
            let mask = mask_of(&point);
            if mask.count_ones() as usize >= modality.min_measured {
                out.push(CohortPoint {
                    modality: index as u8,
                    mask,
                    cell: cell_of(&point),
                    values: point,
                });
            }
        }
        out
    }
}

fn mask_of(values: &[u16]) -> u32 {
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != COHORT_UNMEASURED)
        .fold(0, |mask, (d, _)| mask | (1 << d))
}

/// The cells of a place's first [`CELL_AXES`] measured features.
fn cells_of(values: &[u16]) -> Vec<i64> {
    values
        .iter()
        .filter(|v| **v != COHORT_UNMEASURED)
        .take(CELL_AXES)
        .map(|v| i64::from(*v / RADIUS_UNITS).min(CELLS - 1))
        .collect()
}

/// The packed cell of a place (features past its measured ones count as cell 0).
pub(crate) fn cell_of(values: &[u16]) -> i64 {
    let cells = cells_of(values);
    (0..CELL_AXES).fold(0, |key, k| key * CELLS + cells.get(k).copied().unwrap_or(0))
}

/// The ranges of packed cells around a place (its own and every neighbouring cell), as
/// (first, last) pairs: the last feature's three cells are consecutive.
pub(crate) fn ranges_around(point: &CohortPoint) -> Vec<(i64, i64)> {
    let cells = cells_of(&point.values);
    let mut bases = vec![0i64];
    for k in 0..CELL_AXES - 1 {
        bases = match cells.get(k) {
            Some(&c) => bases
                .iter()
                .flat_map(|base| {
                    (c - 1..=c + 1)
                        .filter(|x| (0..CELLS).contains(x))
                        .map(move |x| base * CELLS + x)
                })
                .collect(),
            None => bases.iter().map(|base| base * CELLS).collect(),
        };
    }
    let (low, high) = match cells.get(CELL_AXES - 1) {
        Some(&c) => ((c - 1).max(0), (c + 1).min(CELLS - 1)),
        None => (0, 0),
    };
    bases
        .into_iter()
        .map(|base| (base * CELLS + low, base * CELLS + high))
        .collect()
}

/// What a run asks the catalog for its sessions' places: the ranges around each, once each.
pub fn probes<'a>(points: impl IntoIterator<Item = &'a CohortPoint>) -> Vec<CohortProbe> {
    let mut probes: Vec<CohortProbe> = points
        .into_iter()
        .flat_map(|point| {
            ranges_around(point)
                .into_iter()
                .map(move |cells| CohortProbe {
                    modality: point.modality,
                    mask: point.mask,
                    cells,
                })
        })
        .collect();
    probes.sort_unstable();
    probes.dedup();
    probes
}

/// A group's spread: its places counted per feature and bin.
#[derive(Debug, Clone)]
struct Spread {
    sessions: i64,
    bins: Vec<[i64; COHORT_BINS as usize]>,
}

impl Spread {
    fn new(dims: usize) -> Self {
        Spread {
            sessions: 0,
            bins: vec![[0; COHORT_BINS as usize]; dims],
        }
    }

    fn add(&mut self, point: &CohortPoint) {
        self.sessions += 1;
        for (axis, bin) in point.bins() {
            if let Some(bins) = self.bins.get_mut(usize::from(axis)) {
                bins[usize::from(bin)] += 1;
            }
        }
    }

    /// The places within [`RADIUS`] of `v` on `axis`, partial bins pro rata.
    fn within(&self, axis: usize, v: u16) -> f64 {
        let Some(bins) = self.bins.get(axis) else {
            return 0.0;
        };
        let low = f64::from(v.saturating_sub(RADIUS_UNITS));
        let high = f64::from(v.saturating_add(RADIUS_UNITS).min(UNITS));
        let width = f64::from(BIN_UNITS);
        let first = (low / width).floor() as usize;
        let last = ((high / width).ceil() as usize).min(bins.len());
        (first..last)
            .map(|b| {
                let (start, end) = (b as f64 * width, (b + 1) as f64 * width);
                let overlap = (end.min(high) - start.max(low)).max(0.0) / width;
                bins[b] as f64 * overlap
            })
            .sum()
    }
}

/// A session to stand in the cohort: its reference, its places, and whether the survey's
/// spread counts them already (a session scored before, scored again).
pub struct Entrant {
    pub reference: String,
    pub places: Vec<CohortPoint>,
    pub counted: bool,
}

/// What a pass's standings came to.
#[derive(Debug, Default)]
pub struct Stood {
    /// Each entrant's standing, in order (`None`: placed in no modality).
    pub standings: Vec<Option<Standing>>,
    /// Stored sessions, not in this run, alike with an entrant that stands in a cluster:
    /// their cluster grew since they were scored.
    pub rescore: Vec<String>,
}

/// A run's view of its survey's cohort.
#[derive(Debug, Default)]
pub struct Cohort {
    spreads: HashMap<(u8, u32), Spread>,
    points: Vec<CohortPoint>,
    /// This run's places, by group and cell.
    grid: Grid,
    in_run: HashSet<String>,
    /// The model's reference people, when it has them: the people test.
    people: Option<Arc<People>>,
}

/// The model's reference people ([`crate::model::CohortReference`]), placed as sessions are:
/// their places by (modality, mask), and how many were placed in each modality.
#[derive(Debug, Default)]
pub struct People {
    groups: HashMap<(u8, u32), Vec<Lanes>>,
    placed: [usize; MODALITIES.len()],
}

impl People {
    /// The model's people, placed by its ranges; `None` for a model without a reference.
    pub fn new(model: &Model) -> Option<Arc<People>> {
        let reference = model.cohort_reference.as_ref()?;
        let placer = Placer::new(model);
        let mut people = People::default();
        for row in &reference.sessions {
            let mut features = Features::unmeasured();
            for (name, value) in reference.features.iter().zip(row) {
                // Names were checked when the model was read.
                features.set(name, value.unwrap_or(f64::NAN));
            }
            for point in placer.places(&features) {
                people.placed[usize::from(point.modality)] += 1;
                people
                    .groups
                    .entry((point.modality, point.mask))
                    .or_default()
                    .push(lanes_of(&point.values));
            }
        }
        Some(Arc::new(people))
    }

    /// The people alike with `lanes` in the people test, and how many were placed in its
    /// modality.
    fn alike(&self, modality: u8, mask: u32, lanes: &Lanes, skip: usize) -> (usize, usize) {
        let alike = self.groups.get(&(modality, mask)).map_or(0, |group| {
            group.iter().filter(|p| alike_but(lanes, p, skip)).count()
        });
        (
            alike,
            self.placed.get(usize::from(modality)).copied().unwrap_or(0),
        )
    }
}

/// The widest modality: a place's values side by side in that many lanes.
const LANES: usize = widest_modality();

const fn widest_modality() -> usize {
    let mut widest = 0;
    let mut m = 0;
    while m < MODALITIES.len() {
        let width = MODALITIES[m].features.end - MODALITIES[m].features.start;
        if width > widest {
            widest = width;
        }
        m += 1;
    }
    widest
}

/// A place's values in [`LANES`] lanes, the lanes past its modality's features 0 (equal in
/// every place of a group, so they never tell two apart).
type Lanes = [u16; LANES];

fn lanes_of(values: &[u16]) -> Lanes {
    let mut lanes = [0; LANES];
    for (lane, value) in lanes.iter_mut().zip(values) {
        *lane = *value;
    }
    lanes
}

/// Alike: within [`RADIUS_UNITS`] on every lane. Every lane is compared (no early exit), so the
/// check compiles to a few vector instructions.
fn alike(a: &Lanes, b: &Lanes) -> bool {
    a.iter()
        .zip(b)
        .fold(true, |all, (x, y)| all & (x.abs_diff(*y) <= RADIUS_UNITS))
}

/// Alike in the people test: within [`PEOPLE_RADIUS_UNITS`] on every lane but at most `skip`.
fn alike_but(a: &Lanes, b: &Lanes, skip: usize) -> bool {
    let far = a.iter().zip(b).fold(0usize, |far, (x, y)| {
        far + usize::from(x.abs_diff(*y) > PEOPLE_RADIUS_UNITS)
    });
    far <= skip
}

/// Places sorted by (modality, mask, cell), stably (a cell's places in the order they came),
/// their values inline, with where each run of cells that differ only in the last axis starts
/// and ends: the places of one of [`ranges_around`]'s ranges are one contiguous slice, found by
/// one hash lookup. Measured on a full run of 85,000 sessions: a map of cells to indexes into
/// the places (a SipHash and a pointer chase per cell and per check) made `Cohort::standing` a
/// quarter of the run's CPU; two binary searches a range over the sorted places, 13 %.
#[derive(Debug, Default)]
struct Grid {
    entries: Vec<GridEntry>,
    /// (modality, mask, cell without its last axis) -> the entries' start and end.
    rows: FxHashMap<(u8, u32, i64), (usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
struct GridEntry {
    key: (u8, u32, i64),
    lanes: Lanes,
    /// The place's index (this run's places) or the stored place's.
    id: usize,
}

impl Grid {
    /// Adds places, after the ones already in for equal cells: a stable sort of the two sorted
    /// runs, which the standard library merges in one pass.
    fn extend(&mut self, new: Vec<GridEntry>) {
        self.entries.extend(new);
        self.entries.sort_by_key(|e| e.key);
        self.rows.clear();
        let mut start = 0;
        for row in self.entries.chunk_by(|x, y| row_of(x.key) == row_of(y.key)) {
            self.rows
                .insert(row_of(row[0].key), (start, start + row.len()));
            start += row.len();
        }
    }

    /// The places of (modality, mask) with a cell in `low..=high`, cells that differ only in
    /// the last axis (as [`ranges_around`] gives them).
    fn range(&self, modality: u8, mask: u32, low: i64, high: i64) -> &[GridEntry] {
        let Some(&(start, end)) = self.rows.get(&row_of((modality, mask, low))) else {
            return &[];
        };
        let row = &self.entries[start..end];
        let first = row.partition_point(|e| e.key.2 < low);
        let last = row.partition_point(|e| e.key.2 <= high);
        &row[first..last]
    }

    /// Every place of (modality, mask).
    fn group(&self, modality: u8, mask: u32) -> &[GridEntry] {
        let first = self
            .entries
            .partition_point(|e| (e.key.0, e.key.1) < (modality, mask));
        let last = self
            .entries
            .partition_point(|e| (e.key.0, e.key.1) <= (modality, mask));
        &self.entries[first..last]
    }
}

/// A key's row: its cell without the last axis.
fn row_of((modality, mask, cell): (u8, u32, i64)) -> (u8, u32, i64) {
    (modality, mask, cell.div_euclid(CELLS))
}

fn entry(point: &CohortPoint, id: usize) -> GridEntry {
    GridEntry {
        key: (point.modality, point.mask, point.cell),
        lanes: lanes_of(&point.values),
        id,
    }
}

impl Cohort {
    /// The cohort of a survey whose stored spread is `bins`.
    pub fn new(bins: &[CohortBin]) -> Self {
        let mut cohort = Cohort::default();
        let mut sessions: HashMap<(u8, u32), HashMap<u8, i64>> = HashMap::new();
        for bin in bins {
            let Some(dims) = MODALITIES
                .get(usize::from(bin.modality))
                .map(|m| m.features.len())
            else {
                continue;
            };
            let spread = cohort
                .spreads
                .entry((bin.modality, bin.mask))
                .or_insert_with(|| Spread::new(dims));
            if let Some(count) = spread
                .bins
                .get_mut(usize::from(bin.axis))
                .and_then(|bins| bins.get_mut(usize::from(bin.bin)))
            {
                *count += bin.sessions;
            }
            *sessions
                .entry((bin.modality, bin.mask))
                .or_default()
                .entry(bin.axis)
                .or_default() += bin.sessions;
        }
        // Every place of a group measured each of the mask's features: any one feature's
        // total is the group's size.
        for (group, per_axis) in sessions {
            if let Some(spread) = cohort.spreads.get_mut(&group) {
                spread.sessions = per_axis.values().copied().max().unwrap_or(0);
            }
        }
        cohort
    }

    /// The cohort with the model's reference people: the people test is made.
    pub fn with_people(mut self, people: Option<Arc<People>>) -> Self {
        self.people = people;
        self
    }

    /// Placed sessions of the survey in `modality`, stored and this run's so far.
    fn placed(&self, modality: u8) -> i64 {
        self.spreads
            .iter()
            .filter(|((m, _), _)| *m == modality)
            .map(|(_, spread)| spread.sessions)
            .sum()
    }

    /// Whether the people test is made in `modality`: the model has people and the survey is
    /// within [`PEOPLE_LIMIT`] there.
    fn people_test(&self, modality: u8) -> bool {
        self.people.is_some() && self.placed(modality) <= PEOPLE_LIMIT
    }

    /// What a pass asks the catalog for: the cells around each place ([`probes`]), or, in a
    /// modality where the people test is made, the place's whole group (its stored places
    /// number at most [`PEOPLE_LIMIT`]).
    pub fn probes<'a>(
        &self,
        points: impl IntoIterator<Item = &'a CohortPoint>,
    ) -> Vec<CohortProbe> {
        let (whole, around): (Vec<&CohortPoint>, Vec<&CohortPoint>) = points
            .into_iter()
            .partition(|point| self.people_test(point.modality));
        let mut found = probes(around);
        found.extend(whole.into_iter().map(|point| CohortProbe {
            modality: point.modality,
            mask: point.mask,
            cells: (0, i64::MAX),
        }));
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Whether this run has stood the session (scored or scoring it).
    pub fn in_run(&self, reference: &str) -> bool {
        self.in_run.contains(reference)
    }

    /// Stands a pass's entrants among `stored` (the places the pass's [`probes`] found) and
    /// this run's sessions so far, these entrants included.
    pub fn stand(&mut self, entrants: &[Entrant], stored: &[StoredCohortPoint]) -> Stood {
        let mut owners: Vec<(usize, usize)> = Vec::new();
        let mut admitted = Vec::new();
        for (e, entrant) in entrants.iter().enumerate() {
            self.in_run.insert(entrant.reference.clone());
            for point in &entrant.places {
                let dims = MODALITIES
                    .get(usize::from(point.modality))
                    .map_or(0, |m| m.features.len());
                let spread = self
                    .spreads
                    .entry((point.modality, point.mask))
                    .or_insert_with(|| Spread::new(dims));
                if !entrant.counted {
                    spread.add(point);
                }
                let index = self.points.len();
                admitted.push(entry(point, index));
                self.points.push(point.clone());
                owners.push((e, index));
            }
        }
        self.grid.extend(admitted);
        // The stored places still current: not of a session this run scores.
        let mut stored_grid = Grid::default();
        stored_grid.extend(
            stored
                .iter()
                .enumerate()
                .filter(|(_, s)| !self.in_run.contains(&s.reference))
                .map(|(i, s)| entry(&s.point, i))
                .collect(),
        );
        let this = &*self;
        let placed: Vec<(usize, Standing, Vec<usize>)> = owners
            .par_iter()
            .filter_map(|&(entrant, index)| {
                let (standing, stored_alike) = this.standing(index, &stored_grid)?;
                Some((entrant, standing, stored_alike))
            })
            .collect();
        let mut best: Vec<Option<(Standing, Vec<usize>)>> = vec![None; entrants.len()];
        for (entrant, standing, stored_alike) in placed {
            let better = match &best[entrant] {
                None => true,
                Some((current, _)) => {
                    (standing.clustered(), standing.surprise())
                        > (current.clustered(), current.surprise())
                }
            };
            if better {
                best[entrant] = Some((standing, stored_alike));
            }
        }
        let mut rescore = HashSet::new();
        let standings = best
            .into_iter()
            .map(|found| {
                found.map(|(standing, stored_alike)| {
                    if standing.clustered() {
                        rescore.extend(
                            stored_alike
                                .into_iter()
                                .map(|i| stored[i].reference.clone()),
                        );
                    }
                    standing
                })
            })
            .collect();
        let mut rescore: Vec<String> = rescore.into_iter().collect();
        rescore.sort();
        Stood { standings, rescore }
    }

    /// The standing of this run's place `index`, and the stored places alike with it.
    fn standing(&self, index: usize, stored: &Grid) -> Option<(Standing, Vec<usize>)> {
        let point = &self.points[index];
        let spread = self.spreads.get(&(point.modality, point.mask))?;
        let lanes = lanes_of(&point.values);
        let mut checks = 0usize;
        let mut alike_count = 0u32;
        let mut stored_alike = Vec::new();
        'ranges: for (low, high) in ranges_around(point) {
            let ours = self.grid.range(point.modality, point.mask, low, high);
            let theirs = stored.range(point.modality, point.mask, low, high);
            let (mut a, mut b) = (0, 0);
            // Cell by cell, this run's places and then the stored ones: the order the checks
            // are counted in, which decides which are checked past MAX_CHECKS.
            while a < ours.len() || b < theirs.len() {
                let cell = match (ours.get(a), theirs.get(b)) {
                    (Some(x), Some(y)) => x.key.2.min(y.key.2),
                    (Some(x), None) => x.key.2,
                    (None, Some(y)) => y.key.2,
                    (None, None) => break,
                };
                while let Some(other) = ours.get(a).filter(|o| o.key.2 == cell) {
                    a += 1;
                    if other.id == index {
                        continue;
                    }
                    if checks == MAX_CHECKS {
                        break 'ranges;
                    }
                    checks += 1;
                    alike_count += u32::from(alike(&lanes, &other.lanes));
                }
                while let Some(other) = theirs.get(b).filter(|o| o.key.2 == cell) {
                    b += 1;
                    if checks == MAX_CHECKS {
                        break 'ranges;
                    }
                    checks += 1;
                    if alike(&lanes, &other.lanes) {
                        alike_count += 1;
                        stored_alike.push(other.id);
                    }
                }
            }
        }
        let others = (spread.sessions - 1).max(0) as f64;
        let mut chance = 1.0;
        let mut reference = 1.0;
        for (axis, &v) in point.values.iter().enumerate() {
            if v == COHORT_UNMEASURED {
                continue;
            }
            // Less the session itself, which the spread counts.
            chance *= ((spread.within(axis, v) - 1.0).max(0.0) / others.max(1.0)).min(1.0);
            reference *= f64::from(
                v.saturating_add(RADIUS_UNITS).min(UNITS) - v.saturating_sub(RADIUS_UNITS),
            ) / f64::from(UNITS);
        }
        let mut standing = Standing {
            modality: usize::from(point.modality),
            alike: alike_count,
            expected: chance * others,
            expected_reference: reference * others,
            alike_people: 0,
            expected_people: f64::INFINITY,
        };
        if let Some(people) = self
            .people
            .as_ref()
            .filter(|_| self.people_test(point.modality))
        {
            let skip = MODALITIES
                .get(usize::from(point.modality))
                .map_or(0, |m| m.people_skip);
            let mut alike_people = 0u32;
            let mut stored_people = Vec::new();
            for other in self.grid.group(point.modality, point.mask) {
                if other.id != index && alike_but(&lanes, &other.lanes, skip) {
                    alike_people += 1;
                }
            }
            for other in stored.group(point.modality, point.mask) {
                if alike_but(&lanes, &other.lanes, skip) {
                    alike_people += 1;
                    stored_people.push(other.id);
                }
            }
            let (alike, placed) = people.alike(point.modality, point.mask, &lanes, skip);
            standing.alike_people = alike_people;
            standing.expected_people =
                (alike as f64 + 1.0) / (placed as f64 + 1.0) * self.placed(point.modality) as f64;
            if standing.clustered_by_people() {
                // Every place alike with this one in the narrow sense is alike here too.
                stored_alike = stored_people;
            }
        }
        Some((standing, stored_alike))
    }
}

/// Each session's standing among `features` alone (one survey's sessions, none stored): the
/// cohort of a run over a survey scored for the first time.
pub fn standings(model: &Model, features: &[&Features]) -> Vec<Option<Standing>> {
    let placer = Placer::new(model);
    let people = People::new(model);
    let entrants: Vec<Entrant> = features
        .par_iter()
        .enumerate()
        .map(|(i, f)| Entrant {
            reference: i.to_string(),
            places: placer.places(f),
            counted: false,
        })
        .collect();
    Cohort::default()
        .with_people(people)
        .stand(&entrants, &[])
        .standings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(values: &[u16]) -> CohortPoint {
        CohortPoint {
            modality: 0,
            mask: mask_of(values),
            cell: cell_of(values),
            values: values.to_vec(),
        }
    }

    #[test]
    fn the_radius_in_units_is_the_radius() {
        assert_eq!(f32::from(RADIUS_UNITS), (RADIUS * f32::from(UNITS)).round());
        assert_eq!(CELLS, 34);
    }

    #[test]
    fn every_alike_place_is_in_a_probed_range() {
        // A grid of places around one: each alike one lies in a range the probes ask for.
        let centre = [1_000u16, 5_000, 9_950, 300, 7_777];
        let probed = ranges_around(&point(&centre));
        // The third feature is in the last cell: two of its three neighbours exist.
        assert_eq!(probed.len(), 18);
        for d0 in [-300i32, -150, 0, 299, 300] {
            for d3 in [-300i32, 0, 300] {
                let mut values = centre;
                values[0] = (i32::from(values[0]) + d0) as u16;
                values[3] = (i32::from(values[3]) + d3).max(0) as u16;
                let other = point(&values);
                assert!(
                    probed
                        .iter()
                        .any(|(low, high)| (*low..=*high).contains(&other.cell)),
                    "{values:?}"
                );
            }
        }
    }

    #[test]
    fn a_spread_counts_partial_bins_pro_rata() {
        let mut spread = Spread::new(1);
        for v in [0u16, 50, 150, 250, 5_000] {
            spread.add(&point(&[v]));
        }
        // Window 0-300 at v = 0: bins 0, 1 and 2 whole (0, 50; 150; 250).
        assert_eq!(spread.within(0, 0), 4.0);
        // Window 4,750-5,350 holds bin 50 whole.
        assert_eq!(spread.within(0, 5_050), 1.0);
        // Window 4,760-5,360 cuts bin 47 (empty) and bin 53 (empty); 50 whole.
        assert_eq!(spread.within(0, 5_060), 1.0);
    }

    #[test]
    fn stored_places_count_and_a_grown_cluster_is_rescored() {
        // Six stored sessions alike with each other, stored by earlier runs, and two new ones
        // alike with them: the new ones stand in a cluster of eight and every stored one is to
        // be scored again; a stored place of a session this run scores again is not counted.
        let values = [
            5_000u16, 5_000, 5_000, 5_000, 5_000, 5_000, 5_000, 5_000, 5_000,
        ];
        let stored: Vec<StoredCohortPoint> = (0..6)
            .map(|i| StoredCohortPoint {
                reference: format!("old-{i}"),
                point: point(&values.map(|v| v + i * 10)),
            })
            .collect();
        let bins = catalog_bins(&stored);
        let mut cohort = Cohort::new(&bins);
        let entrants: Vec<Entrant> = ["new-0", "new-1", "old-5"]
            .iter()
            .enumerate()
            .map(|(i, reference)| Entrant {
                reference: (*reference).to_owned(),
                places: vec![point(&values.map(|v| v + 3 * i as u16))],
                counted: reference.starts_with("old"),
            })
            .collect();
        let stood = cohort.stand(&entrants, &stored);
        let standing = stood.standings[0].expect("placed");
        // 5 current stored + the other two entrants.
        assert_eq!(standing.alike, 7);
        assert_eq!(
            stood.rescore,
            (0..5).map(|i| format!("old-{i}")).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_grid_counts_what_comparing_every_pair_counts() {
        // Places scattered around three spots (dense enough that most share cells with
        // others, few enough that no place reaches MAX_CHECKS), half this run's and half
        // stored: every standing's count is the count of all pairs compared.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let centres = [[2_000u16; 7], [5_000; 7], [9_800; 7]];
        let places: Vec<CohortPoint> = (0..600)
            .map(|i| {
                let values = centres[i % 3].map(|c| {
                    let v = i64::from(c) + next(1_201) as i64 - 600;
                    v.clamp(0, i64::from(UNITS)) as u16
                });
                point(&values)
            })
            .collect();
        let (ours, theirs) = places.split_at(300);
        let stored: Vec<StoredCohortPoint> = theirs
            .iter()
            .enumerate()
            .map(|(i, p)| StoredCohortPoint {
                reference: format!("stored-{i}"),
                point: p.clone(),
            })
            .collect();
        let entrants: Vec<Entrant> = ours
            .iter()
            .enumerate()
            .map(|(i, p)| Entrant {
                reference: format!("new-{i}"),
                places: vec![p.clone()],
                counted: false,
            })
            .collect();
        let stood = Cohort::default().stand(&entrants, &stored);
        let within = |a: &CohortPoint, b: &CohortPoint| {
            a.values
                .iter()
                .zip(&b.values)
                .all(|(x, y)| x.abs_diff(*y) <= RADIUS_UNITS)
        };
        let mut clustered = 0;
        for (i, standing) in stood.standings.iter().enumerate() {
            let expected = places
                .iter()
                .enumerate()
                .filter(|(j, other)| *j != i && within(&places[i], other))
                .count();
            assert_eq!(
                standing.expect("placed").alike as usize,
                expected,
                "place {i}"
            );
            clustered += usize::from(standing.is_some_and(|s| s.clustered()));
        }
        assert!(clustered > 0, "the spots are dense enough to cluster");
    }

    fn catalog_bins(stored: &[StoredCohortPoint]) -> Vec<CohortBin> {
        let mut spread = Spread::new(9);
        for s in stored {
            spread.add(&s.point);
        }
        let mask = stored[0].point.mask;
        spread
            .bins
            .iter()
            .enumerate()
            .flat_map(|(axis, bins)| {
                bins.iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(move |(bin, n)| CohortBin {
                        modality: 0,
                        mask,
                        axis: axis as u8,
                        bin: bin as u16,
                        sessions: *n,
                    })
            })
            .collect()
    }
}
