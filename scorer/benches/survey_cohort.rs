//! The cohort of an incremental run on a big survey (issue 56): `BENCH_SURVEY_SESSIONS`
//! (default 1,000,000) sessions already scored, their places stored in a SQLite catalog, and a
//! run of `BENCH_NEW_SESSIONS` (default 1,000) new ones: 990 people and a farm of 10 whose 30
//! earlier sessions are stored. Times what the run's cohort costs: reading the survey's spread
//! (`cohort_bins`), probing the cells around the new sessions (`probe_cohort`) and standing
//! them (`Cohort::stand`), five times; then how many sessions the stand named and would score
//! again.
//!
//! `cargo bench --workspace --bench survey_cohort` (`BENCH_SURVEY_SESSIONS=100000` for a quick
//! look). Target: the cohort's part of "1,000 new sessions in a 1,000,000-session survey within
//! 2 s"; what the scan and the catalog's plan cost on top is `scoring_run`'s to measure.
//!
//! `BENCH_MODEL=scorer/models/telltale-v7.json` (a model file with people, `cohort_reference`)
//! with `BENCH_SURVEY_SESSIONS=10000` times the people test where it is most costly: a survey
//! at `PEOPLE_LIMIT`, where a run reads each new session's group whole.

use std::time::Instant;

use catalog::{NewScore, Organizations, Runs, SqliteCatalog, Surveys};
use scorer::cohort::survey::{Cohort, Entrant, People, Placer};
use scorer::model::Model;
use scorer::synthetic::{Rng, cohort_farm, cohort_people};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let Err(error) = runtime.block_on(bench()) {
        eprintln!("survey_cohort: {error}");
        std::process::exit(1);
    }
}

async fn bench() -> Result<(), Box<dyn std::error::Error>> {
    let stored_sessions = env_number("BENCH_SURVEY_SESSIONS", 1_000_000);
    let new_sessions = env_number("BENCH_NEW_SESSIONS", 1_000);
    let model = match std::env::var_os("BENCH_MODEL") {
        Some(path) => Model::from_json(&std::fs::read_to_string(path)?)?,
        None => Model::default_model()?,
    };
    println!(
        "model {}; people test {}",
        model.version,
        if People::new(&model).is_some() {
            "made where a modality has at most 10,000 places"
        } else {
            "not made (no people in the model)"
        }
    );
    let placer = Placer::new(&model);
    let mut rng = Rng::new(56);
    let dir = std::env::temp_dir().join(format!("survey-cohort-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let catalog = SqliteCatalog::open(&dir.join("catalog.db")).await?;
    let org = catalog.create_organization("bench").await?;
    let survey = catalog.provision_survey(&org.id, "s", "S").await?;
    let (run, _) = catalog.start_scoring_run(&survey.id, false).await?;
    catalog
        .claim_scoring_run(&run.id, "bench", 3_600_000)
        .await?
        .ok_or("run not claimed")?;

    // The survey so far: people, and the farm's first 30 sessions.
    let farm = cohort_farm(&model, 40, 0.01, &mut rng);
    let started = Instant::now();
    let mut stored = 0usize;
    while stored < stored_sessions {
        let n = 20_000.min(stored_sessions - stored);
        let mut batch = cohort_people(&model, n, &mut rng);
        if stored == 0 {
            batch.truncate(n.saturating_sub(30));
            batch.extend(farm[..30].iter().cloned());
        }
        let scores: Vec<NewScore> = batch
            .iter()
            .enumerate()
            .map(|(i, features)| NewScore {
                reference: format!("stored-{}", stored + i),
                human_score_percent: 90.0,
                score_band: "human-like".to_owned(),
                scored_at: 1,
                model_version: model.version.clone(),
                run_id: run.id.clone(),
                cohort: placer.places(features),
                reasons: Vec::new(),
                cluster: None,
                events: features.event_count.max(0.0) as u64,
            })
            .collect();
        catalog
            .record_scores(&survey.id, &run.id, "bench", &scores)
            .await?;
        stored += batch.len();
    }
    println!(
        "stored {stored} sessions' places in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut arrivals = cohort_people(&model, new_sessions - 10, &mut rng);
    arrivals.extend(farm[30..].iter().cloned());
    let entrants: Vec<Entrant> = arrivals
        .iter()
        .enumerate()
        .map(|(i, features)| Entrant {
            reference: format!("new-{i}"),
            places: placer.places(features),
            counted: false,
        })
        .collect();
    let mut timings = Vec::new();
    for round in 0..5 {
        let started = Instant::now();
        let bins = catalog.cohort_bins(&survey.id).await?;
        let read_bins = started.elapsed();
        // As a run builds it (`run::pipeline`): the people test where the model has people.
        let mut cohort = Cohort::new(&bins).with_people(People::new(&model));
        let probes = cohort.probes(entrants.iter().flat_map(|e| &e.places));
        let found = catalog.probe_cohort(&survey.id, &probes).await?;
        let probed = started.elapsed();
        let stood = cohort.stand(&entrants, &found);
        let total = started.elapsed();
        timings.push(total.as_secs_f64());
        let named = stood
            .standings
            .iter()
            .map(|s| s.is_some_and(|s| s.clustered()))
            .collect::<Vec<_>>();
        println!(
            "round {round}: bins {} rows {:.0} ms, {} probes found {} places {:.0} ms, stand {:.0} ms; total {:.0} ms; named {} of {} people, {} of 10 farm; {} stored to score again",
            bins.len(),
            read_bins.as_secs_f64() * 1e3,
            probes.len(),
            found.len(),
            (probed - read_bins).as_secs_f64() * 1e3,
            (total - probed).as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3,
            named[..new_sessions - 10].iter().filter(|n| **n).count(),
            new_sessions - 10,
            named[new_sessions - 10..].iter().filter(|n| **n).count(),
            stood.rescore.len(),
        );
    }
    timings.sort_by(f64::total_cmp);
    println!(
        "cohort of {new_sessions} new sessions among {stored}: median {:.0} ms, max {:.0} ms (target: within the run's 2 s)",
        timings[timings.len() / 2] * 1e3,
        timings[timings.len() - 1] * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
