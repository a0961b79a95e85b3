//! Survey desk benchmark: `cargo bench --bench desk`.
//!
//! Against the real release `telltale serve` on a temporary data dir:
//!
//! 1. loads a survey of `BENCH_DESK_SESSIONS` (default 100,000) generated sessions through the
//!    collector (80 % human-like, 20 % automation, about 100-300 events each) and scores it;
//! 2. times `BENCH_DESK_REQUESTS` (default 200) requests of each of: the survey's summary, the
//!    first page of its list (100 rows), a page of the largest cluster's members, and the
//!    summary with the first page fetched side by side as the desk page does: p50, p99, max;
//! 3. times 3 exports of the whole list as CSV.
//!
//! Target (issue 57): the summary and the first page within 300 ms p99 at 100,000 sessions.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

mod common;
use common::load::percentile;
use common::survey::{load_survey, score};
use common::{env_number, provision, start_server};

async fn timed_get(
    client: &reqwest::Client,
    url: &str,
    key: &str,
) -> anyhow::Result<(Duration, bytes::Bytes)> {
    let started = Instant::now();
    let reply = client.get(url).bearer_auth(key).send().await?;
    let status = reply.status();
    let body = reply.bytes().await?;
    let took = started.elapsed();
    if !status.is_success() {
        bail!(
            "{url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok((took, body))
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "  {name}: p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  ({} requests)",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        percentile(&times, 1.0),
        times.len()
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sessions = env_number::<u64>("BENCH_DESK_SESSIONS", 100_000);
    let requests = env_number::<usize>("BENCH_DESK_REQUESTS", 200);
    let connections = env_number::<usize>("BENCH_CONNECTIONS", 16);
    let data_dir = tempfile::tempdir()?;
    let server = start_server(data_dir.path(), &["--api-rate-per-minute", "1000000"])?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .build()?;
    let (survey, tracking_key) = provision(&client, &server, "bench-desk").await?;
    let loading = Instant::now();
    let (loaded, events, _) = load_survey(
        &client,
        &server,
        &tracking_key,
        connections,
        0,
        false,
        move |n, _| n >= sessions,
    )
    .await?;
    println!(
        "desk: {loaded} sessions ({events} events) loaded in {:.1} s",
        loading.elapsed().as_secs_f64()
    );
    let (run, took) = score(&client, &server, &survey).await?;
    println!("  scored {} in {:.1} s", run["scored"], took.as_secs_f64());
    let base = format!("{}/integrations/v1/surveys/{survey}", server.base);
    // The first summary after the run draws the survey's clusters; later ones reuse them
    // until a run or an erasure changes the survey (src/http/desk/clusters.rs).
    let (first, body) = timed_get(&client, &format!("{base}/summary"), &server.key).await?;
    println!(
        "  first summary after the run (draws the clusters): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    let summary: Value = serde_json::from_slice(&body)?;
    let clusters = summary["data"]["clusters"].as_array().context("clusters")?;
    println!(
        "  summary: {} scored, bands {}, {} clusters holding {} sessions",
        summary["data"]["scored"],
        summary["data"]["bands"],
        clusters.len(),
        clusters
            .iter()
            .map(|c| c["size"].as_u64().unwrap_or(0))
            .sum::<u64>()
    );

    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        times.push(
            timed_get(&client, &format!("{base}/summary"), &server.key)
                .await?
                .0,
        );
    }
    report("summary", times);
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        times.push(
            timed_get(
                &client,
                &format!("{base}/summary/sessions?limit=100"),
                &server.key,
            )
            .await?
            .0,
        );
    }
    report("first page of 100", times);
    if let Some(largest) = clusters.first().and_then(|c| c["id"].as_str()) {
        let url = format!(
            "{base}/summary/sessions?limit=100&cluster={}",
            largest.replace(':', "%3A")
        );
        let mut times = Vec::with_capacity(requests);
        for _ in 0..requests {
            times.push(timed_get(&client, &url, &server.key).await?.0);
        }
        report("the largest cluster's first page", times);
    }
    // The desk page opens with both at once.
    let (summary_url, page_url) = (
        format!("{base}/summary"),
        format!("{base}/summary/sessions?limit=100"),
    );
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        let (summary, page) = tokio::join!(
            timed_get(&client, &summary_url, &server.key),
            timed_get(&client, &page_url, &server.key),
        );
        summary?;
        page?;
        times.push(started.elapsed());
    }
    report("summary and first page together (target p99 <= 300)", times);
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..3 {
        let (took, body) = timed_get(
            &client,
            &format!("{base}/summary/sessions.csv"),
            &server.key,
        )
        .await?;
        bytes = body.len();
        times.push(took);
    }
    report(&format!("CSV export ({:.1} MB)", bytes as f64 / 1e6), times);
    Ok(())
}
