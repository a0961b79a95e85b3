//! What the benchmarks share: the real `telltale` server process and its memory.

#![allow(dead_code)]

pub(crate) mod load;
pub(crate) mod survey;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A `telltale serve` started by a benchmark; killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    /// The bootstrap integration key the first start on a catalog prints; empty for an
    /// instance joining a catalog that already has one.
    pub(crate) key: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the release binary on `data_dir` with the collector limits off (all load comes from
/// one address), plus `extra` flags and any in `BENCH_SERVER_ARGS`.
pub(crate) fn start_server(data_dir: &std::path::Path, extra: &[&str]) -> anyhow::Result<Server> {
    start_server_with_env(data_dir, extra, &[])
}

/// [`start_server`] with environment variables (e.g. the AWS ones of an S3 lake).
pub(crate) fn start_server_with_env(
    data_dir: &std::path::Path,
    extra: &[&str],
    env: &[(String, String)],
) -> anyhow::Result<Server> {
    let log_filter = if extra.contains(&"--log-filter") {
        Vec::new()
    } else {
        vec!["--log-filter", "warn"]
    };
    // Another build of the server for A/B comparisons in one session, e.g. a copy of the parent
    // commit's binary: BENCH_TELLTALE_BIN=/tmp/telltale-parent.
    let binary = std::env::var_os("BENCH_TELLTALE_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_telltale").into());
    // A fixed address when the caller gives one (a restart on the same port), else any port.
    let bind = if extra.contains(&"--bind") {
        Vec::new()
    } else {
        vec!["--bind", "127.0.0.1:0"]
    };
    let mut child = Command::new(binary)
        .arg("serve")
        .args(bind)
        .args(["--collector-ip-rate", "0"])
        .args(["--collector-identifier-rate", "0"])
        // All load is one survey: its request limit and new-session budget stay on (their cost
        // is measured) but out of reach. Environment variables, so that an older binary
        // without them still starts.
        .env("TELLTALE_COLLECTOR_SURVEY_RATE", "1000000")
        // Bulk loads start tens of thousands of sessions a second, past the default budget of
        // new sessions (20,000 a minute) that real respondents never reach.
        .env("TELLTALE_COLLECTOR_NEW_SESSIONS_PER_MINUTE", "1000000000")
        .args(log_filter)
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        // Extra server flags for experiments, e.g. BENCH_SERVER_ARGS="--flush-bytes 1000000000".
        .args(
            std::env::var("BENCH_SERVER_ARGS")
                .unwrap_or_default()
                .split_whitespace(),
        )
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting telltale")?;
    let stdout = child.stdout.take().context("no stdout")?;
    // From here on dropping `server` (on any error) kills the process.
    let mut server = Server {
        child,
        base: String::new(),
        key: String::new(),
    };
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Some(line) = lines.next() else {
            bail!("telltale exited early")
        };
        let line = line?;
        if let Some(value) = line.strip_prefix("TELLTALE_INTEGRATION_KEY=") {
            server.key = value.to_owned();
        }
        if let Some(address) = line.strip_prefix("telltale listening on ") {
            // Keep draining stdout so the server never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines {});
            server.base = address.to_owned();
            return Ok(server);
        }
    }
    bail!("telltale did not start in time")
}

/// Resident set size of `pid` in KiB (0 once it has exited).
pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| {
                    line.split_whitespace()
                        .nth(1)
                        .and_then(|kib| kib.parse().ok())
                })
        })
        .unwrap_or(0)
}

/// Samples the server's RSS every 100 ms until stopped; returns the peak in KiB.
pub(crate) fn watch_rss(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            peak = peak.max(rss_kib(pid));
            std::thread::sleep(Duration::from_millis(100));
        }
        peak
    })
}

/// Provisions survey `name` (its external id and its name) on `server`; returns its survey id
/// and tracking key.
pub(crate) async fn provision(
    client: &reqwest::Client,
    server: &Server,
    name: &str,
) -> anyhow::Result<(String, String)> {
    let reply: serde_json::Value = client
        .put(format!("{}/integrations/v1/surveys/{name}", server.base))
        .bearer_auth(&server.key)
        .json(&serde_json::json!({ "name": name }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let data = &reply["data"];
    Ok((
        data["surveyId"].as_str().context("surveyId")?.to_owned(),
        data["trackingKey"]
            .as_str()
            .context("trackingKey")?
            .to_owned(),
    ))
}

/// The number in environment variable `name` (e.g. `BENCH_SECONDS`), or `default` when it is
/// unset or not a number.
pub(crate) fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The server's `/metrics` text; `None` from a binary without it (an older build in an A/B).
pub(crate) async fn scrape_metrics(
    client: &reqwest::Client,
    base: &str,
) -> anyhow::Result<Option<String>> {
    let response = client.get(format!("{base}/metrics")).send().await?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    Ok(Some(response.error_for_status()?.text().await?))
}

/// The value of the series `series` (its name with labels, as the exposition writes it) in a
/// `/metrics` text; 0 when it is absent (nothing counted yet).
pub(crate) fn metric_value(text: &str, series: &str) -> anyhow::Result<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(Ok(0.0), |value| value.trim().parse::<f64>())
        .with_context(|| format!("{series} in /metrics"))
}
