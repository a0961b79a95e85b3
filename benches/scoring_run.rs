//! Scoring-run benchmark: `cargo bench --bench scoring_run`.
//!
//! Against the real release `telltale serve` on a temporary data dir:
//!
//! 1. loads a survey of `BENCH_EVENTS` (default 10 million) events through the collector:
//!    synthetic sessions (80 % human-like, 20 % automation) of about 100-300 events each;
//! 2. starts a scoring run and polls it to the end: end-to-end events/s and sessions/s, from the
//!    start request to `completed` (this includes flushing the log, reading the lake, features,
//!    model, writing `features/` and `scores/` and the catalog), and the server's peak RSS
//!    during the run;
//! 3. times DuckDB (Python package, 2 threads) computing plain per-session aggregates of
//!    inter-event time (count, min, max, mean, standard deviation) over the same Parquet files,
//!    and reports our time / DuckDB's;
//! 4. times `BENCH_EVIDENCE` (default 200) evidence requests for one 10-minute recording
//!    (a synthetic person, its batches sent throughout the load, so its rows sit in many flush
//!    files), before and after the compaction below: p50 and p99 latency;
//! 5. erases one session (`DELETE .../sessions/by-reference/{reference}`, polled to
//!    `completed`) from the flushed survey, compacts the survey with `telltale compact`
//!    (events/s), and erases another session from the compacted survey: end-to-end times;
//! 6. loads a second survey of `BENCH_LOOKUP_SESSIONS` (default 1 million) small sessions,
//!    scores it, and times `BENCH_LOOKUPS` (default 2000) lookups of 100 random references:
//!    p50 and p99 latency;
//! 7. loads `BENCH_NEW_SESSIONS` (default 1000) full-size sessions into that survey and times
//!    the run (not forced) that scores them, cohort included, then a run with nothing new.
//!
//! Environment: `BENCH_EVENTS`, `BENCH_EVIDENCE`, `BENCH_LOOKUP_SESSIONS`, `BENCH_LOOKUPS`,
//! `BENCH_NEW_SESSIONS`,
//! `BENCH_CONNECTIONS`
//! (default 16), `BENCH_SERVER_ARGS` (extra `serve` flags).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use scorer::synthetic::{Behaviour, Rng, session};
use serde_json::{Value, json};

mod common;
use common::load::percentile;
use common::survey::{load_survey, score, send_batch};
use common::{
    Server, env_number, metric_value, provision, scrape_metrics, start_server, watch_rss,
};

/// Deletes a session and polls the deletion (every 20 ms) until it completes; the time from
/// the request to the first `completed` answer.
async fn erase(
    client: &reqwest::Client,
    server: &Server,
    survey: &str,
    reference: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let base = format!("{}/integrations/v1/surveys/{survey}", server.base);
    client
        .delete(format!("{base}/sessions/by-reference/{reference}"))
        .bearer_auth(&server.key)
        .send()
        .await?
        .error_for_status()?;
    loop {
        let deletion: Value = client
            .get(format!("{base}/session-deletions/{reference}"))
            .bearer_auth(&server.key)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        match deletion["data"]["status"].as_str() {
            Some("completed") => return Ok(started.elapsed()),
            Some("pending") => tokio::time::sleep(Duration::from_millis(20)).await,
            _ => bail!("the deletion did not complete: {deletion}"),
        }
    }
}

/// Every file under `dir`, recursively, with its size.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(_) => files.push((entry.path(), entry.metadata().map_or(0, |m| m.len()))),
                Err(_) => {}
            }
        }
    }
    files
}

/// Parquet data files under `dir`: live ones and, with Delta tables, the ones a compaction
/// replaced that the retention keeps for older snapshots; not the log's checkpoints.
fn count_files(dir: &std::path::Path) -> usize {
    files_under(dir)
        .iter()
        .filter(|(path, _)| {
            path.extension().is_some_and(|ext| ext == "parquet")
                && !path
                    .components()
                    .any(|part| part.as_os_str() == "_delta_log")
        })
        .count()
}

/// Parquet data files of the lake's table `kind`.
fn files_in(data_dir: &tempfile::TempDir, kind: &str) -> usize {
    count_files(&data_dir.path().join("lake").join(kind))
}

/// Bytes of the files under `dir`.
fn folder_bytes(dir: &std::path::Path) -> u64 {
    files_under(dir).iter().map(|(_, size)| size).sum()
}

