//! A survey's clusters as a reviewer sees them: the sessions a run found in a cluster, grouped
//! with those they are alike with (same modality and measured features, every feature within
//! [`RADIUS`](super::RADIUS)), so that "these 20 move alike" is one group on the review desk.
//!
//! The runs keep, per session, only whether it stood in a cluster and how many were alike
//! with it; the groups are drawn again from the clustered sessions' stored places when the
//! desk asks.

use std::collections::HashMap;

use catalog::{COHORT_UNMEASURED, ClusteredPlace};

use super::survey::{RADIUS_UNITS, UNITS};
use super::{COHORT_FEATURES, MODALITIES};

/// A place's units in a percentile point.
const UNITS_PER_POINT: f64 = UNITS as f64 / 100.0;

/// One group of clustered sessions alike with each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `pointing`, `typing` or `touch`.
    pub modality: &'static str,
    /// The members' references, sorted.
    pub members: Vec<String>,
    /// The features the members measured, each with its median percentile among them and how
    /// far apart they are on it (the largest minus the smallest, in percentile points).
    pub features: Vec<SharedFeature>,
    /// The largest difference between two members on any feature, in percentile points.
    pub widest: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SharedFeature {
    pub name: &'static str,
    pub median: f64,
    pub range: f64,
}

impl Group {
    /// A stable name: the modality and the first member's reference.
    pub fn id(&self) -> String {
        format!(
            "{}:{}",
            self.modality,
            self.members.first().map_or("", String::as_str)
        )
    }
}

/// The groups of `places` (each a clustered session's place in the modality it clustered in):
/// sessions joined when alike, directly or through others; largest group first, a session
/// alike with none of the others left out.
pub fn groups(places: &[ClusteredPlace]) -> Vec<Group> {
    let mut parent: Vec<usize> = (0..places.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    // Within each (modality, mask), a sweep along the first feature: only places within the
    // radius on it can be alike. A tight farm of k sessions still costs k^2 / 2 comparisons
    // (benches/README.md has the desk's figures).
    let mut by_group: HashMap<(u8, u32), Vec<usize>> = HashMap::new();
    for (i, place) in places.iter().enumerate() {
        by_group
            .entry((place.point.modality, place.point.mask))
            .or_default()
            .push(i);
    }
    let first = |i: usize| places[i].point.values.first().copied().unwrap_or(0);
    for members in by_group.values_mut() {
        members.sort_by_key(|&i| first(i));
        for (k, &i) in members.iter().enumerate() {
            for &j in &members[k + 1..] {
                if first(j) - first(i) > RADIUS_UNITS {
                    break;
                }
                if alike(&places[i].point.values, &places[j].point.values) {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    if a != b {
                        parent[a.max(b)] = a.min(b);
                    }
                }
            }
        }
    }
    let mut components: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..places.len() {
        let r = root(&mut parent, i);
        components.entry(r).or_default().push(i);
    }
    let mut groups: Vec<Group> = components
        .into_values()
        .filter(|members| members.len() > 1)
        .map(|members| group(places, &members))
        .collect();
    groups.sort_by(|a, b| {
        b.members
            .len()
            .cmp(&a.members.len())
            .then_with(|| a.members.cmp(&b.members))
    });
    groups
}

fn alike(a: &[u16], b: &[u16]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.abs_diff(*y) <= RADIUS_UNITS)
}

fn group(places: &[ClusteredPlace], members: &[usize]) -> Group {
    let first = &places[members[0]].point;
    let modality = MODALITIES
        .get(usize::from(first.modality))
        .map_or(("unknown", 0..0), |m| (m.name, m.features.clone()));
    let mut features = Vec::new();
    let mut widest = 0.0f64;
    for (axis, name) in COHORT_FEATURES[modality.1].iter().enumerate() {
        let mut values: Vec<u16> = members
            .iter()
            .filter_map(|&i| places[i].point.values.get(axis).copied())
            .filter(|&v| v != COHORT_UNMEASURED)
            .collect();
        if values.is_empty() {
            continue;
        }
        values.sort_unstable();
        let median = f64::from(values[values.len() / 2]) / UNITS_PER_POINT;
        let range = f64::from(values[values.len() - 1] - values[0]) / UNITS_PER_POINT;
        widest = widest.max(range);
        features.push(SharedFeature {
            name,
            median,
            range,
        });
    }
    let mut references: Vec<String> = members
        .iter()
        .map(|&i| places[i].reference.clone())
        .collect();
    references.sort();
    references.dedup();
    Group {
        modality: modality.0,
        members: references,
        features,
        widest,
    }
}

#[cfg(test)]
mod tests {
    use catalog::CohortPoint;

    use super::*;

    fn place(reference: &str, modality: u8, values: &[u16]) -> ClusteredPlace {
        ClusteredPlace {
            reference: reference.to_owned(),
            point: CohortPoint {
                modality,
                mask: (1 << values.len()) - 1,
                cell: 0,
                values: values.to_vec(),
            },
        }
    }

    #[test]
    fn sessions_alike_directly_or_through_others_are_one_group() {
        let places = [
            place("a", 0, &[1000, 2000, 3000, 4000, 5000, 6000, 7000]),
            place("b", 0, &[1250, 2000, 3000, 4000, 5000, 6000, 7000]),
            // Alike with b, not with a (500 apart on the first feature): joined through b.
            place("c", 0, &[1500, 2100, 3000, 4000, 5000, 6000, 7000]),
            // Far from all three.
            place("d", 0, &[9000, 2000, 3000, 4000, 5000, 6000, 7000]),
            place("e", 0, &[9100, 2000, 3000, 4000, 5000, 6000, 7000]),
            // The same values in another modality are another group's business.
            place("f", 1, &[1000, 2000, 3000, 4000, 5000]),
        ];
        let found = groups(&places);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].members, ["a", "b", "c"]);
        assert_eq!(found[0].modality, "pointing");
        assert_eq!(found[0].id(), "pointing:a");
        assert_eq!(found[0].widest, 5.0);
        assert_eq!(found[0].features.len(), 7);
        assert_eq!(found[0].features[0].name, COHORT_FEATURES[0]);
        assert_eq!(found[0].features[0].median, 12.5);
        assert_eq!(found[1].members, ["d", "e"]);
    }

    #[test]
    fn unmeasured_features_are_not_shared() {
        let u = COHORT_UNMEASURED;
        let mut a = place("a", 2, &[5000, u, 4000, 3000]);
        let mut b = place("b", 2, &[5100, u, 4000, 3000]);
        a.point.mask = 0b1101;
        b.point.mask = 0b1101;
        let found = groups(&[a, b]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].features.len(), 3);
        assert_eq!(found[0].widest, 1.0);
    }
}
