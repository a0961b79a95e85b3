//! Soak under faults: `cargo bench --bench soak` (about 2.5 minutes; the long soak of
//! benches/README.md sets `BENCH_SOAK_SECONDS=7200 BENCH_SOAK_FAULT_EVERY=180`).
//!
//! Two release `telltale serve` instances on a PostgreSQL catalog and an S3 lake (moto), as a
//! fleet behind a load balancer, take collector batches in an open loop at `BENCH_SOAK_RATE`
//! requests per second (by default half of what the two took at full speed, measured first for
//! 10 s with 64 connections), alternating between them, while every `BENCH_SOAK_FAULT_EVERY`
//! seconds (default a fifth of the run) one fault strikes, in turn:
//!
//! - an instance is killed with SIGKILL (the two alternate), and restarted on the same port and
//!   data dir 3 s later;
//! - PostgreSQL stops (`pg_ctl stop -m fast`) and starts again 2 s later. The cluster is the
//!   benchmark's own (`initdb` into a temporary folder, a port of its own), so nothing else on
//!   the machine loses its database;
//! - moto's HTTP server stops for 5 s (connections refused; its buckets live on);
//! - the instances' log disks are full for 5 s: writes to their `wal/` folders fail with ENOSPC
//!   (the `LD_PRELOAD` shim of tests/faults), so the collector answers 503 and acknowledges
//!   nothing meanwhile.
//!
//! Every 100 ms a prober asks each instance for `/status/health` and looks up ten sessions;
//! every second each instance's RSS and open files are sampled. After `BENCH_SOAK_SECONDS`
//! (default 120) of load both instances are stopped with SIGTERM, the events table's last
//! snapshot (its live files, listed by Python's deltalake from a copy of the bucket) is read
//! with DuckDB, and the run fails unless every acknowledged batch is in the lake exactly once
//! (each batch's 20 events carry its session and sequence number), no batch is there twice, health
//! and lookups answered outside the fault windows (from the fault to 5 s after the service is
//! back), and RSS and open files stayed flat (the last quarter's peak within 1.5 times the
//! second quarter's, plus 64 MiB or 32 files).
//!
//! Needs PostgreSQL's server binaries (`/usr/lib/postgresql/*/bin`), run as the `postgres` user
//! when the benchmark runs as root, moto (`pip install 'moto[server]'`), the Python packages
//! duckdb and deltalake, and a C compiler (for the shim).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;

mod common;
use common::load::{closed_loop, percentile, pointer_batch};
use common::{Server, env_number, provision, rss_kib, start_server_with_env};

#[path = "../tests/it/stores.rs"]
#[allow(dead_code, unreachable_pub)]
mod stores;

const EVENTS_PER_BATCH: u64 = 20;
const BATCHES_PER_SESSION: u64 = 50;
/// A batch of 20 pointer events whose `x` is its sequence number in the session and whose `y`
/// is the event's index: the lake shows which batch each row came from.
fn batch(session_start: i64, sequence: u64) -> String {
    let events: Vec<String> = (0..EVENTS_PER_BATCH)
        .map(|i| {
            format!(
                r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{sequence},"y":{i},"pointerType":"mouse","trusted":true}}}}"#,
                session_start + (sequence * EVENTS_PER_BATCH + i) as i64 * 16
            )
        })
        .collect();
    format!(r#"{{"events":[{}]}}"#, events.join(","))
}

fn session_id(serial: u64) -> String {
    format!("50a50a50-0000-4000-8000-{serial:012x}")
}

/// What became of each batch sent.
#[derive(Default)]
struct Outcomes {
    /// (session, sequence) acknowledged with 201.
    acknowledged: Vec<(u64, u64)>,
    /// Sent with no answer (connection reset mid-request): stored or not.
    unknown: u64,
    /// Refused (connection refused, 503, 429): not stored.
    refused: u64,
}

