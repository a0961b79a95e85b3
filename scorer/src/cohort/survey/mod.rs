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

#[cfg(test)]
use super::RADIUS;
use super::{MAX_CHECKS, MODALITIES, PEOPLE_LIMIT, Standing};
use crate::features::Features;
use crate::model::Model;

mod grid;
mod place;

use grid::*;
pub use place::{Placer, probes};
pub(crate) use place::{cell_of, ranges_around};

/// Percentiles are kept in 1/10,000ths (a percentile point is 100).
pub(crate) const UNITS: u16 = 10_000;
/// [`RADIUS`] in those units.
pub(crate) const RADIUS_UNITS: u16 = 300;
/// [`PEOPLE_RADIUS`](super::PEOPLE_RADIUS) in those units.
pub(crate) const PEOPLE_RADIUS_UNITS: u16 = 1_200;
/// The features of a place's mask its cell spans (at most: a touch place may measure three).
pub const CELL_AXES: usize = 4;
/// Cells per feature: `0..CELLS` cover 0-10,000 in cells of [`RADIUS_UNITS`].
pub(super) const CELLS: i64 = (UNITS / RADIUS_UNITS) as i64 + 1;
/// Width of a spread bin in units.
const BIN_UNITS: u16 = UNITS / COHORT_BINS;

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
mod tests;
