//! Every metric series Telltale records, typed, named and described in one place.
//!
//! The libraries and the service record through these statics (`series::WAL_SYNC_SECONDS
//! .get().record(...)`), never through the `metrics` macros with a name written at the call
//! site (`clippy.toml` disallows them outside this crate). The service describes every series
//! in [`ALL`] and registers the documented label sets at zero when it installs its recorder
//! ([`describe_all`]). `docs/operations.md` lists the same series for operators.

#![allow(clippy::disallowed_macros)]

use metrics::IntoLabels;
pub use metrics::{Label, Unit};

/// What every series has: its name, unit and HELP line, and the label sets registered at start
/// so that the first scrape shows them at zero (an alert on "rising" sees the first event; a
/// series absent until it moves cannot be told from one never collected).
#[derive(Debug)]
pub struct Meta {
    pub name: &'static str,
    pub unit: Option<Unit>,
    pub help: &'static str,
    /// Label sets shown at zero from the start (`NO_LABELS`: the one unlabelled series). A
    /// series with labels of run-time values (a route, a table) shows the ones the docs name.
    pub zero: &'static [&'static [(&'static str, &'static str)]],
}

/// A counter series.
#[derive(Debug)]
pub struct CounterSeries(pub Meta);

/// A gauge series.
#[derive(Debug)]
pub struct GaugeSeries(pub Meta);

/// A histogram series (seconds unless its unit says otherwise).
#[derive(Debug)]
pub struct HistogramSeries(pub Meta);

impl CounterSeries {
    /// The unlabelled counter.
    pub fn get(&self) -> metrics::Counter {
        metrics::counter!(self.0.name)
    }

    /// The counter of one label set, e.g. `&[("outcome", "stored")]`.
    pub fn with<L: IntoLabels>(&self, labels: L) -> metrics::Counter {
        metrics::counter!(self.0.name, labels)
    }
}

impl GaugeSeries {
    /// The unlabelled gauge.
    pub fn get(&self) -> metrics::Gauge {
        metrics::gauge!(self.0.name)
    }

    /// The gauge of one label set.
    pub fn with<L: IntoLabels>(&self, labels: L) -> metrics::Gauge {
        metrics::gauge!(self.0.name, labels)
    }
}

impl HistogramSeries {
    /// The unlabelled histogram.
    pub fn get(&self) -> metrics::Histogram {
        metrics::histogram!(self.0.name)
    }

    /// The histogram of one label set.
    pub fn with<L: IntoLabels>(&self, labels: L) -> metrics::Histogram {
        metrics::histogram!(self.0.name, labels)
    }
}

/// Any series, for going through them all.
#[derive(Debug, Clone, Copy)]
pub enum Series {
    Counter(&'static CounterSeries),
    Gauge(&'static GaugeSeries),
    Histogram(&'static HistogramSeries),
}

impl Series {
    pub fn meta(&self) -> &'static Meta {
        match self {
            Series::Counter(series) => &series.0,
            Series::Gauge(series) => &series.0,
            Series::Histogram(series) => &series.0,
        }
    }
}

/// Describes every series in [`ALL`] (HELP lines and units) to the installed recorder and
/// registers the documented label sets at zero.
pub fn describe_all() {
    let labels = |set: &[(&'static str, &'static str)]| -> Vec<Label> {
        set.iter()
            .map(|(key, value)| Label::new(*key, *value))
            .collect()
    };
    for series in ALL {
        let Meta {
            name,
            unit,
            help,
            zero,
        } = series.meta();
        match series {
            Series::Counter(_) => {
                match unit {
                    Some(unit) => metrics::describe_counter!(*name, *unit, *help),
                    None => metrics::describe_counter!(*name, *help),
                }
                for set in *zero {
                    metrics::counter!(*name, labels(set)).increment(0);
                }
            }
            Series::Gauge(_) => {
                match unit {
                    Some(unit) => metrics::describe_gauge!(*name, *unit, *help),
                    None => metrics::describe_gauge!(*name, *help),
                }
                for set in *zero {
                    metrics::gauge!(*name, labels(set)).increment(0.0);
                }
            }
            Series::Histogram(_) => {
                match unit {
                    Some(unit) => metrics::describe_histogram!(*name, *unit, *help),
                    None => metrics::describe_histogram!(*name, *help),
                }
                for set in *zero {
                    // A registered histogram is rendered with empty buckets until it records.
                    let _ = metrics::histogram!(*name, labels(set));
                }
            }
        }
    }
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

pub static READY: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_ready",
    unit: None,
    help: "1 when the last readiness check found both stores answering, else 0",
    zero: NO_LABELS,
});

pub static HTTP_REQUESTS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_http_requests_total",
    unit: None,
    help: "HTTP requests answered, by route, method and status",
    zero: &[&[("route", "/metrics"), ("method", "GET"), ("status", "200")]],
});

