use super::place::mask_of;
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
