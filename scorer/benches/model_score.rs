//! CPU of a session's scoring, the parts after the scan: `cargo bench --workspace --bench
//! model_score` (`--workspace`: `-p scorer` resolves features alone and rebuilds DataFusion).
//!
//! - **features**: `SessionTrace::finish` (already in order, as the scan mostly delivers them)
//!   and `features::compute`, one session per iteration, cycling through 20,000 generated
//!   sessions of one question each, a tenth naive and a tenth stealthed automation: the
//!   sessions of the scoring_run benchmark.
//! - **model**: the built-in model (its regression trees and terms, reasons included) on one
//!   of 50,000 feature vectors per iteration, drawn at random around each feature's scale, a
//!   fifth of the values unmeasured, so the trees' walks go both ways at every split as they
//!   do on real sessions.
//!
//! Criterion reports the time per session. Before measuring, each prints a checksum of every
//! output, which must not change when the code is only made faster.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sha2::Digest;

use scorer::features::{self, Features};
use scorer::model::Model;
use scorer::synthetic::{self, Behaviour, Rng};
use scorer::trace::SessionTrace;

const SESSIONS: usize = 50_000;
const TRACES: usize = 20_000;

/// The scoring_run benchmark's mix: index % 10 is 0 for naive automation, 1 for stealthed.
fn traces() -> Vec<SessionTrace> {
    (0..TRACES as u64)
        .map(|index| {
            let behaviour = match index % 10 {
                0 => Behaviour::NaiveBot,
                1 => Behaviour::StealthBot,
                _ => Behaviour::Human,
            };
            let events = synthetic::session(behaviour, "s", "r", 1_763_800_000_000, 1, index);
            synthetic::trace(&events).expect("generated events parse")
        })
        .collect()
}

fn vectors() -> Vec<Features> {
    let mut rng = Rng::new(7);
    (0..SESSIONS)
        .map(|_| {
            let values: Vec<f64> = Features::NAMES
                .iter()
                .map(|_| {
                    if rng.unit() < 0.2 {
                        f64::NAN
                    } else {
                        rng.lognormal(1.0, 2.0) - 0.5
                    }
                })
                .collect();
            Features::from_values(&values).expect("one value per feature")
        })
        .collect()
}

fn features_stage(c: &mut Criterion) {
    let traces = traces();
    // SHA-256 over every value's bits: any change to any feature of any session shows.
    let mut checksum = sha2::Sha256::new();
    let mut events = 0;
    for trace in &traces {
        let mut trace = trace.clone();
        trace.finish();
        events += trace.events.len();
        for value in features::compute(&trace).values() {
            checksum.update(value.to_bits().to_le_bytes());
        }
    }
    println!(
        "model_score features: {TRACES} sessions, {:.0} events each; checksum {}",
        events as f64 / TRACES as f64,
        hex::encode(&checksum.finalize()[..8])
    );
    let mut next = 0;
    c.bench_function("features", |b| {
        b.iter_batched(
            || {
                next = (next + 1) % TRACES;
                traces[next].clone()
            },
            |mut trace| {
                trace.finish();
                features::compute(black_box(&trace))
            },
            BatchSize::SmallInput,
        )
    });
}

fn model_stage(c: &mut Criterion) {
    let model = Model::default_model().expect("the built-in model loads");
    let sessions = vectors();
    let mut checksum = 0.0;
    for features in &sessions {
        let score = model.score(features);
        checksum += score.human_score_percent + score.reasons.len() as f64;
    }
    println!(
        "model_score model: {} ({} trees) on {SESSIONS} vectors; checksum {checksum:.2}",
        model.version,
        model.trees.len()
    );
    let mut next = 0;
    c.bench_function("model", |b| {
        b.iter(|| {
            next = (next + 1) % SESSIONS;
            model.score(black_box(&sessions[next]))
        })
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8))
}

criterion_group! {
    name = model_score;
    config = config();
    targets = features_stage, model_stage
}
criterion_main!(model_score);