/// Waits until nothing new has reached the lake for 3 s (the flusher has caught up).
async fn wait_for_quiet_lake(dir: &std::path::Path) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last = folder_bytes(dir);
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = folder_bytes(dir);
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the lake kept changing for 10 minutes");
        }
    }
    Ok(started.elapsed())
}

/// DuckDB's time for plain per-session aggregates over `glob`, measured inside Python.
fn duckdb_seconds(glob: &str) -> anyhow::Result<(f64, u64)> {
    let script = format!(
        r#"
import duckdb, time
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("SET enable_progress_bar = false")
query = """
SELECT session_id, count(*) AS n, min(dt), max(dt), avg(dt), stddev_samp(dt)
FROM (SELECT session_id,
             epoch_ms(event_time) - lag(epoch_ms(event_time))
                 OVER (PARTITION BY session_id ORDER BY event_time) AS dt
      FROM read_parquet('{glob}'))
GROUP BY session_id
"""
start = time.perf_counter()
rows = con.execute(query).fetchall()
print(time.perf_counter() - start, len(rows))
"#
    );
    let output = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .context("running python3 for DuckDB")?;
    if !output.status.success() {
        bail!("DuckDB failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8(output.stdout)?;
    let mut parts = text
        .lines()
        .last()
        .context("no output from DuckDB")?
        .split_whitespace();
    let seconds: f64 = parts.next().context("seconds")?.parse()?;
    let sessions: u64 = parts.next().context("rows")?.parse()?;
    Ok((seconds, sessions))
}

/// The reference of the long recording the evidence is timed on (not a generated one's form).
const LONG_REFERENCE: &str = "10a1e5c0-0000-4000-8000-000000000600";

/// A person's recording of at least ten minutes (questions added until its last event is
/// 600 s after its first): the events' JSON texts.
fn long_recording(t0: i64) -> Vec<String> {
    let timestamp = |event: &str| -> i64 {
        event
            .split("\"timestamp\":")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|number| number.parse().ok())
            .unwrap_or(t0)
    };
    let mut questions = 10;
    loop {
        let events = session(
            Behaviour::Human,
            LONG_REFERENCE,
            LONG_REFERENCE,
            t0,
            questions,
            600,
        );
        if events
            .last()
            .is_some_and(|last| timestamp(last) - t0 >= 600_000)
        {
            return events;
        }
        questions += 10;
    }
}

/// Sends `events` as one session in batches of 50, one every `every`, as the embed sends a
/// long recording while other respondents' batches arrive.
async fn send_slowly(
    client: reqwest::Client,
    url: String,
    events: Vec<String>,
    every: Duration,
) -> anyhow::Result<()> {
    for chunk in events.chunks(50) {
        send_batch(&client, &url, chunk).await?;
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// Times `count` evidence requests for [`LONG_REFERENCE`]; prints p50, p99 and max.
async fn time_evidence(
    client: &reqwest::Client,
    server: &Server,
    survey: &str,
    count: u64,
    when: &str,
) -> anyhow::Result<()> {
    let url = format!(
        "{}/integrations/v1/surveys/{survey}/sessions/by-reference/{LONG_REFERENCE}/evidence",
        server.base
    );
    let mut latencies = Vec::with_capacity(count as usize);
    let mut size = 0;
    let mut points = 0;
    for _ in 0..count {
        let started = Instant::now();
        let reply = client.get(&url).bearer_auth(&server.key).send().await?;
        let status = reply.status();
        let body = reply.bytes().await?;
        latencies.push(started.elapsed());
        if !status.is_success() {
            bail!(
                "evidence failed: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        size = body.len();
        if points == 0 {
            let evidence: Value = serde_json::from_slice(&body)?;
            if evidence["data"]["score"].is_null() {
                bail!("the long recording has no score: {evidence}");
            }
            points = evidence["data"]["timeline"]["eventCount"]
                .as_u64()
                .unwrap_or(0);
        }
    }
    latencies.sort();
    println!(
        "  evidence of a 10-minute recording ({points} events, {:.0} kB) {when}, {count} requests: p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  (target p99 <= 100)",
        size as f64 / 1e3,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    Ok(())
}

/// Delta commits per table (count, seconds in all) from the server's `/metrics`; `None` from a
/// binary without it.
async fn lake_commits(
    client: &reqwest::Client,
    server: &Server,
) -> anyhow::Result<Option<Vec<(&'static str, f64, f64)>>> {
    let Some(text) = scrape_metrics(client, &server.base).await? else {
        return Ok(None);
    };
    let mut tables = Vec::new();
    for table in ["events", "features", "scores"] {
        let labels = format!("{{table=\"{table}\"}}");
        tables.push((
            table,
            metric_value(
                &text,
                &format!("telltale_lake_commit_seconds_count{labels}"),
            )?,
            metric_value(&text, &format!("telltale_lake_commit_seconds_sum{labels}"))?,
        ));
    }
    Ok(Some(tables))
}

/// Prints the Delta commits made between two [`lake_commits`] readings.
fn print_commits(
    what: &str,
    before: &Option<Vec<(&'static str, f64, f64)>>,
    after: &Option<Vec<(&'static str, f64, f64)>>,
) {
    let (Some(before), Some(after)) = (before, after) else {
        return;
    };
    let mut line = format!("  Delta commits during {what}:");
    for ((table, count_before, sum_before), (_, count_after, sum_after)) in before.iter().zip(after)
    {
        let count = count_after - count_before;
        if count > 0.0 {
            line.push_str(&format!(
                " {table} {count:.0} x {:.1} ms;",
                (sum_after - sum_before) * 1e3 / count
            ));
        }
    }
    println!("{line}");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let target_events = env_number::<u64>("BENCH_EVENTS", 10_000_000);
    let lookup_sessions = env_number::<u64>("BENCH_LOOKUP_SESSIONS", 1_000_000);
    let lookups = env_number::<u64>("BENCH_LOOKUPS", 2000);
    let connections = env_number::<usize>("BENCH_CONNECTIONS", 16);
    let data_dir = tempfile::tempdir()?;
    // Flushes every second, so the lake is complete soon after loading ends; the run's phases
    // (flush, plan, scan, features, publish) are logged on stderr.
    let server = start_server(
        data_dir.path(),
        &[
            "--api-rate-per-minute",
            "100000000",
            "--flush-interval-ms",
            "1000",
            "--log-filter",
            "warn,tower_http=off,scorer=info,instance::erasure=info",
            // Compaction is timed on its own below.
            "--compaction-interval-secs",
            "0",
        ],
    )?;
    let pid = server.child.id();
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(3600))
        .build()?;

    // 1. The throughput survey.
    let (survey, tracking_key) = provision(&client, &server, "bench-throughput").await?;
    let commits_before_load = lake_commits(&client, &server).await?;
    // The collector's and the flusher's memory under load (the flush size bounds the latter).
    let stop_load_rss = Arc::new(AtomicBool::new(false));
    let load_rss = watch_rss(pid, stop_load_rss.clone());
    let long = long_recording(1_763_800_000_000);
    let long_events = long.len() as u64;
    // Spread over about the load's length (476 k events/s here), so that the recording's rows
    // land in most of the flush files, as a real one's do.
    let every = Duration::from_secs_f64(
        (target_events as f64 / 450_000.0) / long.len().div_ceil(50) as f64,
    );
    let long_sender = tokio::spawn(send_slowly(
        client.clone(),
        format!("{}/event/{tracking_key}/{LONG_REFERENCE}", server.base),
        long,
        every,
    ));
    let loading = Instant::now();
    let (sessions, events, throughput_references) = load_survey(
        &client,
        &server,
        &tracking_key,
        connections,
        0,
        false,
        move |_, events| events >= target_events,
    )
    .await?;
    long_sender.await??;
    let (sessions, events) = (sessions + 1, events + long_events);
    let load_time = loading.elapsed();
    println!(
        "scoring_run: loaded {sessions} sessions, {events} events through the collector in {:.1} s ({:.0} events/s)",
        load_time.as_secs_f64(),
        events as f64 / load_time.as_secs_f64()
    );

    // Scoring throughput, not ingest: let the flusher catch up before the run starts.
    let settled = wait_for_quiet_lake(&data_dir.path().join("lake/events")).await?;
    stop_load_rss.store(true, Ordering::Relaxed);
    let load_peak_rss = load_rss.join().unwrap_or(0);
    println!(
        "  lake settled {:.1} s after loading ended; server RSS peak {:.1} MiB while loading and flushing",
        settled.as_secs_f64(),
        load_peak_rss as f64 / 1024.0
    );
    let commits_before_run = lake_commits(&client, &server).await?;
    print_commits("loading", &commits_before_load, &commits_before_run);

    // 2. The run, with the server's memory watched.
    let baseline_rss = common::rss_kib(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let rss = watch_rss(pid, stop.clone());
    let (run, elapsed) = score(&client, &server, &survey).await?;
    stop.store(true, Ordering::Relaxed);
    let peak_rss = rss.join().unwrap_or(0);
    print_commits(
        "the run",
        &commits_before_run,
        &lake_commits(&client, &server).await?,
    );
    if run["status"] != "completed" {
        bail!("the run did not complete: {run}");
    }
    let seconds = elapsed.as_secs_f64();
    println!(
        "  run: {} sessions scored, {} failed, in {seconds:.2} s = {:.0} events/s, {:.0} sessions/s  (target >= 2,000,000 events/s)",
        run["scored"],
        run["failed"],
        events as f64 / seconds,
        sessions as f64 / seconds
    );
    println!(
        "  server RSS: {:.1} MiB before the run, peak {:.1} MiB during it  (target <= 2048)",
        baseline_rss as f64 / 1024.0,
        peak_rss as f64 / 1024.0
    );

    // 3. DuckDB over the same files.
    let glob = format!(
        "{}/lake/events/survey_id={survey}/*/*.parquet",
        data_dir.path().display()
    );
    let (duck_seconds, duck_sessions) = duckdb_seconds(&glob)?;
    println!(
        "  DuckDB per-session aggregates: {duck_seconds:.2} s for {duck_sessions} sessions; ours / DuckDB = {:.2}  (target <= 1.0)",
        seconds / duck_seconds
    );

    // 4. Evidence of the long recording (5. times it again after compaction).
    let evidence_requests = env_number::<u64>("BENCH_EVIDENCE", 200);
    time_evidence(
        &client,
        &server,
        &survey,
        evidence_requests,
        &format!("from {} files", files_in(&data_dir, "events")),
    )
    .await?;

    // 5. Erasure of one session, before and after compaction.
    let mut rng = Rng::new(11);
    let mut pick = || {
        throughput_references[(rng.next_u64() % throughput_references.len() as u64) as usize]
            .clone()
    };
    let files = |kind: &str| files_in(&data_dir, kind);
    println!(
        "  lake before compaction: {} events files, {} scores files, {} features files",
        files("events"),
        files("scores"),
        files("features")
    );
    let erased = erase(&client, &server, &survey, &pick()).await?;
    println!(
        "  erasure of one session from {events} events in {} small files: {:.2} s end to end  (target <= 0.2)",
        files("events"),
        erased.as_secs_f64()
    );
    let compacting = Instant::now();
    // The same build as the server's (BENCH_TELLTALE_BIN for an A/B): a lake is written and
    // compacted by one version.
    let binary = std::env::var_os("BENCH_TELLTALE_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_telltale").into());
    let output = std::process::Command::new(binary)
        .args(["compact", "--json", "--survey", &survey, "--data-dir"])
        .arg(data_dir.path())
        .output()?;
    let compaction_time = compacting.elapsed();
    if !output.status.success() {
        bail!(
            "telltale compact failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let report: Value = serde_json::from_slice(&output.stdout)?;
    let rows = report["rows"].as_u64().unwrap_or(0);
    println!(
        "  compaction: {} files into {} ({rows} rows, {:.1} -> {:.1} MB) in {:.2} s = {:.0} events/s",
        report["filesIn"],
        report["filesOut"],
        report["bytesIn"].as_f64().unwrap_or(0.0) / 1e6,
        report["bytesOut"].as_f64().unwrap_or(0.0) / 1e6,
        compaction_time.as_secs_f64(),
        rows as f64 / compaction_time.as_secs_f64()
    );
    for _ in 0..3 {
        let erased = erase(&client, &server, &survey, &pick()).await?;
        println!(
            "  erasure of one session from {events} events after compaction ({} files in the folder, the replaced ones kept for the retention): {:.2} s end to end  (target <= 0.2)",
            files("events"),
            erased.as_secs_f64()
        );
    }

    time_evidence(
        &client,
        &server,
        &survey,
        evidence_requests,
        &format!("after compaction, {} files", files_in(&data_dir, "events")),
    )
    .await?;

    // 6. Lookup on a survey of many scored sessions.
    if lookup_sessions > 0 {
        let (survey, tracking_key) = provision(&client, &server, "bench-lookup").await?;
        let loading = Instant::now();
        let (sessions, events, references) = load_survey(
            &client,
            &server,
            &tracking_key,
            connections,
            0,
            true,
            move |sessions, _| sessions >= lookup_sessions,
        )
        .await?;
        println!(
            "  lookup survey: {sessions} sessions ({events} events) loaded in {:.1} s",
            loading.elapsed().as_secs_f64()
        );
        wait_for_quiet_lake(&data_dir.path().join("lake/events")).await?;
        let commits_before = lake_commits(&client, &server).await?;
        let (run, elapsed) = score(&client, &server, &survey).await?;
        print_commits(
            "the lookup survey's run",
            &commits_before,
            &lake_commits(&client, &server).await?,
        );
        println!(
            "  lookup survey run: {} scored in {:.2} s = {:.0} sessions/s",
            run["scored"],
            elapsed.as_secs_f64(),
            sessions as f64 / elapsed.as_secs_f64()
        );
        let url = format!(
            "{}/integrations/v1/surveys/{survey}/sessions/lookup",
            server.base
        );
        let mut rng = Rng::new(7);
        let mut latencies = Vec::with_capacity(lookups as usize);
        for _ in 0..lookups {
            let picked: Vec<&String> = (0..100)
                .map(|_| &references[(rng.next_u64() % references.len() as u64) as usize])
                .collect();
            let body = json!({ "externalReferences": picked }).to_string();
            let started = Instant::now();
            let reply = client
                .post(&url)
                .bearer_auth(&server.key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            let status = reply.status();
            let rows: Value = reply.json().await?;
            latencies.push(started.elapsed());
            if !status.is_success() || rows["data"][0]["scoreBand"].is_null() {
                bail!("lookup failed: {status} {rows}");
            }
        }
        // By quarter, to tell a cold start (the first requests read the catalog's pages for the
        // first time) from a steady tail.
        let quarters: Vec<String> = latencies
            .chunks(latencies.len().div_ceil(4).max(1))
            .map(|part| {
                let mut part = part.to_vec();
                part.sort();
                format!("{:.2}", percentile(&part, 0.99))
            })
            .collect();
        println!("  lookup p99 by quarter, ms: {}", quarters.join(", "));
        latencies.sort();
        println!(
            "  lookup of 100 references, {lookups} requests: p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  (target p99 <= 2)",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            percentile(&latencies, 1.0)
        );
        // The same client, HTTP and key check without the lookup: what the request costs
        // around the query.
        let context_url = format!("{}/integrations/v1/context", server.base);
        let mut context = Vec::with_capacity(lookups as usize);
        for _ in 0..lookups {
            let started = Instant::now();
            let reply = client
                .get(&context_url)
                .bearer_auth(&server.key)
                .send()
                .await?;
            let status = reply.status();
            reply.bytes().await?;
            context.push(started.elapsed());
            if !status.is_success() {
                bail!("context failed: {status}");
            }
        }
        context.sort();
        println!(
            "  context (key check only), {lookups} requests: p50 {:.2} ms  p99 {:.2} ms",
            percentile(&context, 0.5),
            percentile(&context, 0.99)
        );

        // 7. An incremental run: `BENCH_NEW_SESSIONS` (default 1000) full-size sessions arrive
        // in the scored survey and a run (not forced) scores them, cohort included; then a run
        // with nothing new. Its cost should follow the new sessions, not the survey.
        let new_sessions = env_number::<u64>("BENCH_NEW_SESSIONS", 1000);
        let loading = Instant::now();
        let (added, added_events, _) = load_survey(
            &client,
            &server,
            &tracking_key,
            connections,
            1 << 40, // indices no earlier load used
            false,
            move |sessions, _| sessions >= new_sessions,
        )
        .await?;
        println!(
            "  {added} new sessions ({added_events} events) loaded in {:.1} s",
            loading.elapsed().as_secs_f64()
        );
        wait_for_quiet_lake(&data_dir.path().join("lake/events")).await?;
        let (run, elapsed) = score(&client, &server, &survey).await?;
        println!(
            "  incremental run: {} of {} scored, {} skipped in {:.2} s  (target <= 2 s)",
            run["scored"],
            run["total"],
            run["skipped"],
            elapsed.as_secs_f64()
        );
        let (run, elapsed) = score(&client, &server, &survey).await?;
        println!(
            "  run with nothing new: {} scored, {} skipped in {:.2} s",
            run["scored"],
            run["skipped"],
            elapsed.as_secs_f64()
        );
    }
    Ok(())
}