/// A probe's result: when, which instance, what, how long, and whether it answered 200.
struct Probe {
    at: Duration,
    kind: &'static str,
    latency: Duration,
    ok: bool,
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env_number("BENCH_SOAK_SECONDS", 120);
    let every = Duration::from_secs(env_number("BENCH_SOAK_FAULT_EVERY", (seconds / 5).max(1)));
    let first_fault = every;

    let postgres = Arc::new(stores::PrivatePostgres::create());
    let moto = stores::RestartableMoto::start();
    let scratch = tempfile::tempdir()?;
    let stores =
        stores::ScaleOutStores::create_with(scratch.path(), &postgres.url(), &moto.endpoint).await;
    // The log-disk fault: writes under any `/wal/` folder fail while `full` exists.
    let shim = compile_shim(scratch.path())?;
    let full = scratch.path().join("full");
    let never = scratch.path().join("never");
    let lake_url = stores.lake_url();
    let ports = [free_port()?, free_port()?];
    let data_dirs = [scratch.path().join("a"), scratch.path().join("b")];
    let (catalog_url, mut env) = (stores.catalog_url.clone(), stores.env());
    for (name, value) in [
        ("LD_PRELOAD", shim.display().to_string()),
        ("TELLTALE_FAULT_FULL", full.display().to_string()),
        ("TELLTALE_FAULT_FLAG", never.display().to_string()),
        ("TELLTALE_FAULT_PATH", "/wal/".to_owned()),
    ] {
        env.push((name.to_owned(), value));
    }
    let start_instance = move |index: usize| -> anyhow::Result<Server> {
        let bind = format!("127.0.0.1:{}", ports[index]);
        start_server_with_env(
            &data_dirs[index],
            &[
                "--bind",
                &bind,
                "--catalog",
                &catalog_url,
                "--lake",
                &lake_url,
                "--api-rate-per-minute",
                "100000000",
            ],
            &env,
        )
    };
    let first = start_instance(0)?;
    let second = start_instance(1)?;
    let bases = [first.base.clone(), second.base.clone()];
    let key = first.key.clone();
    let client = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(10))
        .build()?;
    let (survey_id, tracking_key) = provision(&client, &first, "soak").await?;
    let instances = Arc::new(Mutex::new([Some(first), Some(second)]));

    // The fleet's full rate, measured here: 64 connections back to back for 10 s, alternating
    // instances (sessions of their own, outside the check below); the soak runs at half.
    let rate = match std::env::var("BENCH_SOAK_RATE") {
        Ok(rate) => rate.parse().context("BENCH_SOAK_RATE")?,
        Err(_) => {
            let (targets, key) = (bases.clone(), tracking_key.clone());
            let full = closed_loop(
                &client,
                64,
                Duration::from_secs(10),
                move |client, worker, rng, state| {
                    let session = format!("{worker:08x}-0000-4000-8000-{:012x}", rng.next() % 64);
                    client
                        .post(format!("{}/event/{key}/{session}", targets[worker % 2]))
                        .header("content-type", "text/plain")
                        .body(pointer_batch(rng, state))
                },
            )
            .await;
            println!(
                "soak: the fleet at full speed: {:.0} req/s ({} errors); soaking at half",
                full.rate(),
                full.errors
            );
            full.rate() / 2.0
        }
    };

    let duration = Duration::from_secs(seconds);
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let probes = Arc::new(Mutex::new(Vec::<Probe>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    // When each fault began and when the service was back: the windows probes are excused in.
    let windows = Arc::new(Mutex::new(Vec::<(Duration, Duration)>::new()));

    // Each instance's peak resident memory, sampled every 100 ms by the prober, and its RSS and
    // open files every second.
    let peaks = Arc::new(Mutex::new([0u64; 2]));
    let usage = Arc::new(Mutex::new(Vec::<Usage>::new()));
    // The prober: health and a lookup of ten sessions on each instance, every 100 ms.
    let prober = {
        let (instances, peaks) = (Arc::clone(&instances), Arc::clone(&peaks));
        let usage = Arc::clone(&usage);
        let (client, bases, key, survey_id) = (
            client.clone(),
            bases.clone(),
            key.clone(),
            survey_id.clone(),
        );
        let (probes, stop) = (Arc::clone(&probes), Arc::clone(&stop));
        tokio::spawn(async move {
            let references: Vec<String> = (0..10).map(session_id).collect();
            let body = serde_json::json!({ "externalReferences": references });
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if round.is_multiple_of(10) {
                    usage
                        .lock()
                        .push(sample_usage(&instances, started.elapsed()));
                }
                round += 1;
                for base in &bases {
                    let health = client.get(format!("{base}/status/health"));
                    let lookup = client
                        .post(format!(
                            "{base}/integrations/v1/surveys/{survey_id}/sessions/lookup"
                        ))
                        .bearer_auth(&key)
                        .json(&body);
                    for (kind, request) in [("health", health), ("lookup", lookup)] {
                        let at = started.elapsed();
                        let begun = Instant::now();
                        let ok = matches!(
                            request.send().await,
                            Ok(response) if response.status().is_success()
                        );
                        probes.lock().push(Probe {
                            at,
                            kind,
                            latency: begun.elapsed(),
                            ok,
                        });
                    }
                }
                sample_peaks(&instances, &peaks);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // The faults, on their own task, one every `every`, in turn.
    let faults = {
        let (instances, windows) = (Arc::clone(&instances), Arc::clone(&windows));
        let start_again = start_instance;
        let postgres = Arc::clone(&postgres);
        let mut moto = moto;
        let full = full.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<stores::RestartableMoto> {
            let mut round = 0u32;
            loop {
                let at = every * (round + 1);
                // None closer to the end than 15 s: the service must be back before the load
                // stops.
                if at + Duration::from_secs(15) > duration {
                    return Ok(moto);
                }
                std::thread::sleep(at.saturating_sub(started.elapsed()));
                let fault = started.elapsed();
                let what = match round % 4 {
                    0 => {
                        let index = ((round / 4) % 2) as usize;
                        if let Some(mut server) = instances.lock()[index].take() {
                            server.child.kill()?;
                            server.child.wait()?;
                        }
                        std::thread::sleep(Duration::from_secs(3));
                        let restarted = start_again(index)?;
                        instances.lock()[index] = Some(restarted);
                        format!("instance {} SIGKILLed", index + 1)
                    }
                    1 => {
                        postgres.stop();
                        std::thread::sleep(Duration::from_secs(2));
                        postgres.start();
                        "PostgreSQL stopped".to_owned()
                    }
                    2 => {
                        moto.stop();
                        std::thread::sleep(Duration::from_secs(5));
                        moto.resume();
                        "S3 (moto) stopped".to_owned()
                    }
                    _ => {
                        std::fs::write(&full, b"")?;
                        std::thread::sleep(Duration::from_secs(5));
                        std::fs::remove_file(&full)?;
                        "the log disks full".to_owned()
                    }
                };
                windows
                    .lock()
                    .push((fault, started.elapsed() + Duration::from_secs(5)));
                println!(
                    "soak: {what} at {:.1} s, back at {:.1} s",
                    fault.as_secs_f64(),
                    started.elapsed().as_secs_f64()
                );
                round += 1;
            }
        })
    };

    // The load: an open loop, alternating instances; each session 50 batches.
    let interval = Duration::from_secs_f64(1.0 / rate);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(512));
    let session_start = now_millis() - 3_600_000;
    let mut sent: u64 = 0;
    let mut tasks = Vec::new();
    let dropped_by_client = Arc::new(AtomicU64::new(0));
    while started.elapsed() < duration {
        let scheduled = interval.mul_f64(sent as f64);
        if let Some(wait) = scheduled.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let (session, sequence) = (sent / BATCHES_PER_SESSION, sent % BATCHES_PER_SESSION);
        let base = &bases[(sent % 2) as usize];
        sent += 1;
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            // More than 512 requests waiting: the client is behind; this batch is not sent.
            dropped_by_client.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let request = client
            .post(format!(
                "{base}/event/{tracking_key}/{}",
                session_id(session)
            ))
            .header("content-type", "text/plain")
            .body(batch(session_start, sequence));
        let outcomes = Arc::clone(&outcomes);
        tasks.push(tokio::spawn(async move {
            let result = request.send().await;
            let mut outcomes = outcomes.lock();
            match result {
                Ok(response) if response.status().as_u16() == 201 => {
                    outcomes.acknowledged.push((session, sequence))
                }
                Ok(_) => outcomes.refused += 1,
                Err(error) if error.is_connect() => outcomes.refused += 1,
                Err(_) => outcomes.unknown += 1,
            }
            drop(permit);
        }));
        if tasks.len() > 10_000 {
            tasks.retain(|task| !task.is_finished());
        }
    }
    for task in tasks {
        task.await?;
    }
    stop.store(true, Ordering::Relaxed);
    prober.await?;
    // Memory while the instances catch up on what the load left in their logs, 10 s.
    for _ in 0..100 {
        sample_peaks(&instances, &peaks);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _moto = faults.await??;
    let load_seconds = started.elapsed().as_secs_f64();

    // SIGTERM both (each flushes what its log holds), then read the bucket.
    let stopped: Vec<Server> = instances
        .lock()
        .iter_mut()
        .filter_map(Option::take)
        .collect();
    for mut server in stopped {
        let pid = server.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let status = server.child.wait()?;
        anyhow::ensure!(status.success(), "an instance exited with {status}");
    }
    let outcomes = std::mem::take(&mut *outcomes.lock());
    println!(
        "soak: {load_seconds:.0} s at {rate:.0} req/s scheduled ({sent} batches): {} acknowledged, {} refused, {} without an answer, {} not sent (client behind)",
        outcomes.acknowledged.len(),
        outcomes.refused,
        outcomes.unknown,
        dropped_by_client.load(Ordering::Relaxed)
    );
    let verdict = verify_lake(&stores, &outcomes, scratch.path())?;

    // Probes outside the fault windows, against the first 25 s (before any fault).
    let windows = windows.lock().clone();
    let probes = probes.lock();
    let excused = |at: Duration| windows.iter().any(|(from, to)| at >= *from && at <= *to);
    println!(
        "soak: lake: {} rows in {} live files; acknowledged batches missing {}, batches twice {}, batches with other than {EVENTS_PER_BATCH} events {}; unanswered batches present {}",
        verdict.rows,
        verdict.files,
        verdict.missing,
        verdict.duplicated,
        verdict.partial,
        verdict.unacknowledged_present
    );
    let mut failures = Vec::new();
    for kind in ["health", "lookup"] {
        let mut baseline: Vec<Duration> = probes
            .iter()
            .filter(|p| {
                p.kind == kind && p.ok && p.at < first_fault.saturating_sub(Duration::from_secs(5))
            })
            .map(|p| p.latency)
            .collect();
        let mut outside: Vec<Duration> = probes
            .iter()
            .filter(|p| p.kind == kind && p.ok && !excused(p.at))
            .map(|p| p.latency)
            .collect();
        let failed_outside = probes
            .iter()
            .filter(|p| p.kind == kind && !p.ok && !excused(p.at))
            .count();
        let failed_inside = probes
            .iter()
            .filter(|p| p.kind == kind && !p.ok && excused(p.at))
            .count();
        baseline.sort_unstable();
        outside.sort_unstable();
        println!(
            "soak: {kind:<6} before the faults p50 {:.1} ms p99 {:.1} ms ({} probes); outside the windows p50 {:.1} ms p99 {:.1} ms max {:.1} ms ({} probes, {failed_outside} failed); {failed_inside} failed inside the windows",
            percentile(&baseline, 0.5),
            percentile(&baseline, 0.99),
            baseline.len(),
            percentile(&outside, 0.5),
            percentile(&outside, 0.99),
            percentile(&outside, 1.0),
            outside.len(),
        );
        for probe in probes
            .iter()
            .filter(|p| p.kind == kind && !p.ok && !excused(p.at))
        {
            println!(
                "soak: {kind} probe failed at {:.2} s after {:.1} ms",
                probe.at.as_secs_f64(),
                probe.latency.as_secs_f64() * 1000.0
            );
        }
        if failed_outside > 0 {
            failures.push(format!(
                "{failed_outside} {kind} probes failed outside the windows"
            ));
        }
    }
    let peaks = *peaks.lock();
    println!(
        "soak: peak RSS {:.0} MiB and {:.0} MiB",
        peaks[0] as f64 / 1024.0,
        peaks[1] as f64 / 1024.0
    );
    let usage = usage.lock().clone();
    for (name, failure) in flatness(&usage, duration) {
        if let Some(failure) = failure {
            failures.push(failure);
        }
        println!("soak: {name}");
    }
    for (from, to) in &windows {
        println!(
            "soak: excused window {:.1}-{:.1} s",
            from.as_secs_f64(),
            to.as_secs_f64()
        );
    }
    if verdict.missing > 0 || verdict.duplicated > 0 || verdict.partial > 0 {
        failures.push(format!("the lake is wrong: {verdict:?}"));
    }
    if failures.is_empty() {
        println!("soak: passed");
        Ok(())
    } else {
        bail!("soak failed: {}", failures.join("; "))
    }
}

/// Both instances' resident memory (KiB) and open files at one moment (0 for one not running).
#[derive(Debug, Clone, Copy)]
struct Usage {
    at: Duration,
    rss_kib: [u64; 2],
    files: [u64; 2],
}

fn sample_usage(instances: &Mutex<[Option<Server>; 2]>, at: Duration) -> Usage {
    let instances = instances.lock();
    let mut usage = Usage {
        at,
        rss_kib: [0; 2],
        files: [0; 2],
    };
    for (index, server) in instances.iter().enumerate() {
        if let Some(server) = server {
            let pid = server.child.id();
            usage.rss_kib[index] = rss_kib(pid);
            usage.files[index] = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map_or(0, |entries| entries.count() as u64);
        }
    }
    usage
}

/// Each instance's peak RSS and open files in each quarter of the run, one line per measure,
/// with a failure when the last quarter's peak exceeds 1.5 times the second's plus a margin
/// (64 MiB, 32 files): what a leak would show. The first quarter is the warm-up.
fn flatness(usage: &[Usage], duration: Duration) -> Vec<(String, Option<String>)> {
    let quarter = |at: Duration| ((at.as_secs_f64() / duration.as_secs_f64()) * 4.0) as usize;
    let mut lines = Vec::new();
    for (measure, margin) in [("RSS MiB", 64.0), ("open files", 32.0)] {
        for instance in 0..2 {
            let mut peaks = [0.0f64; 4];
            for sample in usage {
                let value = if measure == "open files" {
                    sample.files[instance] as f64
                } else {
                    sample.rss_kib[instance] as f64 / 1024.0
                };
                let slot = quarter(sample.at).min(3);
                peaks[slot] = peaks[slot].max(value);
            }
            let failure = (peaks[3] > peaks[1] * 1.5 + margin).then(|| {
                format!(
                    "instance {}'s {measure} grew: {:.0} in the second quarter, {:.0} in the last",
                    instance + 1,
                    peaks[1],
                    peaks[3]
                )
            });
            lines.push((
                format!(
                    "instance {} {measure} peak by quarter: {:.0}, {:.0}, {:.0}, {:.0}",
                    instance + 1,
                    peaks[0],
                    peaks[1],
                    peaks[2],
                    peaks[3]
                ),
                failure,
            ));
        }
    }
    lines
}

/// Compiles tests/faults/fsync_shim.c into `dir`; returns the library.
fn compile_shim(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/faults/fsync_shim.c");
    let library = dir.join("fsync_shim.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(source)
        .arg("-ldl")
        .status()
        .context("run cc")?;
    anyhow::ensure!(status.success(), "compiling the fault shim failed");
    Ok(library)
}

/// Raises each running instance's peak resident memory (KiB) to what it holds now.
fn sample_peaks(instances: &Mutex<[Option<Server>; 2]>, peaks: &Mutex<[u64; 2]>) {
    let instances = instances.lock();
    let mut peaks = peaks.lock();
    for (index, server) in instances.iter().enumerate() {
        if let Some(server) = server {
            peaks[index] = peaks[index].max(rss_kib(server.child.id()));
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// What the lake holds against what was acknowledged.
#[derive(Debug)]
struct Verdict {
    /// Acknowledged batches not in the lake.
    missing: u64,
    /// Batches (acknowledged or not) in the lake more than once.
    duplicated: u64,
    /// Batches in the lake with other than their 20 events.
    partial: u64,
    /// Batches in the lake that were not acknowledged (sent without an answer).
    unacknowledged_present: u64,
    rows: u64,
    /// Live files of the events table's last snapshot.
    files: u64,
}

fn verify_lake(
    stores: &stores::ScaleOutStores,
    outcomes: &Outcomes,
    scratch: &Path,
) -> anyhow::Result<Verdict> {
    let acknowledged = scratch.join("acknowledged.csv");
    let mut csv = String::from("session_id,x\n");
    for (session, sequence) in &outcomes.acknowledged {
        csv.push_str(&format!("{},{sequence}\n", session_id(*session)));
    }
    std::fs::write(&acknowledged, csv)?;
    let lake = stores.mirror_lake();
    let sql = format!(
        "WITH lake AS (
             SELECT session_id, CAST(x AS BIGINT) AS x, count(*) AS n, count(DISTINCT y) AS events
             FROM read_parquet(@FILES@, hive_partitioning = true)
             WHERE session_id LIKE '50a50a50-%'
             GROUP BY session_id, x),
         acked AS (SELECT DISTINCT session_id, CAST(x AS BIGINT) AS x FROM read_csv_auto('{acked}'))
         SELECT
             (SELECT count(*) FROM acked LEFT JOIN lake USING (session_id, x) WHERE lake.n IS NULL) AS missing,
             (SELECT count(*) FROM lake WHERE n > {EVENTS_PER_BATCH}) AS duplicated,
             (SELECT count(*) FROM lake WHERE n < {EVENTS_PER_BATCH} OR events <> {EVENTS_PER_BATCH}) AS partial,
             (SELECT count(*) FROM lake LEFT JOIN acked USING (session_id, x) WHERE acked.x IS NULL) AS unacknowledged_present,
             (SELECT coalesce(sum(n), 0) FROM lake) AS rows",
        acked = acknowledged.display(),
    );
    // The events table's live files in its last snapshot (Python's deltalake), not a listing of
    // the bucket: files a compaction replaced or a killed writer uploaded stay there until the
    // vacuum, and would count twice.
    let output = Command::new("python3")
        .args([
            "-c",
            "import deltalake, duckdb, sys; duckdb.execute('SET enable_progress_bar = false'); \
             files = deltalake.DeltaTable(sys.argv[2]).file_uris(); \
             listed = '[' + ','.join(\"'\" + f.replace(\"'\", \"''\") + \"'\" for f in files) + ']'; \
             print(len(files), ' '.join(str(int(v)) for v in \
                 duckdb.sql(sys.argv[1].replace('@FILES@', listed)).fetchall()[0]))",
            &sql,
            &lake.join("events").display().to_string(),
        ])
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "DuckDB failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let values: Vec<u64> = text
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .map(|value| {
            value
                .parse()
                .with_context(|| format!("DuckDB printed {text:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    let [
        files,
        missing,
        duplicated,
        partial,
        unacknowledged_present,
        rows,
    ] = values[..]
    else {
        bail!("unexpected DuckDB answer {values:?}");
    };
    Ok(Verdict {
        files,
        missing,
        duplicated,
        partial,
        unacknowledged_present,
        rows,
    })
}
