//! Soak under faults: `cargo bench --bench soak` (about 2.5 minutes).
//!
//! Two release `telltale serve` instances on a PostgreSQL catalog and an S3 lake (moto), as a
//! fleet behind a load balancer, take collector batches in an open loop at `BENCH_SOAK_RATE`
//! requests per second (by default half of what the two took at full speed, measured first for
//! 10 s with 64 connections), alternating between them, while:
//!
//! - at 30 s the second instance is killed with SIGKILL, and restarted on the same port and data
//!   dir 3 s later;
//! - at 60 s PostgreSQL is restarted (`pg_ctl restart -m fast`). The cluster is the benchmark's
//!   own (`initdb` into a temporary folder, a port of its own), so nothing else on the machine
//!   loses its database.
//!
//! Every 100 ms a prober asks each instance for `/status/health` and looks up ten sessions.
//! After `BENCH_SOAK_SECONDS` (default 120) of load both instances are stopped with SIGTERM, the
//! bucket is read with DuckDB, and the run fails unless every acknowledged batch is in the lake
//! exactly once (each batch's 20 events carry its session and sequence number), no batch is
//! there twice, and health and lookups answered outside the restart windows (from the fault to
//! 5 s after the service is back).
//!
//! Needs PostgreSQL's server binaries (`/usr/lib/postgresql/*/bin`), run as the `postgres` user
//! when the benchmark runs as root, moto (`pip install 'moto[server]'`) and DuckDB's Python
//! package.

use std::path::{Path, PathBuf};
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
const PG_PORT: u16 = 55_432;

/// A PostgreSQL cluster of the benchmark's own, removed when dropped.
struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    as_postgres: bool,
}

