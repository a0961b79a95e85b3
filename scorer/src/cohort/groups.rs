//! A survey's clusters as a reviewer sees them: the sessions a run found in a cluster, grouped
//! with those they are alike with (same modality and measured features, every feature within
//! [`RADIUS`](super::RADIUS)), so that "these 20 move alike" is one group on the review desk.
//!
//! The runs keep, per session, only whether it stood in a cluster and how many were alike
//! with it; the groups are drawn again from the clustered sessions' stored places when the
//! desk asks.

use std::collections::HashMap;

use catalog::{COHORT_UNMEASURED, ClusteredPlace, CohortPoint};

use super::survey::{RADIUS_UNITS, UNITS, cell_of, ranges_around};
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

/// The groups of `places` (each a clustered session's place in the modality it clustered in),
/// largest first. Each group is a **leader** and every session alike with it: leaders are taken
/// densest first (the most places in the leader's own grid box of the radius on every feature),
/// so a farm's group forms around its middle; groups (a lone session included) with members
/// alike with each other are then joined; a session alike with none of the others is left out.
///
/// Why not every session joined to everything alike with it (connected components): a chain of
/// alike pairs crosses a dense survey end to end, and finding it costs k^2 / 2 comparisons for a
/// tight farm of k (85,713 clustered sessions of the desk benchmark did not group within ten
/// minutes). Around leaders, each session is compared with the leaders near it and taken out
/// once placed. Groups with members alike with each other are then joined, so a farm wider than
/// one leader's reach stays one group (within a bounded number of comparisons).
///
/// The groups do not depend on the order of `places` (the catalog returns them unordered):
/// places are taken in order of reference wherever order decides.
pub fn groups(places: &[ClusteredPlace]) -> Vec<Group> {
    // Places by (modality, mask, cell): the grid the run's cohort reads (`survey::cell_of`),
    // computed again from the values rather than taken from the stored place.
    let mut by_reference: Vec<usize> = (0..places.len()).collect();
    by_reference.sort_by(|&a, &b| places[a].reference.cmp(&places[b].reference));
    let mut by_cell: HashMap<(u8, u32, i64), Vec<usize>> = HashMap::new();
    for &i in &by_reference {
        let point = &places[i].point;
        by_cell
            .entry((point.modality, point.mask, cell_of(&point.values)))
            .or_default()
            .push(i);
    }
    let boxes: Vec<(u8, u32, Vec<u16>)> = places.iter().map(|p| box_of(&p.point)).collect();
    let mut in_box: HashMap<&(u8, u32, Vec<u16>), usize> = HashMap::new();
    for key in &boxes {
        *in_box.entry(key).or_default() += 1;
    }
    let density: Vec<usize> = boxes.iter().map(|key| in_box[key]).collect();
    let mut order: Vec<usize> = (0..places.len()).collect();
    order.sort_by(|&a, &b| {
        density[b]
            .cmp(&density[a])
            .then_with(|| places[a].reference.cmp(&places[b].reference))
    });
    let mut group_of: Vec<Option<usize>> = vec![None; places.len()];
    let mut members_of: Vec<Vec<usize>> = Vec::new();
    for &leader in &order {
        if group_of[leader].is_some() {
            continue;
        }
        let number = members_of.len();
        group_of[leader] = Some(number);
        let mut members = vec![leader];
        let point = &places[leader].point;
        for (low, high) in ranges_around(point) {
            for cell in low..=high {
                let Some(list) = by_cell.get_mut(&(point.modality, point.mask, cell)) else {
                    continue;
                };
                list.retain(|&j| {
                    if group_of[j].is_some() {
                        return false;
                    }
                    if alike(&point.values, &places[j].point.values) {
                        group_of[j] = Some(number);
                        members.push(j);
                        return false;
                    }
                    true
                });
            }
        }
        members_of.push(members);
    }
    let members_of = join_touching(places, members_of);
    let mut groups: Vec<Group> = members_of
        .iter()
        .filter(|members| members.len() > 1)
        .map(|members| group(places, members))
        .collect();
    groups.sort_by(|a, b| {
        b.members
            .len()
            .cmp(&a.members.len())
            .then_with(|| a.members.cmp(&b.members))
    });
    groups
}

/// Comparisons of members [`join_touching`] makes at most: past them the groups stay as the
/// leaders drew them (bounded time for any survey; the desk benchmark's 85,710 clustered
/// sessions stay well under it).
const JOIN_BUDGET: u64 = 50_000_000;

