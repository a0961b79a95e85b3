//! A full run's catalog record on SQLite, alone: `record_scores` of N first scores (85,000 by
//! default, a 10 M-event survey's) into a survey whose lookup rows the collector's statistics
//! wrote first, as `scoring_run` records them, in a fresh catalog file each round; and the same
//! scores without reasons and cohort places, to show what those cost.
//!
//! ```sh
//! cargo bench -p catalog --bench record        # BENCH_SCORES=85000 BENCH_ROUNDS=5
//! ```
//!
//! `scoring_run`'s "record" phase is this call and the run's own waiting; benches/README.md
//! compares it with the statements alone, replayed on the same schema.

use std::time::Instant;

use catalog::prelude::*;
use catalog::{CohortPoint, NewScore, SessionDelta, SqliteCatalog};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A reference a session, in no order (as UUIDs arrive), the same every run.
fn references(n: usize) -> Vec<String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(85_000);
    (0..n)
        .map(|_| {
            let (a, b) = (rng.next_u64(), rng.next_u64());
            format!(
                "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                b >> 52,
                b & 0xffff_ffff_ffff
            )
        })
        .collect()
}

async fn round(references: &[String], rich: bool) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let catalog = SqliteCatalog::open(&dir.path().join("catalog.db"))
        .await
        .expect("open");
    let org = catalog.create_organization("Bench").await.expect("org");
    let survey = catalog
        .provision_survey(&org.id, "s", "S")
        .await
        .expect("survey");
    let deltas: Vec<SessionDelta> = references
        .iter()
        .map(|reference| SessionDelta {
            survey_id: survey.id.clone(),
            identifier: reference.clone(),
            reference: Some(reference.clone()),
            reference_explicit: false,
            event_count: 400,
            first_event_at: 1_000,
            last_event_at: 2_000,
            first_received_at: 1_100,
            last_received_at: 2_100,
        })
        .collect();
    catalog
        .apply_session_stats("bench", 1, 1, &deltas)
        .await
        .expect("stats");
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "bench", 600_000)
        .await
        .expect("claim")
        .expect("claimed");
    let scores: Vec<NewScore> = references
        .iter()
        .enumerate()
        .map(|(i, reference)| {
            let score = (i % 1000) as f64 / 10.0;
            // About 2.2 places a session (pointing and typing, most sessions), as in a run.
            let cohort = if rich {
                (0..=(i % 5).min(2) as u8)
                    .map(|modality| CohortPoint {
                        modality,
                        mask: 0x7f,
                        cell: (i as i64 * 7919 + i64::from(modality)) % 1_000_003,
                        values: vec![(i % 10_000) as u16; 7],
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let reasons = if rich {
                vec![
                    "movement_peak_time within people's range".to_owned(),
                    "key_flight_cv below people's range".to_owned(),
                    "press_centre_fraction above people's range".to_owned(),
                ]
            } else {
                Vec::new()
            };
            NewScore {
                reference: reference.clone(),
                human_score_percent: score,
                score_band: if score >= 70.0 {
                    "human-like"
                } else {
                    "review"
                }
                .to_owned(),
                scored_at: 1_700_000_000_000,
                model_version: "telltale-v4".to_owned(),
                run_id: run.id.clone(),
                cohort,
                reasons,
                cluster: None,
                events: 400,
            }
        })
        .collect();
    let started = Instant::now();
    let recorded = catalog
        .record_scores(&survey.id, &run.id, "bench", &scores)
        .await
        .expect("record");
    let seconds = started.elapsed().as_secs_f64();
    assert!(recorded, "the run's owner records");
    seconds
}

fn main() {
    let n = env_usize("BENCH_SCORES", 85_000);
    let rounds = env_usize("BENCH_ROUNDS", 5).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let references = references(n);
    let (mut rich, mut bare) = (Vec::new(), Vec::new());
    // Interleaved, so that the machine's drift falls on both.
    for _ in 0..rounds {
        rich.push(runtime.block_on(round(&references, true)));
        bare.push(runtime.block_on(round(&references, false)));
    }
    for (name, mut times) in [
        ("with reasons and cohort places", rich),
        ("without them", bare),
    ] {
        times.sort_by(f64::total_cmp);
        println!(
            "record of {n} first scores, {name}: median {:.3} s (min {:.3}, max {:.3}, {rounds} rounds)",
            times[times.len() / 2],
            times[0],
            times[times.len() - 1]
        );
    }
}
