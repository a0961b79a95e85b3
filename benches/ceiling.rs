//! How high can the collector's ratio go on this machine? `cargo bench --bench ceiling`.
//!
//! The service-core issue asks for collector requests/s of at least half of `GET /status/health`
//! requests/s on the same server, with durable acknowledgements. This benchmark measures what a
//! server that does *less* than the collector reaches with the same client, the same 64
//! keep-alive connections and the same 20-event bodies as `collector_load`, in one run:
//!
//! - `bare`: axum reads the body and answers 201 (no parsing, nothing kept);
//! - `value`: the body parsed into `serde_json::Value` and its events counted (the issue's own
//!   reference point: "about 0.28 of a route that does not parse");
//! - `durable`: the body copied into a group-commit log (one writer thread, `write` and
//!   `fdatasync` per group, segments of 64 MiB deleted once full, as Telltale's log does) and
//!   201 once synced: the floor of any durable collector, with no validation, statistics or
//!   Parquet;
//! - `overwrite`: the same group commit into one preallocated, synced 64 MiB file overwritten
//!   in place (`fdatasync` then writes data blocks only, no file size or block allocation);
//!
//! each next to its own server's health rate, and then the real `telltale serve` (health and
//! collector) in the same run. Last, an open loop at half of Telltale's collector rate against
//! Telltale and against the durable stand-in: the latency tail a group-commit log alone has on
//! this disk at that rate. The benchmark re-executes itself as the stand-in server
//! (`CEILING_ROLE=server`), so client and server are separate processes as in `collector_load`.
//!
//! Environment: `BENCH_SECONDS` (per phase, default 10), `BENCH_CONNECTIONS` (default 64).

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::{get, post};

mod common;
use common::load::{
    Rng, Throughput, client_for_open, closed_loop, identifier, open_loop, percentile, pointer_batch,
};
use common::{env_number, provision, start_server};

const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

