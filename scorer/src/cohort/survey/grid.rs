//! Places side by side: their values in lanes compared a vector at a time, and the grid that
//! finds a range of cells' places in one lookup.

use catalog::CohortPoint;
use rustc_hash::FxHashMap;

use super::super::MODALITIES;
use super::{CELLS, PEOPLE_RADIUS_UNITS, RADIUS_UNITS};

/// The widest modality: a place's values side by side in that many lanes.
pub(super) const LANES: usize = widest_modality();

pub(super) const fn widest_modality() -> usize {
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
pub(super) type Lanes = [u16; LANES];

pub(super) fn lanes_of(values: &[u16]) -> Lanes {
    let mut lanes = [0; LANES];
    for (lane, value) in lanes.iter_mut().zip(values) {
        *lane = *value;
    }
    lanes
}

/// Alike: within [`RADIUS_UNITS`] on every lane. Every lane is compared (no early exit), so the
/// check compiles to a few vector instructions.
pub(super) fn alike(a: &Lanes, b: &Lanes) -> bool {
    a.iter()
        .zip(b)
        .fold(true, |all, (x, y)| all & (x.abs_diff(*y) <= RADIUS_UNITS))
}

/// Alike in the people test: within [`PEOPLE_RADIUS_UNITS`] on every lane but at most `skip`.
pub(super) fn alike_but(a: &Lanes, b: &Lanes, skip: usize) -> bool {
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
pub(super) struct Grid {
    pub(super) entries: Vec<GridEntry>,
    /// (modality, mask, cell without its last axis) -> the entries' start and end.
    pub(super) rows: FxHashMap<(u8, u32, i64), (usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct GridEntry {
    pub(super) key: (u8, u32, i64),
    pub(super) lanes: Lanes,
    /// The place's index (this run's places) or the stored place's.
    pub(super) id: usize,
}

impl Grid {
    /// Adds places, after the ones already in for equal cells: a stable sort of the two sorted
    /// runs, which the standard library merges in one pass.
    pub(super) fn extend(&mut self, new: Vec<GridEntry>) {
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
    pub(super) fn range(&self, modality: u8, mask: u32, low: i64, high: i64) -> &[GridEntry] {
        let Some(&(start, end)) = self.rows.get(&row_of((modality, mask, low))) else {
            return &[];
        };
        let row = &self.entries[start..end];
        let first = row.partition_point(|e| e.key.2 < low);
        let last = row.partition_point(|e| e.key.2 <= high);
        &row[first..last]
    }

    /// Every place of (modality, mask).
    pub(super) fn group(&self, modality: u8, mask: u32) -> &[GridEntry] {
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
pub(super) fn row_of((modality, mask, cell): (u8, u32, i64)) -> (u8, u32, i64) {
    (modality, mask, cell.div_euclid(CELLS))
}

pub(super) fn entry(point: &CohortPoint, id: usize) -> GridEntry {
    GridEntry {
        key: (point.modality, point.mask, point.cell),
        lanes: lanes_of(&point.values),
        id,
    }
}
