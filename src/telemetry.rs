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

/// A series's kind, as Prometheus types it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One series of `docs/operations.md`: its name, kind, unit and HELP line, and the label sets
/// registered at start so that the first scrape shows it at zero (an alert on "rising" sees the
/// first event; a series absent until it moves cannot be told from one never collected).
struct Series {
    name: &'static str,
    kind: Kind,
    unit: Option<Unit>,
    help: &'static str,
    /// Label sets shown at zero from the start (`NO_LABELS`: the one unlabelled series). A
    /// series with labels of run-time values (a route, a table) shows the ones the docs name.
    zero: &'static [&'static [(&'static str, &'static str)]],
}

const NO_LABELS: &[&[(&str, &str)]] = &[&[]];
const OUTCOMES_STORED: &[&[(&str, &str)]] = &[
    &[("outcome", "stored")],
    &[("outcome", "discarded_deleted")],
];
const TABLES: &[&[(&str, &str)]] = &[
    &[("table", "events")],
    &[("table", "features")],
    &[("table", "scores")],
];

/// Every series the service records, in one place.
const SERIES: &[Series] = &[
    Series {
        name: "telltale_ready",
        kind: Kind::Gauge,
        unit: None,
        help: "1 when the last readiness check found both stores answering, else 0",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_http_requests_total",
        kind: Kind::Counter,
        unit: None,
        help: "HTTP requests answered, by route, method and status",
        zero: &[&[("route", "/metrics"), ("method", "GET"), ("status", "200")]],
    },
    Series {
        name: "telltale_http_request_duration_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "time from a request's arrival to its response's head, by route and method",
        zero: &[&[("route", "/metrics"), ("method", "GET")]],
    },
    Series {
        name: "telltale_collector_batches_total",
        kind: Kind::Counter,
        unit: None,
        help: "collector batches accepted (stored, or discarded for a deleted session)",
        zero: OUTCOMES_STORED,
    },
    Series {
        name: "telltale_collector_events_total",
        kind: Kind::Counter,
        unit: None,
        help: "events in accepted collector batches",
        zero: OUTCOMES_STORED,
    },
    Series {
        name: "telltale_collector_bytes_total",
        kind: Kind::Counter,
        unit: Some(Unit::Bytes),
        help: "request body bytes of accepted collector batches",
        zero: OUTCOMES_STORED,
    },
    Series {
        name: "telltale_collector_refusals_total",
        kind: Kind::Counter,
        unit: None,
        help: "collector requests refused with 503, by reason (bytes_in_flight, lake_backlog, log_unwritable)",
        zero: &[
            &[("reason", "bytes_in_flight")],
            &[("reason", "lake_backlog")],
            &[("reason", "log_unwritable")],
        ],
    },
    Series {
        name: "telltale_rate_limit_refusals_total",
        kind: Kind::Counter,
        unit: None,
        help: "requests refused with 429, by limit",
        zero: &[
            &[("limit", "integration_key")],
            &[("limit", "collector_ip")],
            &[("limit", "collector_survey")],
            &[("limit", "collector_identifier")],
            &[("limit", "collector_new_sessions")],
        ],
    },
    Series {
        name: "telltale_collector_bytes_in_flight",
        kind: Kind::Gauge,
        unit: Some(Unit::Bytes),
        help: "collector body bytes being read or waiting for the log",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_wal_queue_depth",
        kind: Kind::Gauge,
        unit: None,
        help: "batches waiting for the write-ahead log's writer",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_wal_sync_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "write and fdatasync of one group commit",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_wal_group_records",
        kind: Kind::Histogram,
        unit: None,
        help: "batches made durable by one group commit",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_wal_write_errors_total",
        kind: Kind::Counter,
        unit: None,
        help: "failed writes or syncs of the write-ahead log",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_wal_last_lsn",
        kind: Kind::Gauge,
        unit: None,
        help: "sequence number of the newest record in the write-ahead log",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_log_lake_lag_records",
        kind: Kind::Gauge,
        unit: None,
        help: "logged batches not yet committed to the lake",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_log_stats_lag_records",
        kind: Kind::Gauge,
        unit: None,
        help: "logged batches not yet in the catalog's session statistics",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_backlog_bytes",
        kind: Kind::Gauge,
        unit: Some(Unit::Bytes),
        help: "request body bytes logged and not yet in the lake",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_flush_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "one flush of logged batches into the lake (encode, upload, commit)",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_flushes_total",
        kind: Kind::Counter,
        unit: None,
        help: "flushes, by outcome",
        zero: &[&[("outcome", "ok")], &[("outcome", "error")]],
    },
    Series {
        name: "telltale_lake_flushed_events_total",
        kind: Kind::Counter,
        unit: None,
        help: "events written to the lake by flushes",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_flushed_files_total",
        kind: Kind::Counter,
        unit: None,
        help: "files written to the lake by flushes",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_upload_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "one durable upload of a lake file",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_upload_bytes_total",
        kind: Kind::Counter,
        unit: Some(Unit::Bytes),
        help: "bytes uploaded to the lake",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_upload_errors_total",
        kind: Kind::Counter,
        unit: None,
        help: "failed uploads to the lake",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_lake_commit_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "one Delta commit, retries included, by table",
        zero: TABLES,
    },
    Series {
        name: "telltale_lake_commits_total",
        kind: Kind::Counter,
        unit: None,
        help: "Delta commits, by table and outcome",
        zero: &[
            &[("table", "events"), ("outcome", "committed")],
            &[("table", "features"), ("outcome", "committed")],
            &[("table", "scores"), ("outcome", "committed")],
        ],
    },
    Series {
        name: "telltale_compaction_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "one background compaction pass that merged files",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_files_in_total",
        kind: Kind::Counter,
        unit: None,
        help: "events files merged away by compaction",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_files_out_total",
        kind: Kind::Counter,
        unit: None,
        help: "events files written by compaction",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_rows_total",
        kind: Kind::Counter,
        unit: None,
        help: "rows rewritten by compaction",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_bytes_in_total",
        kind: Kind::Counter,
        unit: Some(Unit::Bytes),
        help: "bytes of the files compaction merged away",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_conflicts_total",
        kind: Kind::Counter,
        unit: None,
        help: "compaction groups skipped for a concurrent rewrite or scoring run",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_compaction_errors_total",
        kind: Kind::Counter,
        unit: None,
        help: "compaction passes that failed",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_vacuumed_files_total",
        kind: Kind::Counter,
        unit: None,
        help: "files deleted by the vacuum after compaction, by table",
        zero: TABLES,
    },
    Series {
        name: "telltale_erasures_total",
        kind: Kind::Counter,
        unit: None,
        help: "session erasure attempts, by outcome (completed, deferred, failed)",
        zero: &[
            &[("outcome", "completed")],
            &[("outcome", "deferred")],
            &[("outcome", "failed")],
        ],
    },
    Series {
        name: "telltale_erasure_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "one completed session erasure",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_deletions_due",
        kind: Kind::Gauge,
        unit: None,
        help: "session deletions due and unclaimed when this instance last looked",
        zero: NO_LABELS,
    },
    Series {
        name: "telltale_scoring_runs_total",
        kind: Kind::Counter,
        unit: None,
        help: "scoring runs this instance finished, by status",
        zero: &[
            &[("status", "completed")],
            &[("status", "failed")],
            &[("status", "canceled")],
        ],
    },
    Series {
        name: "telltale_scoring_run_seconds",
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "a scoring run's time on this instance, by status",
        zero: &[&[("status", "completed")]],
    },
    Series {
        name: "telltale_scoring_sessions_total",
        kind: Kind::Counter,
        unit: None,
        help: "sessions of finished runs, by outcome (scored, failed)",
        zero: &[&[("outcome", "scored")], &[("outcome", "failed")]],
    },
];