fn main() -> anyhow::Result<()> {
    if std::env::var("CEILING_ROLE").as_deref() == Ok("server") {
        return serve_stand_in();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(measure())
}

// ---- the stand-in server -------------------------------------------------------------------

/// An append waiting for its group's sync.
type Waiter = (Bytes, tokio::sync::oneshot::Sender<()>);

fn serve_stand_in() -> anyhow::Result<()> {
    let dir = std::env::var("CEILING_LOG_DIR").context("CEILING_LOG_DIR")?;
    let (sender, receiver) = mpsc::sync_channel::<Waiter>(16 * 1024);
    let append_dir = dir.clone();
    std::thread::Builder::new()
        .name("stand-in-log".to_owned())
        .spawn(move || group_commit_writer(&append_dir, receiver))?;
    let (overwrite_sender, overwrite_receiver) = mpsc::sync_channel::<Waiter>(16 * 1024);
    std::thread::Builder::new()
        .name("stand-in-overwrite".to_owned())
        .spawn(move || overwriting_writer(&dir, overwrite_receiver))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let app = Router::new()
            .route(
                "/status/health",
                get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
            )
            .route("/bare/{key}/{identifier}", post(bare))
            .route("/value/{key}/{identifier}", post(value))
            .route(
                "/durable/{key}/{identifier}",
                post(move |body: Bytes| durable(sender.clone(), body)),
            )
            .route(
                "/overwrite/{key}/{identifier}",
                post(move |body: Bytes| durable(overwrite_sender.clone(), body)),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}", listener.local_addr()?);
        std::io::stdout().flush()?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

fn created(count: usize) -> (StatusCode, axum::Json<serde_json::Value>) {
    (
        StatusCode::CREATED,
        axum::Json(serde_json::json!({ "success": true, "count": count })),
    )
}

async fn bare(body: Bytes) -> (StatusCode, axum::Json<serde_json::Value>) {
    created(usize::from(!body.is_empty()) * 20)
}

async fn value(body: Bytes) -> Result<(StatusCode, axum::Json<serde_json::Value>), StatusCode> {
    let parsed: serde_json::Value =
        serde_json::from_slice(&body).map_err(|_| StatusCode::BAD_REQUEST)?;
    let count = parsed["events"].as_array().map_or(0, Vec::len);
    Ok(created(count))
}

async fn durable(
    sender: mpsc::SyncSender<Waiter>,
    body: Bytes,
) -> Result<(StatusCode, axum::Json<serde_json::Value>), StatusCode> {
    let (done, synced) = tokio::sync::oneshot::channel();
    sender
        .try_send((Bytes::copy_from_slice(&body), done))
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    synced
        .await
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    Ok(created(20))
}

/// Group commit: takes every append waiting at that moment, hands their length-prefixed bodies
/// to `write_and_sync` as one buffer, then wakes them. Stops at the first I/O error.
fn group_commit(
    receiver: mpsc::Receiver<Waiter>,
    mut write_and_sync: impl FnMut(&[u8]) -> std::io::Result<()>,
) {
    let mut buffer = Vec::with_capacity(1024 * 1024);
    let mut waiters = Vec::new();
    while let Ok(first) = receiver.recv() {
        waiters.push(first);
        while let Ok(next) = receiver.try_recv() {
            waiters.push(next);
        }
        buffer.clear();
        for (body, _) in &waiters {
            buffer.extend_from_slice(&(body.len() as u32).to_le_bytes());
            buffer.extend_from_slice(body);
        }
        if write_and_sync(&buffer).is_err() {
            return;
        }
        for (_, done) in waiters.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Appends each group to the current file and `fdatasync`s it; a full file is replaced by a new
/// one and deleted, as Telltale's log deletes consumed segments.
fn group_commit_writer(dir: &str, receiver: mpsc::Receiver<Waiter>) {
    let open = |serial: u64| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(format!("{dir}/{serial:08}.log"))
    };
    let mut serial = 0;
    let Ok(mut file) = open(serial) else { return };
    let mut written = 0_u64;
    group_commit(receiver, |buffer| {
        file.write_all(buffer)?;
        file.sync_data()?;
        written += buffer.len() as u64;
        if written >= SEGMENT_BYTES {
            let full = format!("{dir}/{serial:08}.log");
            serial += 1;
            file = open(serial)?;
            written = 0;
            let _ = std::fs::remove_file(full);
        }
        Ok(())
    });
}

/// The same group commit into one preallocated, synced file overwritten in place from offset 0
/// when full: `fdatasync` then carries data blocks only, never a new file size or new blocks.
fn overwriting_writer(dir: &str, receiver: mpsc::Receiver<Waiter>) {
    use std::os::unix::fs::FileExt as _;
    let Ok(file) = std::fs::File::create(format!("{dir}/preallocated.log")) else {
        return;
    };
    let zeros = vec![0_u8; 1024 * 1024];
    if (0..SEGMENT_BYTES / zeros.len() as u64)
        .try_for_each(|chunk| file.write_all_at(&zeros, chunk * zeros.len() as u64))
        .and_then(|()| file.sync_all())
        .is_err()
    {
        return;
    }
    let mut offset = 0_u64;
    group_commit(receiver, |buffer| {
        if offset + buffer.len() as u64 > SEGMENT_BYTES {
            offset = 0;
        }
        file.write_all_at(buffer, offset)?;
        file.sync_data()?;
        offset += buffer.len() as u64;
        Ok(())
    });
}

// ---- the measurement ------------------------------------------------------------------------

struct StandIn {
    child: Child,
    base: String,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_stand_in(log_dir: &std::path::Path) -> anyhow::Result<StandIn> {
    let mut child = Command::new(std::env::current_exe()?)
        .env("CEILING_ROLE", "server")
        .env("CEILING_LOG_DIR", log_dir)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the stand-in server")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .context("stand-in did not start")?
        .to_owned();
    Ok(StandIn { child, base })
}

async fn health_rate(
    client: &reqwest::Client,
    base: &str,
    connections: usize,
    phase: Duration,
) -> Throughput {
    let url = Arc::new(format!("{base}/status/health"));
    closed_loop(client, connections, phase, move |c, _, _, _| {
        c.get(url.as_str())
    })
    .await
}

async fn batch_rate(
    client: &reqwest::Client,
    route_base: String,
    connections: usize,
    phase: Duration,
) -> Throughput {
    let serials: Arc<Vec<AtomicU64>> =
        Arc::new((0..connections).map(|_| AtomicU64::new(0)).collect());
    let base = Arc::new(route_base);
    closed_loop(client, connections, phase, move |c, worker, rng, state| {
        let n = serials[worker].fetch_add(1, Ordering::Relaxed);
        c.post(format!("{}/{}", base, identifier(worker, n, 50)))
            .header("content-type", "text/plain")
            .body(pointer_batch(rng, state))
    })
    .await
}

async fn measure() -> anyhow::Result<()> {
    let seconds: u64 = env_number("BENCH_SECONDS", 10);
    let connections: usize = env_number("BENCH_CONNECTIONS", 64);
    let phase = Duration::from_secs(seconds);
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .pool_max_idle_per_host(connections)
        .build()?;
    let mut rows: Vec<(String, f64, f64)> = Vec::new();

    let log_dir = tempfile::tempdir()?;
    let stand_in = start_stand_in(log_dir.path())?;
    health_rate(&client, &stand_in.base, connections, Duration::from_secs(1)).await;
    for route in ["bare", "value", "durable", "overwrite"] {
        let health = health_rate(&client, &stand_in.base, connections, phase).await;
        let batches = batch_rate(
            &client,
            format!("{}/{route}/key", stand_in.base),
            connections,
            phase,
        )
        .await;
        eprintln!(
            "{route}: health {:.0}, batches {:.0} req/s ({} + {} errors)",
            health.rate(),
            batches.rate(),
            health.errors,
            batches.errors
        );
        rows.push((route.to_owned(), health.rate(), batches.rate()));
    }

    let data_dir = tempfile::tempdir()?;
    let server = start_server(data_dir.path(), &[])?;
    let (_, tracking_key) = provision(&client, &server, "bench").await?;
    health_rate(&client, &server.base, connections, Duration::from_secs(1)).await;
    let health = health_rate(&client, &server.base, connections, phase).await;
    let collector = batch_rate(
        &client,
        format!("{}/event/{tracking_key}", server.base),
        connections,
        phase,
    )
    .await;
    eprintln!(
        "telltale: health {:.0}, collector {:.0} req/s ({} + {} errors)",
        health.rate(),
        collector.rate(),
        health.errors,
        collector.errors
    );
    rows.push(("telltale".to_owned(), health.rate(), collector.rate()));

    // Latency at half of Telltale's collector rate: Telltale, then the durable stand-in at the
    // same rate (what the disk's syncs alone cost at that rate).
    let rate = (collector.rate() / 2.0).max(1.0);
    let mut tails = Vec::new();
    for (name, route_base) in [
        ("telltale", format!("{}/event/{tracking_key}", server.base)),
        ("durable", format!("{}/durable/key", stand_in.base)),
        ("overwrite", format!("{}/overwrite/key", stand_in.base)),
    ] {
        let mut rng = Rng::new(42);
        let mut state = (960, 540, 1_763_800_000_000);
        let (latencies, errors) = open_loop(rate, phase, move |sent| {
            let url = format!("{route_base}/{}", identifier(10_000, sent, 50));
            client_for_open(&url, Some(pointer_batch(&mut rng, &mut state)))
        })
        .await;
        tails.push((name, latencies, errors));
    }
    drop(stand_in);

    println!(
        "ceiling: {connections} connections, {seconds} s per phase, 20 pointer events per batch"
    );
    println!("  route      health req/s  batch req/s  ratio");
    for (route, health, batches) in rows {
        println!(
            "  {route:<9} {health:>12.0} {batches:>12.0}  {:.3}",
            batches / health
        );
    }
    println!("  open loop at {rate:.0} req/s (half of telltale's collector rate), latency ms:");
    for (name, latencies, errors) in tails {
        println!(
            "  {name:<9} p50 {:.2}  p99 {:.2}  max {:.2}  ({} ok, {errors} errors)",
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            percentile(&latencies, 1.0),
            latencies.len()
        );
    }
    Ok(())
}
