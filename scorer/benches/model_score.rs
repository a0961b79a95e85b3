//! CPU of a session's scoring, the parts after the scan: `cargo bench --workspace --bench
//! model_score` (`--workspace`: `-p scorer` resolves features alone and rebuilds DataFusion).
//!
//! - **features**: `SessionTrace::finish` (already in order, as the scan mostly delivers them)
//!   and `features::compute` on 20,000 generated sessions of one question each, a tenth naive and a tenth stealthed automation: the sessions of the
//!   scoring_run benchmark.
//! - **model**: the built-in model (its regression trees and terms, reasons included) on 50,000
//!   feature vectors drawn at random around each feature's scale, a fifth of the values
//!   unmeasured, so the trees' walks go both ways at every split as they do on real sessions.
//!
//! Each reports nanoseconds per session: the median of `BENCH_ROUNDS` (default 9) rounds on one
//! thread, with a checksum that must not change when the code is only made faster.

use std::hint::black_box;
use std::time::Instant;

use scorer::features::{self, Features};
use scorer::model::Model;
use scorer::synthetic::{self, Behaviour, Rng};
use scorer::trace::SessionTrace;

const SESSIONS: usize = 50_000;
const TRACES: usize = 20_000;

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(9);
    features_stage(rounds);
    model_stage(rounds);
}

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

fn features_stage(rounds: usize) {
    let traces = traces();
    let events: usize = traces.iter().map(|trace| trace.events.len()).sum();
    let mut per_session = Vec::with_capacity(rounds);
    // FNV-1a over every value's bits: any change to any feature of any session shows.
    let mut checksum: u64 = 0xcbf2_9ce4_8422_2325;
    for _ in 0..rounds {
        let mut batch = traces.clone();
        let mut computed = Vec::with_capacity(TRACES);
        let started = Instant::now();
        for trace in &mut batch {
            trace.finish();
            computed.push(features::compute(black_box(trace)));
        }
        per_session.push(started.elapsed().as_nanos() as f64 / TRACES as f64);
        for features in &computed {
            for value in features.values() {
                checksum = (checksum ^ value.to_bits()).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    report(
        &format!(
            "features: {:.0} events per session",
            events as f64 / TRACES as f64
        ),
        TRACES,
        per_session,
        &format!("{checksum:016x}"),
    );
}

fn model_stage(rounds: usize) {
    let model = Model::default_model().expect("the built-in model loads");
    let mut rng = Rng::new(7);
    let sessions: Vec<Features> = (0..SESSIONS)
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
        .collect();
    let mut per_session = Vec::with_capacity(rounds);
    let mut checksum = 0.0;
    for _ in 0..rounds {
        let started = Instant::now();
        for features in &sessions {
            let score = model.score(black_box(features));
            checksum += score.human_score_percent + score.reasons.len() as f64;
        }
        per_session.push(started.elapsed().as_nanos() as f64 / SESSIONS as f64);
    }
    report(
        &format!("model: {} ({} trees)", model.version, model.trees.len()),
        SESSIONS,
        per_session,
        &format!("{checksum:.2}"),
    );
}

fn report(what: &str, sessions: usize, mut per_session: Vec<f64>, checksum: &str) {
    per_session.sort_by(f64::total_cmp);
    let rounds = per_session.len();
    println!(
        "model_score {what}: {:.0} ns per session (median of {rounds} rounds of {sessions}; min {:.0}, max {:.0}); checksum {checksum}",
        per_session[rounds / 2],
        per_session[0],
        per_session[rounds - 1],
    );
}
