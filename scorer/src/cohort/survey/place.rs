//! A session's places: its percentiles in each modality, the grid cell each falls in, and the
//! ranges of cells a run asks the catalog for.

use catalog::{COHORT_UNMEASURED, CohortPoint, CohortProbe};

use super::super::{COHORT_FEATURES, MODALITIES};
use super::{CELL_AXES, CELLS, RADIUS_UNITS, UNITS};
use crate::features::Features;
use crate::model::{HumanRange, Model};

/// Places sessions: each modality's features as (index into the features, people's range).
pub struct Placer<'m> {
    pub(super) modalities: Vec<Vec<(Option<usize>, Option<&'m HumanRange>)>>,
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

pub(super) fn mask_of(values: &[u16]) -> u32 {
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != COHORT_UNMEASURED)
        .fold(0, |mask, (d, _)| mask | (1 << d))
}

/// The cells of a place's first [`CELL_AXES`] measured features.
pub(super) fn cells_of(values: &[u16]) -> Vec<i64> {
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
