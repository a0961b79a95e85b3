//! The cohort step of a scoring run (`scorer::cohort::standings`) on a survey of 100,000
//! sessions: `cargo bench --workspace --bench cohort` (`--workspace`: `-p scorer` resolves
//! features alone and rebuilds DataFusion). Target: within 10 s on the project's machine.
//!
//! - **people and farms**: 99,000 people (feature vectors following two traits of their own and
//!   noise, so their axes correlate as a real cohort's do) and ten farms of 100 sessions.
//! - **one farm**: 100,000 sessions of one generator, every session alike with every other: the
//!   worst case the per-session bound on comparisons (`MAX_CHECKS`) is there for.
//!
//! Before measuring, each prints how many sessions it found clustered.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

use scorer::cohort;
use scorer::features::Features;
use scorer::model::Model;
use scorer::synthetic::{Rng, cohort_farm, cohort_people};

const SESSIONS: usize = 100_000;

fn bench(c: &mut Criterion) {
    let model = Model::default_model().expect("built-in model");
    let mut rng = Rng::new(11);
    let mut mixed = cohort_people(&model, SESSIONS - 1_000, &mut rng);
    for _ in 0..10 {
        mixed.extend(cohort_farm(&model, 100, 0.01, &mut rng));
    }
    let one_farm = cohort_farm(&model, SESSIONS, 0.01, &mut rng);
    let mut group = c.benchmark_group("cohort");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    for (name, sessions) in [("people and farms", &mixed), ("one farm", &one_farm)] {
        let refs: Vec<&Features> = sessions.iter().collect();
        let standings = cohort::standings(&model, &refs);
        let clustered = |range: std::ops::Range<usize>| {
            standings[range]
                .iter()
                .filter(|s| s.is_some_and(|s| s.clustered()))
                .count()
        };
        // The mix's farms are its last 1,000 sessions.
        let farms = if name == "one farm" { 0 } else { 1_000 };
        println!(
            "{name}: clustered {} of {} people, {} of {farms} farm sessions",
            clustered(0..refs.len() - farms),
            refs.len() - farms,
            clustered(refs.len() - farms..refs.len()),
        );
        group.bench_function(name, |b| {
            b.iter(|| black_box(cohort::standings(&model, black_box(&refs))))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