pub static HTTP_REQUEST_DURATION_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_http_request_duration_seconds",
    unit: Some(Unit::Seconds),
    help: "time from a request's arrival to its response's head, by route and method",
    zero: &[&[("route", "/metrics"), ("method", "GET")]],
});

pub static COLLECTOR_BATCHES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_collector_batches_total",
    unit: None,
    help: "collector batches accepted (stored, or discarded for a deleted session)",
    zero: OUTCOMES_STORED,
});

pub static COLLECTOR_EVENTS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_collector_events_total",
    unit: None,
    help: "events in accepted collector batches",
    zero: OUTCOMES_STORED,
});

pub static COLLECTOR_BYTES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_collector_bytes_total",
    unit: Some(Unit::Bytes),
    help: "request body bytes of accepted collector batches",
    zero: OUTCOMES_STORED,
});

pub static COLLECTOR_REFUSALS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_collector_refusals_total",
    unit: None,
    help: "collector requests refused with 503, by reason (bytes_in_flight, lake_backlog, log_unwritable)",
    zero: &[
        &[("reason", "bytes_in_flight")],
        &[("reason", "lake_backlog")],
        &[("reason", "log_unwritable")],
    ],
});

pub static RATE_LIMIT_REFUSALS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_rate_limit_refusals_total",
    unit: None,
    help: "requests refused with 429, by limit",
    zero: &[
        &[("limit", "integration_key")],
        &[("limit", "collector_ip")],
        &[("limit", "collector_survey")],
        &[("limit", "collector_identifier")],
        &[("limit", "collector_new_sessions")],
        &[("limit", "failed_auth")],
        &[("limit", "signed_link")],
    ],
});

pub static COLLECTOR_BYTES_IN_FLIGHT: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_collector_bytes_in_flight",
    unit: Some(Unit::Bytes),
    help: "collector body bytes being read or waiting for the log",
    zero: NO_LABELS,
});

pub static WAL_QUEUE_DEPTH: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_wal_queue_depth",
    unit: None,
    help: "batches waiting for the write-ahead log's writer",
    zero: NO_LABELS,
});

pub static WAL_SYNC_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_wal_sync_seconds",
    unit: Some(Unit::Seconds),
    help: "write and fdatasync of one group commit",
    zero: NO_LABELS,
});

pub static WAL_GROUP_RECORDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_wal_group_records",
    unit: None,
    help: "batches made durable by one group commit",
    zero: NO_LABELS,
});

pub static WAL_WRITE_ERRORS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_wal_write_errors_total",
    unit: None,
    help: "failed writes or syncs of the write-ahead log",
    zero: NO_LABELS,
});

pub static WAL_LAST_LSN: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_wal_last_lsn",
    unit: None,
    help: "sequence number of the newest record in the write-ahead log",
    zero: NO_LABELS,
});

pub static LOG_LAKE_LAG_RECORDS: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_log_lake_lag_records",
    unit: None,
    help: "logged batches not yet committed to the lake",
    zero: NO_LABELS,
});

pub static LOG_STATS_LAG_RECORDS: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_log_stats_lag_records",
    unit: None,
    help: "logged batches not yet in the catalog's session statistics",
    zero: NO_LABELS,
});

pub static LAKE_BACKLOG_BYTES: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_lake_backlog_bytes",
    unit: Some(Unit::Bytes),
    help: "request body bytes logged and not yet in the lake",
    zero: NO_LABELS,
});

pub static LAKE_FLUSH_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_lake_flush_seconds",
    unit: Some(Unit::Seconds),
    help: "one flush of logged batches into the lake (encode, upload, commit)",
    zero: NO_LABELS,
});

pub static LAKE_FLUSHES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_flushes_total",
    unit: None,
    help: "flushes, by outcome",
    zero: &[&[("outcome", "ok")], &[("outcome", "error")]],
});

pub static LAKE_FLUSHED_EVENTS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_flushed_events_total",
    unit: None,
    help: "events written to the lake by flushes",
    zero: NO_LABELS,
});