/// Describes every series (HELP lines and units) and registers the documented label sets at
/// zero.
fn describe() {
    for series in SERIES {
        let labels = |set: &[(&'static str, &'static str)]| -> Vec<metrics::Label> {
            set.iter()
                .map(|(key, value)| metrics::Label::new(*key, *value))
                .collect()
        };
        match series.kind {
            Kind::Counter => {
                match series.unit {
                    Some(unit) => metrics::describe_counter!(series.name, unit, series.help),
                    None => metrics::describe_counter!(series.name, series.help),
                }
                for set in series.zero {
                    metrics::counter!(series.name, labels(set)).increment(0);
                }
            }
            Kind::Gauge => {
                match series.unit {
                    Some(unit) => metrics::describe_gauge!(series.name, unit, series.help),
                    None => metrics::describe_gauge!(series.name, series.help),
                }
                for set in series.zero {
                    metrics::gauge!(series.name, labels(set)).increment(0.0);
                }
            }
            Kind::Histogram => {
                match series.unit {
                    Some(unit) => metrics::describe_histogram!(series.name, unit, series.help),
                    None => metrics::describe_histogram!(series.name, series.help),
                }
                for set in series.zero {
                    // A registered histogram is rendered with empty buckets until it records.
                    let _ = metrics::histogram!(series.name, labels(set));
                }
            }
        }
    }
}
