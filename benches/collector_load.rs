//! Collector load generator: `cargo bench --bench collector_load`.
//!
//! Starts the real `telltale` binary (built with the bench profile) on a temporary data dir and
//! measures, in one run against one server:
//!
//! 1. `GET /status/health` at full speed (requests/s): the ceiling of this HTTP stack on this
//!    machine, with the load generator sharing the cores;
//! 2. `POST /event/{key}/{id}` with 20 pointer events per batch at full speed (requests/s and
//!    events/s), every 201 fsync'd in the write-ahead log;
//! 3. the ratio of (2) to (1);
//! 4. latency percentiles of an open-loop load at half of (2)'s rate, timed from each request's
//!    scheduled start so queueing is counted;
//! 5. peak server RSS during the load, from `/proc/<pid>/status`;
//! 6. Parquet bytes per event in the lake after the final flush;
//! 7. the collector's event rate as the server's own `/metrics` counts it over phase (2),
//!    scraped just before and just after, next to what the load generator measured.
//!
//! Environment: `BENCH_SECONDS` (per phase, default 10), `BENCH_CONNECTIONS` (default 64),
//! `BENCH_BATCHES_PER_SESSION` (default 50: each connection plays browser sessions of 50 batches,
//! 1000 events, one after another; 1 makes every batch a new session, the worst case for the
//! session statistics); `BENCH_SERVER_ARGS` (extra server flags) and `BENCH_TELLTALE_BIN` (another
//! build of the server to measure, e.g. the parent commit's release binary copied aside).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