pub static LAKE_FLUSHED_FILES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_flushed_files_total",
    unit: None,
    help: "files written to the lake by flushes",
    zero: NO_LABELS,
});

pub static LAKE_UPLOAD_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_lake_upload_seconds",
    unit: Some(Unit::Seconds),
    help: "one durable upload of a lake file",
    zero: NO_LABELS,
});

pub static LAKE_UPLOAD_BYTES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_upload_bytes_total",
    unit: Some(Unit::Bytes),
    help: "bytes uploaded to the lake",
    zero: NO_LABELS,
});

pub static LAKE_UPLOAD_ERRORS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_upload_errors_total",
    unit: None,
    help: "failed uploads to the lake",
    zero: NO_LABELS,
});

pub static LAKE_COMMIT_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_lake_commit_seconds",
    unit: Some(Unit::Seconds),
    help: "one Delta commit, retries included, by table",
    zero: TABLES,
});

pub static LAKE_COMMITS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_lake_commits_total",
    unit: None,
    help: "Delta commits, by table and outcome",
    zero: &[
        &[("table", "events"), ("outcome", "committed")],
        &[("table", "features"), ("outcome", "committed")],
        &[("table", "scores"), ("outcome", "committed")],
    ],
});

pub static COMPACTION_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_compaction_seconds",
    unit: Some(Unit::Seconds),
    help: "one background compaction pass that merged files",
    zero: NO_LABELS,
});

pub static COMPACTION_FILES_IN_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_files_in_total",
    unit: None,
    help: "events files merged away by compaction",
    zero: NO_LABELS,
});

pub static COMPACTION_FILES_OUT_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_files_out_total",
    unit: None,
    help: "events files written by compaction",
    zero: NO_LABELS,
});

pub static COMPACTION_ROWS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_rows_total",
    unit: None,
    help: "rows rewritten by compaction",
    zero: NO_LABELS,
});

pub static COMPACTION_BYTES_IN_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_bytes_in_total",
    unit: Some(Unit::Bytes),
    help: "bytes of the files compaction merged away",
    zero: NO_LABELS,
});

pub static COMPACTION_CONFLICTS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_conflicts_total",
    unit: None,
    help: "compaction groups skipped for a concurrent rewrite or scoring run",
    zero: NO_LABELS,
});

pub static COMPACTION_ERRORS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_compaction_errors_total",
    unit: None,
    help: "compaction passes that failed",
    zero: NO_LABELS,
});

pub static VACUUMED_FILES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_vacuumed_files_total",
    unit: None,
    help: "files deleted by the vacuum after compaction, by table",
    zero: TABLES,
});

pub static ERASURES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_erasures_total",
    unit: None,
    help: "session erasure attempts, by outcome (completed, deferred, failed)",
    zero: &[
        &[("outcome", "completed")],
        &[("outcome", "deferred")],
        &[("outcome", "failed")],
    ],
});

pub static ERASURE_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_erasure_seconds",
    unit: Some(Unit::Seconds),
    help: "one completed session erasure",
    zero: NO_LABELS,
});

pub static DELETIONS_DUE: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_deletions_due",
    unit: None,
    help: "session deletions due and unclaimed when this instance last looked",
    zero: NO_LABELS,
});

pub static DELETIONS_WAITING: GaugeSeries = GaugeSeries(Meta {
    name: "telltale_deletions_waiting",
    unit: None,
    help: "session deletions this instance last found waiting, by what they wait on (an \
           instance's log purge, a scoring run, an upload or rewrite in flight); each \
           deletion's resource names it and says why",
    zero: &[&[("on", "instance")], &[("on", "run")], &[("on", "lake")]],
});

pub static FLEET_FENCES_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_fleet_fences_total",
    unit: None,
    help: "instances this instance's erasures fenced off after their lease lapsed",
    zero: NO_LABELS,
});

pub static FLEET_REJOINS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_fleet_rejoins_total",
    unit: None,
    help: "times this instance found itself fenced off and joined the fleet again",
    zero: NO_LABELS,
});

pub static SCORING_RUNS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_scoring_runs_total",
    unit: None,
    help: "scoring runs this instance finished, by status",
    zero: &[
        &[("status", "completed")],
        &[("status", "failed")],
        &[("status", "canceled")],
    ],
});

