//! Logs and metrics: the tracing subscriber (filter, text or JSON lines) every subcommand
//! uses, and the Prometheus recorder behind `serve`'s `GET /metrics`.
//!
//! Libraries record through the `metrics` facade (`ingest`, `lake`, `scorer` name their own
//! series); this module installs the one recorder, describes every series once and keeps the
//! recorder's histogram buffers drained. The list of series is `docs/operations.md`'s.

use std::time::Duration;

use anyhow::Context;
use metrics::Unit;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// What is logged when neither `--log-filter`/`LOG_FILTER` nor `RUST_LOG` says otherwise. The
/// Delta Lake libraries log every snapshot they build at info.
pub const DEFAULT_LOG_FILTER: &str = "info,buoyant_kernel=warn,deltalake_core=warn";

/// Sets up logging to stderr: the filter from the flag (or `LOG_FILTER`), else `RUST_LOG`, else
/// [`DEFAULT_LOG_FILTER`]. An invalid filter is an error, not a silent fallback.
pub fn init_logging(flag: Option<&str>, format: LogFormat) -> anyhow::Result<()> {
    let (source, filter) = match flag {
        Some(filter) => ("--log-filter", filter.to_owned()),
        None => match std::env::var("RUST_LOG") {
            Ok(filter) if !filter.trim().is_empty() => ("RUST_LOG", filter),
            _ => ("the default log filter", DEFAULT_LOG_FILTER.to_owned()),
        },
    };
    let filter =
        EnvFilter::try_new(&filter).with_context(|| format!("invalid {source} {filter:?}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
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
    describe();
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

/// HELP lines and units of every series, in one place.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "telltale_ready",
        "1 when the last readiness check found both stores answering, else 0"
    );
    describe_counter!(
        "telltale_http_requests_total",
        "HTTP requests answered, by route, method and status"
    );
    describe_histogram!(
        "telltale_http_request_duration_seconds",
        Unit::Seconds,
        "time from a request's arrival to its response's head, by route and method"
    );
    describe_counter!(
        "telltale_collector_batches_total",
        "collector batches accepted (stored, or discarded for a deleted session)"
    );
    describe_counter!(
        "telltale_collector_events_total",
        "events in accepted collector batches"
    );
    describe_counter!(
        "telltale_collector_bytes_total",
        Unit::Bytes,
        "request body bytes of accepted collector batches"
    );
    describe_counter!(
        "telltale_collector_refusals_total",
        "collector requests refused with 503, by reason (bytes_in_flight, lake_backlog, log_unwritable)"
    );
    describe_counter!(
        "telltale_rate_limit_refusals_total",
        "requests refused with 429, by limit"
    );
    describe_gauge!(
        "telltale_collector_bytes_in_flight",
        Unit::Bytes,
        "collector body bytes being read or waiting for the log"
    );
    describe_gauge!(
        "telltale_wal_queue_depth",
        "batches waiting for the write-ahead log's writer"
    );
    describe_histogram!(
        "telltale_wal_sync_seconds",
        Unit::Seconds,
        "write and fdatasync of one group commit"
    );
    describe_histogram!(
        "telltale_wal_group_records",
        "batches made durable by one group commit"
    );
    describe_counter!(
        "telltale_wal_write_errors_total",
        "failed writes or syncs of the write-ahead log"
    );
    describe_gauge!(
        "telltale_wal_last_lsn",
        "sequence number of the newest record in the write-ahead log"
    );
    describe_gauge!(
        "telltale_log_lake_lag_records",
        "logged batches not yet committed to the lake"
    );
    describe_gauge!(
        "telltale_log_stats_lag_records",
        "logged batches not yet in the catalog's session statistics"
    );
    describe_gauge!(
        "telltale_lake_backlog_bytes",
        Unit::Bytes,
        "request body bytes logged and not yet in the lake"
    );
    describe_histogram!(
        "telltale_lake_flush_seconds",
        Unit::Seconds,
        "one flush of logged batches into the lake (encode, upload, commit)"
    );
    describe_counter!("telltale_lake_flushes_total", "flushes, by outcome");
    describe_counter!(
        "telltale_lake_flushed_events_total",
        "events written to the lake by flushes"
    );
    describe_counter!(
        "telltale_lake_flushed_files_total",
        "files written to the lake by flushes"
    );
    describe_histogram!(
        "telltale_lake_upload_seconds",
        Unit::Seconds,
        "one durable upload of a lake file"
    );
    describe_counter!(
        "telltale_lake_upload_bytes_total",
        Unit::Bytes,
        "bytes uploaded to the lake"
    );
    describe_counter!(
        "telltale_lake_upload_errors_total",
        "failed uploads to the lake"
    );
    describe_histogram!(
        "telltale_lake_commit_seconds",
        Unit::Seconds,
        "one Delta commit, retries included, by table"
    );
    describe_counter!(
        "telltale_lake_commits_total",
        "Delta commits, by table and outcome"
    );
    describe_histogram!(
        "telltale_compaction_seconds",
        Unit::Seconds,
        "one background compaction pass that merged files"
    );
    describe_counter!(
        "telltale_compaction_files_in_total",
        "events files merged away by compaction"
    );
    describe_counter!(
        "telltale_compaction_files_out_total",
        "events files written by compaction"
    );
    describe_counter!(
        "telltale_compaction_rows_total",
        "rows rewritten by compaction"
    );
    describe_counter!(
        "telltale_compaction_bytes_in_total",
        Unit::Bytes,
        "bytes of the files compaction merged away"
    );
    describe_counter!(
        "telltale_compaction_conflicts_total",
        "compaction groups skipped for a concurrent rewrite or scoring run"
    );
    describe_counter!(
        "telltale_compaction_errors_total",
        "compaction passes that failed"
    );
    describe_counter!(
        "telltale_vacuumed_files_total",
        "files deleted by the vacuum after compaction, by table"
    );
    describe_counter!(
        "telltale_erasures_total",
        "session erasure attempts, by outcome (completed, deferred, failed)"
    );
    describe_histogram!(
        "telltale_erasure_seconds",
        Unit::Seconds,
        "one completed session erasure"
    );
    describe_gauge!(
        "telltale_deletions_due",
        "session deletions due and unclaimed when this instance last looked"
    );
    describe_counter!(
        "telltale_scoring_runs_total",
        "scoring runs this instance finished, by status"
    );
    describe_histogram!(
        "telltale_scoring_run_seconds",
        Unit::Seconds,
        "a scoring run's time on this instance, by status"
    );
    describe_counter!(
        "telltale_scoring_sessions_total",
        "sessions of finished runs, by outcome (scored, failed)"
    );
}
