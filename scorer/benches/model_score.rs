//! CPU of the model alone: `cargo bench -p scorer --bench model_score`.
//!
//! Scores 50,000 feature vectors with the built-in model (its regression trees and terms,
//! reasons included) and reports nanoseconds per session: the median of `BENCH_ROUNDS`
//! (default 9) rounds on one thread. The vectors are drawn at random around each feature's
//! scale, a fifth of the values unmeasured, so the trees' walks go both ways at every split
//! as they do on real sessions (where features::compute costs about as much again).

use std::hint::black_box;
use std::time::Instant;

use scorer::features::Features;
use scorer::model::Model;
use scorer::synthetic::Rng;

const SESSIONS: usize = 50_000;

fn main() {
    let model = Model::default_model().expect("the built-in model loads");
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(9);
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
    per_session.sort_by(f64::total_cmp);
    println!(
        "model_score: {} ({} trees): {:.0} ns per session (median of {rounds} rounds of {SESSIONS}; min {:.0}, max {:.0}); checksum {checksum:.2}",
        model.version,
        model.trees.len(),
        per_session[rounds / 2],
        per_session[0],
        per_session[rounds - 1],
    );
}