/// Joins groups with a member alike with a member of the other: a farm wider than a leader's
/// reach stays one group, and a lone session alike with a member (not its leader) joins it.
/// Each member is within the radius of its leader, so only groups whose leaders (their first
/// members) are within three radii can touch; each pair stops at the first alike members.
fn join_touching(places: &[ClusteredPlace], members_of: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
    let mut live: Vec<usize> = (0..members_of.len()).collect();
    let first = |g: usize| {
        let point = &places[members_of[g][0]].point;
        (
            point.modality,
            point.mask,
            point.values.first().copied().unwrap_or(0),
        )
    };
    // A sweep along the leaders' first feature: past `reach` on it, no later group can touch.
    live.sort_by_key(|&g| first(g));
    let mut parent: Vec<usize> = (0..members_of.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let leader = |g: usize| &places[members_of[g][0]].point;
    let reach = 3 * RADIUS_UNITS;
    let mut spent = 0u64;
    'pairs: for (k, &a) in live.iter().enumerate() {
        for &b in &live[k + 1..] {
            let (fa, fb) = (first(a), first(b));
            if (fa.0, fa.1) != (fb.0, fb.1) || fb.2 - fa.2 > reach {
                break;
            }
            let (la, lb) = (leader(a), leader(b));
            if la
                .values
                .iter()
                .zip(&lb.values)
                .any(|(x, y)| x.abs_diff(*y) > reach)
            {
                continue;
            }
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            if ra == rb {
                continue;
            }
            if spent > JOIN_BUDGET {
                break 'pairs;
            }
            let touching = members_of[a].iter().any(|&i| {
                members_of[b].iter().any(|&j| {
                    spent += 1;
                    alike(&places[i].point.values, &places[j].point.values)
                })
            });
            if touching {
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    let mut joined: Vec<Vec<usize>> = vec![Vec::new(); members_of.len()];
    for g in live {
        let r = root(&mut parent, g);
        joined[r].extend(&members_of[g]);
    }
    joined
}

/// A place's box of the radius on every feature: places in one box are alike.
fn box_of(point: &CohortPoint) -> (u8, u32, Vec<u16>) {
    let cells = point
        .values
        .iter()
        .map(|v| v / (RADIUS_UNITS + 1))
        .collect();
    (point.modality, point.mask, cells)
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

    #[test]
    fn a_dense_farm_is_one_group_around_its_middle_and_fast() {
        // 20,000 sessions within 1.5 points of one place on every feature (a survey that is
        // mostly one farm): one group, found without comparing every pair.
        let mut places = Vec::new();
        let mut x = 12345u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 300) as u16
        };
        for i in 0..20_000 {
            let values: Vec<u16> = (0..7).map(|_| 5000 - 150 + next()).collect();
            places.push(place(&format!("s{i:05}"), 0, &values));
        }
        // A second farm far away, and a lone session near neither.
        for i in 0..30 {
            places.push(place(
                &format!("t{i:02}"),
                0,
                &[1000 + i, 1000, 1000, 1000, 1000, 1000, 1000],
            ));
        }
        places.push(place(
            "lone",
            0,
            &[9000, 9000, 9000, 9000, 9000, 9000, 9000],
        ));
        let started = std::time::Instant::now();
        let found = groups(&places);
        let took = started.elapsed();
        assert_eq!(
            found.len(),
            2,
            "{:?}",
            found.iter().map(|g| g.members.len()).collect::<Vec<_>>()
        );
        assert_eq!(found[0].members.len(), 20_000);
        assert_eq!(found[1].members.len(), 30);
        assert!(found[0].widest <= 3.0, "{}", found[0].widest);
        // Pairwise would be 2 * 10^8 comparisons; a debug build of this takes well under a second.
        assert!(took.as_secs_f64() < 5.0, "{took:?}");
    }

    #[test]
    fn a_session_alike_with_a_member_but_not_the_leader_joins_its_group() {
        let places = [
            // The densest box: the leader is one of these.
            place("a", 0, &[1000, 1000, 1000, 1000, 1000, 1000, 1000]),
            place("b", 0, &[1010, 1000, 1000, 1000, 1000, 1000, 1000]),
            place("c", 0, &[1020, 1000, 1000, 1000, 1000, 1000, 1000]),
            // Within the radius of c (280 apart) but not of a (300 + 20 apart).
            place("d", 0, &[1320, 1000, 1000, 1000, 1000, 1000, 1000]),
        ];
        let found = groups(&places);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].members, ["a", "b", "c", "d"]);
    }

    /// `n` pointing places `step` apart on the first feature, named `s00`, `s01`, ...
    fn line(n: u16, step: u16) -> Vec<ClusteredPlace> {
        (0..n)
            .map(|i| {
                place(
                    &format!("s{i:02}"),
                    0,
                    &[1000 + step * i, 1000, 1000, 1000, 1000, 1000, 1000],
                )
            })
            .collect()
    }

    #[test]
    fn the_groups_do_not_depend_on_the_order_places_come_in() {
        let mut places = line(40, 25);
        let forward = groups(&places);
        places.reverse();
        assert_eq!(groups(&places), forward);
        places.swap(3, 17);
        assert_eq!(groups(&places), forward);
    }

    #[test]
    fn a_farm_wider_than_one_leader_reaches_stays_one_group() {
        // A line of sessions 200 apart on the first feature: each alike with its neighbours,
        // the ends 1,800 apart. Leaders take what is within the radius of them; the groups
        // they leave touch each other and are joined.
        let places = line(10, 200);
        let found = groups(&places);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].members.len(), 10);
        assert_eq!(found[0].widest, 18.0);
    }
}
