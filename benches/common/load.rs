//! Load generation the benchmarks share: pointer batches as the embed sends them, a closed
//! loop of connections sending back to back, and latency percentiles.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

pub(crate) const EVENTS_PER_BATCH: usize = 20;

/// A fast seeded generator (xoshiro256++): generating bodies must not dominate the client's CPU.
pub(crate) struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub(crate) fn step(&mut self, spread: i64) -> i64 {
        (self.next() % (2 * spread as u64 + 1)) as i64 - spread
    }
}

/// A pointer path continuing from `state`: small moves every ~16 ms, as a browser samples them.
pub(crate) fn pointer_batch(rng: &mut Rng, state: &mut (i64, i64, i64)) -> String {
    let mut body = String::with_capacity(EVENTS_PER_BATCH * 110 + 16);
    body.push_str("{\"events\":[");
    for index in 0..EVENTS_PER_BATCH {
        state.0 = (state.0 + rng.step(6)).clamp(0, 1920);
        state.1 = (state.1 + rng.step(6)).clamp(0, 1080);
        state.2 += 16 + rng.step(3);
        if index > 0 {
            body.push(',');
        }
        let _ = write!(
            body,
            "{{\"type\":\"pointermove\",\"timestamp\":{},\"data\":{{\"x\":{},\"y\":{},\"pointerType\":\"mouse\",\"trusted\":true}}}}",
            state.2, state.0, state.1
        );
    }
    body.push_str("]}");
    body
}

pub(crate) struct Throughput {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) seconds: f64,
}

impl Throughput {
    pub(crate) fn rate(&self) -> f64 {
        self.requests as f64 / self.seconds
    }
}

/// Closed loop: `connections` tasks send back to back for `duration`.
pub(crate) async fn closed_loop(
    client: &reqwest::Client,
    connections: usize,
    duration: Duration,
    request: impl Fn(&reqwest::Client, usize, &mut Rng, &mut (i64, i64, i64)) -> reqwest::RequestBuilder
    + Send
    + Sync
    + Clone
    + 'static,
) -> Throughput {
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for worker in 0..connections {
        let (client, ok, errors, request) =
            (client.clone(), ok.clone(), errors.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(worker as u64 + 1);
            let mut state = (960, 540, 1_763_800_000_000);
            while Instant::now() < deadline {
                match request(&client, worker, &mut rng, &mut state).send().await {
                    Ok(response) if response.status().is_success() => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    Throughput {
        requests: ok.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The browser session of a connection's `serial`-th batch: each connection plays one session
/// of `batches_per_session` batches after another.
pub(crate) fn identifier(worker: usize, serial: u64, batches_per_session: u64) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        worker,
        serial / batches_per_session
    )
}

/// The `p`-quantile of sorted latencies (nearest rank), in milliseconds: the one definition
/// every benchmark reports.
pub(crate) fn percentile(latencies: &[Duration], p: f64) -> f64 {
    if latencies.is_empty() {
        return f64::NAN;
    }
    let index = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
    latencies[index].as_secs_f64() * 1000.0
}

/// One request of the open loop: a POST of `body`, or a GET.
pub(crate) struct OpenRequest {
    pub(crate) url: String,
    pub(crate) body: Option<String>,
}

pub(crate) fn client_for_open(url: &str, body: Option<String>) -> OpenRequest {
    OpenRequest {
        url: url.to_owned(),
        body,
    }
}

/// Open loop: requests start on a fixed schedule whatever the answers' latency, and each latency
/// is timed from its scheduled start, so queueing (in the client or the server) is counted.
/// Returns the sorted latencies of successful requests and the number of failures.
pub(crate) async fn open_loop(
    rate: f64,
    duration: Duration,
    mut next: impl FnMut(u64) -> OpenRequest,
) -> (Vec<Duration>, u64) {
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .pool_max_idle_per_host(256)
        .build()
        .unwrap_or_default();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let latencies = Arc::new(parking_lot::Mutex::new(Vec::with_capacity(
        (rate as usize + 1) * duration.as_secs() as usize,
    )));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut in_flight = Vec::new();
    let mut sent: u64 = 0;
    while start.elapsed() < duration {
        let scheduled = start + interval.mul_f64(sent as f64);
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let OpenRequest { url, body } = next(sent);
        let request = match body {
            Some(body) => client
                .post(url)
                .header("content-type", "text/plain")
                .body(body),
            None => client.get(url),
        };
        let (latencies, errors) = (latencies.clone(), errors.clone());
        in_flight.push(tokio::spawn(async move {
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    latencies.lock().push(scheduled.elapsed())
                }
                _ => {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
        sent += 1;
    }
    for task in in_flight {
        let _ = task.await;
    }
    let mut latencies = std::mem::take(&mut *latencies.lock());
    latencies.sort();
    (latencies, errors.load(Ordering::Relaxed))
}