impl PrivatePostgres {
    fn start() -> anyhow::Result<PrivatePostgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .context("PostgreSQL's server binaries are not installed")?
            .flatten()
            .map(|entry| entry.path().join("bin"))
            .filter(|bin| bin.join("initdb").exists())
            .max()
            .context("no initdb under /usr/lib/postgresql")?;
        let dir = tempfile::tempdir()?;
        let as_postgres =
            String::from_utf8(Command::new("id").arg("-u").output()?.stdout)?.trim() == "0";
        let postgres = PrivatePostgres {
            bin,
            dir,
            as_postgres,
        };
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(postgres.dir.path())
                .status()?;
            anyhow::ensure!(status.success(), "chown of the cluster folder failed");
        }
        postgres.run("initdb", &["-A", "trust", "-U", "postgres", "-D"], true)?;
        postgres.pg_ctl("start")?;
        let status = Command::new(postgres.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &PG_PORT.to_string(),
                "-U",
                "postgres",
                "test",
            ])
            .status()?;
        anyhow::ensure!(status.success(), "createdb failed");
        Ok(postgres)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(&self, tool: &str, args: &[&str], with_data: bool) -> anyhow::Result<()> {
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join(tool));
            command
        } else {
            Command::new(self.bin.join(tool))
        };
        command.args(args);
        if with_data {
            command.arg(self.data());
        }
        let output = command.output()?;
        if !output.status.success() {
            bail!("{tool} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }

    fn pg_ctl(&self, action: &str) -> anyhow::Result<()> {
        let options = format!(
            "-p {PG_PORT} -c listen_addresses=127.0.0.1 -k {}",
            self.dir.path().display()
        );
        // The server's output goes to a file: on a pipe, waiting for pg_ctl would wait for the
        // server to exit.
        let log = self.dir.path().join("log");
        self.run(
            "pg_ctl",
            &[
                action,
                "-w",
                "-m",
                "fast",
                "-o",
                &options,
                "-l",
                log.to_str().context("utf-8 path")?,
                "-D",
            ],
            true,
        )
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{PG_PORT}/test")
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.run("pg_ctl", &["stop", "-m", "immediate", "-D"], true);
    }
}

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
    let kill_at = Duration::from_secs(seconds / 4);
    let pg_restart_at = Duration::from_secs(seconds / 2);

    let postgres = Arc::new(PrivatePostgres::start()?);
    let scratch = tempfile::tempdir()?;
    let stores = stores::ScaleOutStores::create_on(scratch.path(), &postgres.url()).await;
    let lake_url = stores.lake_url();
    let ports = [free_port()?, free_port()?];
    let data_dirs = [scratch.path().join("a"), scratch.path().join("b")];
    let (catalog_url, env) = (stores.catalog_url.clone(), stores.env());
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

    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let probes = Arc::new(Mutex::new(Vec::<Probe>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    // When each fault began and when the service was back: the windows probes are excused in.
    let windows = Arc::new(Mutex::new(Vec::<(Duration, Duration)>::new()));

    // Each instance's peak resident memory, sampled every 100 ms by the prober.
    let peaks = Arc::new(Mutex::new([0u64; 2]));
    // The prober: health and a lookup of ten sessions on each instance, every 100 ms.
    let prober = {
        let (instances, peaks) = (Arc::clone(&instances), Arc::clone(&peaks));
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
            while !stop.load(Ordering::Relaxed) {
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

    // The faults, on their own task.
    let faults = {
        let (instances, windows) = (Arc::clone(&instances), Arc::clone(&windows));
        let start_second = move || start_instance(1);
        let postgres = Arc::clone(&postgres);
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            std::thread::sleep(kill_at.saturating_sub(started.elapsed()));
            let fault = started.elapsed();
            if let Some(mut second) = instances.lock()[1].take() {
                second.child.kill()?;
                second.child.wait()?;
            }
            std::thread::sleep(Duration::from_secs(3));
            let restarted = start_second()?;
            instances.lock()[1] = Some(restarted);
            windows
                .lock()
                .push((fault, started.elapsed() + Duration::from_secs(5)));
            println!(
                "soak: second instance SIGKILLed at {:.1} s, serving again at {:.1} s",
                fault.as_secs_f64(),
                started.elapsed().as_secs_f64()
            );

            std::thread::sleep(pg_restart_at.saturating_sub(started.elapsed()));
            let fault = started.elapsed();
            postgres.pg_ctl("restart")?;
            windows
                .lock()
                .push((fault, started.elapsed() + Duration::from_secs(5)));
            println!(
                "soak: PostgreSQL restarted at {:.1} s, back at {:.1} s",
                fault.as_secs_f64(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        })
    };

    // The load: an open loop, alternating instances; each session 50 batches.
    let interval = Duration::from_secs_f64(1.0 / rate);
    let duration = Duration::from_secs(seconds);
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
    faults.await??;
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
        "soak: lake: {} rows; acknowledged batches missing {}, batches twice {}, batches with other than {EVENTS_PER_BATCH} events {}; unanswered batches present {}",
        verdict.rows,
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
                p.kind == kind && p.ok && p.at < kill_at.saturating_sub(Duration::from_secs(5))
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
             FROM read_parquet('{lake}/events/survey_id=*/**/*.parquet', hive_partitioning = true)
             WHERE session_id LIKE '50a50a50-%'
             GROUP BY session_id, x),
         acked AS (SELECT DISTINCT session_id, CAST(x AS BIGINT) AS x FROM read_csv_auto('{acked}'))
         SELECT
             (SELECT count(*) FROM acked LEFT JOIN lake USING (session_id, x) WHERE lake.n IS NULL) AS missing,
             (SELECT count(*) FROM lake WHERE n > {EVENTS_PER_BATCH}) AS duplicated,
             (SELECT count(*) FROM lake WHERE n < {EVENTS_PER_BATCH} OR events <> {EVENTS_PER_BATCH}) AS partial,
             (SELECT count(*) FROM lake LEFT JOIN acked USING (session_id, x) WHERE acked.x IS NULL) AS unacknowledged_present,
             (SELECT coalesce(sum(n), 0) FROM lake) AS rows",
        lake = lake.display(),
        acked = acknowledged.display(),
    );
    let output = Command::new("python3")
        .args([
            "-c",
            "import duckdb, sys; duckdb.execute('SET enable_progress_bar = false'); \
             print(' '.join(str(int(v)) for v in duckdb.sql(sys.argv[1]).fetchall()[0]))",
            &sql,
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
    let [missing, duplicated, partial, unacknowledged_present, rows] = values[..] else {
        bail!("unexpected DuckDB answer {values:?}");
    };
    Ok(Verdict {
        missing,
        duplicated,
        partial,
        unacknowledged_present,
        rows,
    })
}
