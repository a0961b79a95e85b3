//! Scale-out benchmark: `cargo bench --bench scale_out`.
//!
//! Measures, in one run and one after the other, two configurations of the real `telltale`
//! binary (the bench profile's build), each a fresh server:
//!
//! - `embedded`: the default, a SQLite catalog and a lake folder under the data dir;
//! - `postgres+s3`: a PostgreSQL catalog (a fresh database on `TELLTALE_TEST_POSTGRES_URL`,
//!   default `postgres://postgres@127.0.0.1:5432/test`) and an S3 lake in a bucket of a local
//!   moto server (`pip install 'moto[server]'`).
//!
//! For each: `GET /status/health` at full speed (the HTTP ceiling), the collector at full speed
//! (20 pointer events per batch, every 201 durable), their ratio, and then the latency of
//! lookups of 100 references (64 captured sessions, 36 unknown) sent back to back by one client,
//! with the integration API's limit counted as configured (in process for SQLite, in the
//! catalog for PostgreSQL).
//!
//! Environment: `BENCH_SECONDS` (per phase, default 10), `BENCH_CONNECTIONS` (default 64).

use std::time::{Duration, Instant};

mod common;
use common::load::{EVENTS_PER_BATCH, closed_loop, identifier, percentile, pointer_batch};
use common::{env_number, provision, start_server_with_env};

#[path = "../tests/it/stores.rs"]
#[allow(dead_code, unreachable_pub)]
mod stores;

/// Each connection's first session is looked up; sessions are this many batches long.
const BATCHES_PER_SESSION: u64 = 50;
const REFERENCES_PER_LOOKUP: usize = 100;

struct Measured {
    name: &'static str,
    health_rate: f64,
    collector_rate: f64,
    collector_errors: u64,
    lookups: Vec<Duration>,
    lookup_errors: u64,
}

async fn measure(
    name: &'static str,
    extra: &[&str],
    env: &[(String, String)],
    connections: usize,
    phase: Duration,
) -> anyhow::Result<Measured> {
    let data_dir = tempfile::tempdir()?;
    let mut args = vec!["--api-rate-per-minute", "100000000"];
    args.extend_from_slice(extra);
    let server = start_server_with_env(data_dir.path(), &args, env)?;
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .pool_max_idle_per_host(connections)
        .build()?;
    let (survey_id, tracking_key) = provision(&client, &server, "bench").await?;

    let health_url = format!("{}/status/health", server.base);
    let url = health_url.clone();
    closed_loop(
        &client,
        connections,
        Duration::from_secs(1),
        move |c, _, _, _| c.get(url.as_str()),
    )
    .await;
    let url = health_url.clone();
    let health = closed_loop(&client, connections, phase, move |c, _, _, _| {
        c.get(url.as_str())
    })
    .await;

    let serials: std::sync::Arc<Vec<std::sync::atomic::AtomicU64>> = std::sync::Arc::new(
        (0..connections)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    );
    let base = format!("{}/event/{tracking_key}", server.base);
    let counters = serials.clone();
    let collector = closed_loop(&client, connections, phase, move |c, worker, rng, state| {
        let n = counters[worker].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        c.post(format!(
            "{base}/{}",
            identifier(worker, n, BATCHES_PER_SESSION)
        ))
        .header("content-type", "text/plain")
        .body(pointer_batch(rng, state))
    })
    .await;

    // Lookup statistics include every batch acknowledged more than 1 s earlier.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut references: Vec<String> = (0..connections.min(64))
        .map(|worker| identifier(worker, 0, BATCHES_PER_SESSION))
        .collect();
    while references.len() < REFERENCES_PER_LOOKUP {
        references.push(format!("ffffffff-0000-4000-8000-{:012x}", references.len()));
    }
    let body = serde_json::json!({ "externalReferences": references }).to_string();
    let lookup_url = format!(
        "{}/integrations/v1/surveys/{survey_id}/sessions/lookup",
        server.base
    );
    let mut lookups = Vec::new();
    let mut lookup_errors = 0;
    let started = Instant::now();
    while started.elapsed() < phase {
        let sent = Instant::now();
        let reply = client
            .post(&lookup_url)
            .bearer_auth(&server.key)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        match reply {
            Ok(response) if response.status().is_success() => {
                let rows: serde_json::Value = response.json().await?;
                let captured = rows["data"].as_array().map_or(0, |rows| {
                    rows.iter().filter(|r| r["captured"] == true).count()
                });
                anyhow::ensure!(
                    captured == connections.min(64),
                    "{name}: lookup found {captured} captured sessions"
                );
                lookups.push(sent.elapsed());
            }
            _ => lookup_errors += 1,
        }
    }
    lookups.sort();
    drop(server);
    Ok(Measured {
        name,
        health_rate: health.rate(),
        collector_rate: collector.rate(),
        collector_errors: collector.errors,
        lookups,
        lookup_errors,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env_number("BENCH_SECONDS", 10);
    let connections: usize = env_number("BENCH_CONNECTIONS", 64);
    let phase = Duration::from_secs(seconds);

    let embedded = measure("embedded", &[], &[], connections, phase).await?;
    let scratch = tempfile::tempdir()?;
    let stores = stores::ScaleOutStores::create(scratch.path()).await;
    let lake_url = stores.lake_url();
    let scale_out = measure(
        "postgres+s3",
        &["--catalog", &stores.catalog_url, "--lake", &lake_url],
        &stores.env(),
        connections,
        phase,
    )
    .await?;

    println!(
        "scale_out: {connections} connections, {seconds} s per phase, {EVENTS_PER_BATCH} pointer \
         events per batch; lookups of {REFERENCES_PER_LOOKUP} references, one client"
    );
    println!(
        "{:<12} {:>10} {:>12} {:>12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "config",
        "health/s",
        "collector/s",
        "events/s",
        "ratio",
        "look p50",
        "look p90",
        "look p99",
        "look max",
        "lookups"
    );
    for measured in [&embedded, &scale_out] {
        println!(
            "{:<12} {:>10.0} {:>12.0} {:>12.0} {:>7.2} {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8}",
            measured.name,
            measured.health_rate,
            measured.collector_rate,
            measured.collector_rate * EVENTS_PER_BATCH as f64,
            measured.collector_rate / measured.health_rate,
            percentile(&measured.lookups, 0.50),
            percentile(&measured.lookups, 0.90),
            percentile(&measured.lookups, 0.99),
            percentile(&measured.lookups, 1.0),
            measured.lookups.len(),
        );
        if measured.collector_errors + measured.lookup_errors > 0 {
            println!(
                "{:<12} errors: collector {}, lookup {}",
                "", measured.collector_errors, measured.lookup_errors
            );
        }
    }
    println!(
        "postgres+s3 / embedded: collector {:.2}x, lookup p50 {:.2}x, lookup p99 {:.2}x",
        scale_out.collector_rate / embedded.collector_rate,
        percentile(&scale_out.lookups, 0.50) / percentile(&embedded.lookups, 0.50),
        percentile(&scale_out.lookups, 0.99) / percentile(&embedded.lookups, 0.99),
    );
    Ok(())
}