mod common;
use common::load::{
    EVENTS_PER_BATCH, Rng, client_for_open, closed_loop, identifier, open_loop, percentile,
    pointer_batch,
};
use common::{env_number, provision, start_server, watch_rss};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env_number("BENCH_SECONDS", 10);
    let connections: usize = env_number("BENCH_CONNECTIONS", 64);
    let batches_per_session: u64 = env_number("BENCH_BATCHES_PER_SESSION", 50).max(1);
    let phase = Duration::from_secs(seconds);
    let data_dir = tempfile::tempdir()?;
    let mut server = start_server(data_dir.path(), &[])?;
    let pid = server.child.id();
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .pool_max_idle_per_host(connections)
        .build()?;

    let (_, tracking_key) = provision(&client, &server, "bench").await?;
    let event_base = Arc::new(format!("{}/event/{}", server.base, tracking_key));

    // Warm-up, so connection set-up is not measured.
    let health_url = Arc::new(format!("{}/status/health", server.base));
    let url = health_url.clone();
    closed_loop(
        &client,
        connections,
        Duration::from_secs(1),
        move |c, _, _, _| c.get(url.as_str()),
    )
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let rss = watch_rss(pid, stop.clone());

    let url = health_url.clone();
    let health = closed_loop(&client, connections, phase, move |c, _, _, _| {
        c.get(url.as_str())
    })
    .await;

    let serials: Arc<Vec<AtomicU64>> =
        Arc::new((0..connections).map(|_| AtomicU64::new(0)).collect());
    let (base, counters) = (event_base.clone(), serials.clone());
    let scraped_before = stored_events(&client, &server.base).await?;
    let collector = closed_loop(&client, connections, phase, move |c, worker, rng, state| {
        let n = counters[worker].fetch_add(1, Ordering::Relaxed);
        c.post(format!(
            "{}/{}",
            base,
            identifier(worker, n, batches_per_session)
        ))
        .header("content-type", "text/plain")
        .body(pointer_batch(rng, state))
    })
    .await;
    let scraped_after = stored_events(&client, &server.base).await?;

    // Open loop at half the measured collector rate; first a control against health at the same
    // rate (what the machine, the client and the HTTP stack cost), then the collector.
    let target_rate = (collector.rate() / 2.0).max(1.0);
    let url = health_url.clone();
    let (health_latencies, health_open_errors) =
        open_loop(target_rate, phase, move |_| client_for_open(&url, None)).await;
    let base = event_base.clone();
    let mut rng = Rng::new(42);
    let mut state = (960, 540, 1_763_800_000_000);
    let (latencies, open_errors) = open_loop(target_rate, phase, move |sent| {
        let url = format!("{}/{}", base, identifier(10_000, sent, batches_per_session));
        client_for_open(&url, Some(pointer_batch(&mut rng, &mut state)))
    })
    .await;

    stop.store(true, Ordering::Relaxed);
    let peak_rss_kib = rss.join().unwrap_or(0);

    // Final flush: SIGTERM, then weigh the lake.
    Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()?;
    let exited = server.child.wait()?;
    let acknowledged_events =
        (collector.requests + latencies.len() as u64) * EVENTS_PER_BATCH as u64;
    let mut parquet_bytes = 0;
    let mut parquet_files = 0;
    let mut stack = vec![data_dir.path().join("lake/events")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                stack.push(entry.path());
            } else if entry.path().extension().is_some_and(|ext| ext == "parquet") {
                parquet_bytes += entry.metadata()?.len();
                parquet_files += 1;
            }
        }
    }

    println!(
        "collector_load: {connections} connections, {seconds} s per phase, {EVENTS_PER_BATCH} pointer events per batch, {batches_per_session} batches per session"
    );
    println!(
        "  health      {:>10.0} req/s  ({} errors)",
        health.rate(),
        health.errors
    );
    println!(
        "  collector   {:>10.0} req/s  {:>10.0} events/s  ({} errors)",
        collector.rate(),
        collector.rate() * EVENTS_PER_BATCH as f64,
        collector.errors
    );
    println!(
        "  ratio collector/health  {:.3}  (target >= 0.5)",
        collector.rate() / health.rate()
    );
    println!(
        "  open loop at {:.0} req/s, health control: {} ok, {} errors; latency ms p50 {:.2}  p99 {:.2}  max {:.2}",
        target_rate,
        health_latencies.len(),
        health_open_errors,
        percentile(&health_latencies, 0.50),
        percentile(&health_latencies, 0.99),
        percentile(&health_latencies, 1.0)
    );
    println!(
        "  open loop at {:.0} req/s, collector:      {} ok, {} errors; latency ms p50 {:.2}  p99 {:.2}  max {:.2}  (target p99 <= 10)",
        target_rate,
        latencies.len(),
        open_errors,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    println!(
        "  peak server RSS {:.1} MiB  (target <= 256)",
        peak_rss_kib as f64 / 1024.0
    );
    println!(
        "  lake: {parquet_files} files, {parquet_bytes} bytes for {acknowledged_events} acknowledged events = {:.2} bytes/event  (target <= 8)",
        parquet_bytes as f64 / acknowledged_events.max(1) as f64
    );
    if let (Some(before), Some(after)) = (scraped_before, scraped_after) {
        let (scraped_events, scrape_seconds) =
            (after.0 - before.0, (after.1 - before.1).as_secs_f64());
        let measured = collector.rate() * EVENTS_PER_BATCH as f64;
        let scraped_rate = scraped_events / scrape_seconds;
        println!(
            "  /metrics over the collector phase: {scraped_events:.0} events stored in {scrape_seconds:.2} s = {scraped_rate:.0} events/s; the generator counted {} = {measured:.0} events/s; ratio {:.4}  (target within 5 %)",
            collector.requests * EVENTS_PER_BATCH as u64,
            scraped_rate / measured
        );
    } else {
        println!("  /metrics: not served by this binary");
    }
    println!("  server exit after SIGTERM: {exited}");
    Ok(())
}

/// `telltale_collector_events_total{outcome="stored"}` from the server's `/metrics`, and when
/// it was read; `None` from a binary without `/metrics` (an older build in an A/B).
async fn stored_events(
    client: &reqwest::Client,
    base: &str,
) -> anyhow::Result<Option<(f64, std::time::Instant)>> {
    let Some(text) = common::scrape_metrics(client, base).await? else {
        return Ok(None);
    };
    let read_at = std::time::Instant::now();
    let value = common::metric_value(&text, "telltale_collector_events_total{outcome=\"stored\"}")?;
    Ok(Some((value, read_at)))
}
