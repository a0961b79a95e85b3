//! Logs and metrics: the tracing subscriber (filter, text or JSON lines) every subcommand
//! uses, and the Prometheus recorder behind `serve`'s `GET /metrics`.
//!
//! Libraries record through the `metrics` facade (`ingest`, `lake`, `scorer` name their own
//! series); this module installs the one recorder, describes every series once and keeps the
//! recorder's histogram buffers drained. The list of series is `docs/operations.md`'s.

use std::time::Duration;

use anyhow::Context;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// What is logged when neither `--log-filter`/`LOG_FILTER` nor `RUST_LOG` says otherwise. The
/// Delta Lake libraries log every snapshot they build at info.
pub const DEFAULT_LOG_FILTER: &str = "info,buoyant_kernel=warn,deltalake_core=warn";

/// What `telltale score` logs by default while its progress bar is drawn on a terminal: the bar
/// says what info lines would (and a line written under a bar breaks it).
pub const PROGRESS_LOG_FILTER: &str = "warn";

/// Sets up logging to stderr: the filter from the flag (or `LOG_FILTER`), else `RUST_LOG`, else
/// `default` ([`DEFAULT_LOG_FILTER`] but for a progress bar). An invalid filter is an error,
/// not a silent fallback.
pub fn init_logging(flag: Option<&str>, format: LogFormat, default: &str) -> anyhow::Result<()> {
    let (source, filter) = match flag {
        Some(filter) => ("--log-filter", filter.to_owned()),
        None => match std::env::var("RUST_LOG") {
            Ok(filter) if !filter.trim().is_empty() => ("RUST_LOG", filter),
            _ => ("the default log filter", default.to_owned()),
        },
    };
    let filter =
        EnvFilter::try_new(&filter).with_context(|| format!("invalid {source} {filter:?}"))?;
    // Colours only for a person at a terminal: a file or a log collector gets plain text.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(terminal)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        // One object per line with the event's fields at the top level and the request span's
        // fields (route, method) beside them.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|error| anyhow::anyhow!("cannot set up logging: {error}"))
}

/// Histogram bucket bounds in seconds (also used for the record counts of a group commit,
/// which are rendered with [`GROUP_BUCKETS`]).
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];
const GROUP_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// How often the recorder's histogram samples are folded into buckets between scrapes (without
/// it, samples of an instance nobody scrapes would pile up in memory).
const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Installs the process-wide Prometheus recorder and describes every series. Call before
/// anything records (handles taken earlier record nowhere), inside the runtime (the upkeep
/// task is spawned on it).
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets(SECONDS_BUCKETS)
        .context("histogram buckets")?
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("telltale_wal_group_records".to_owned()),
            GROUP_BUCKETS,
        )
        .context("histogram buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    series::describe_all();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_PERIOD);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