pub static SCORING_RUN_SECONDS: HistogramSeries = HistogramSeries(Meta {
    name: "telltale_scoring_run_seconds",
    unit: Some(Unit::Seconds),
    help: "a scoring run's time on this instance, by status",
    zero: &[&[("status", "completed")]],
});

pub static SCORING_SESSIONS_TOTAL: CounterSeries = CounterSeries(Meta {
    name: "telltale_scoring_sessions_total",
    unit: None,
    help: "sessions of finished runs, by outcome (scored, failed, deferred to a later run)",
    zero: &[
        &[("outcome", "scored")],
        &[("outcome", "failed")],
        &[("outcome", "deferred")],
    ],
});

/// Every series, in the order `docs/operations.md` lists them.
pub static ALL: &[Series] = &[
    Series::Gauge(&READY),
    Series::Counter(&HTTP_REQUESTS_TOTAL),
    Series::Histogram(&HTTP_REQUEST_DURATION_SECONDS),
    Series::Counter(&COLLECTOR_BATCHES_TOTAL),
    Series::Counter(&COLLECTOR_EVENTS_TOTAL),
    Series::Counter(&COLLECTOR_BYTES_TOTAL),
    Series::Counter(&COLLECTOR_REFUSALS_TOTAL),
    Series::Counter(&RATE_LIMIT_REFUSALS_TOTAL),
    Series::Gauge(&COLLECTOR_BYTES_IN_FLIGHT),
    Series::Gauge(&WAL_QUEUE_DEPTH),
    Series::Histogram(&WAL_SYNC_SECONDS),
    Series::Histogram(&WAL_GROUP_RECORDS),
    Series::Counter(&WAL_WRITE_ERRORS_TOTAL),
    Series::Gauge(&WAL_LAST_LSN),
    Series::Gauge(&LOG_LAKE_LAG_RECORDS),
    Series::Gauge(&LOG_STATS_LAG_RECORDS),
    Series::Gauge(&LAKE_BACKLOG_BYTES),
    Series::Histogram(&LAKE_FLUSH_SECONDS),
    Series::Counter(&LAKE_FLUSHES_TOTAL),
    Series::Counter(&LAKE_FLUSHED_EVENTS_TOTAL),
    Series::Counter(&LAKE_FLUSHED_FILES_TOTAL),
    Series::Histogram(&LAKE_UPLOAD_SECONDS),
    Series::Counter(&LAKE_UPLOAD_BYTES_TOTAL),
    Series::Counter(&LAKE_UPLOAD_ERRORS_TOTAL),
    Series::Histogram(&LAKE_COMMIT_SECONDS),
    Series::Counter(&LAKE_COMMITS_TOTAL),
    Series::Histogram(&COMPACTION_SECONDS),
    Series::Counter(&COMPACTION_FILES_IN_TOTAL),
    Series::Counter(&COMPACTION_FILES_OUT_TOTAL),
    Series::Counter(&COMPACTION_ROWS_TOTAL),
    Series::Counter(&COMPACTION_BYTES_IN_TOTAL),
    Series::Counter(&COMPACTION_CONFLICTS_TOTAL),
    Series::Counter(&COMPACTION_ERRORS_TOTAL),
    Series::Counter(&VACUUMED_FILES_TOTAL),
    Series::Counter(&ERASURES_TOTAL),
    Series::Histogram(&ERASURE_SECONDS),
    Series::Gauge(&DELETIONS_DUE),
    Series::Gauge(&DELETIONS_WAITING),
    Series::Counter(&FLEET_FENCES_TOTAL),
    Series::Counter(&FLEET_REJOINS_TOTAL),
    Series::Counter(&SCORING_RUNS_TOTAL),
    Series::Histogram(&SCORING_RUN_SECONDS),
    Series::Counter(&SCORING_SESSIONS_TOTAL),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_prometheus_conventions() {
        let mut names = std::collections::HashSet::new();
        for series in ALL {
            let meta = series.meta();
            assert!(names.insert(meta.name), "{} twice", meta.name);
            assert!(meta.name.starts_with("telltale_"), "{}", meta.name);
            let counter = matches!(series, Series::Counter(_));
            assert_eq!(counter, meta.name.ends_with("_total"), "{}", meta.name);
            if meta.name.ends_with("_seconds") {
                assert!(matches!(meta.unit, Some(Unit::Seconds)), "{}", meta.name);
            }
            assert!(
                !meta.zero.is_empty(),
                "{} registers no label set",
                meta.name
            );
        }
    }
}
