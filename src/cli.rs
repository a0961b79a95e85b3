//! Command-line interface: every flag has a long name, an environment variable and a default.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `telltale --version`: the release and the commit it was built from (see `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TELLTALE_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "telltale",
    version = VERSION,
    about = "Behavioural scoring of survey sessions: human-like or automation-like"
)]
pub struct Cli {
    #[command(flatten)]
    pub storage: StorageArgs,

    /// Log filter, in tracing's env-filter syntax (e.g. `info,ingest=debug`); without it
    /// `RUST_LOG` is read, and without that the default: info, with the Delta Lake libraries
    /// (which log every snapshot they build at info) at warn.
    #[arg(long, env = "LOG_FILTER", global = true)]
    pub log_filter: Option<String>,

    /// Log lines as text (for people) or as one JSON object per line (for log collectors).
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// Where the catalog and the lake live. Shared by every subcommand so that the command line and
/// a running server can use one catalog.
#[derive(Debug, Clone, Args)]
pub struct StorageArgs {
    /// Folder for the embedded defaults: catalog, lake and write-ahead log.
    #[arg(
        long,
        env = "TELLTALE_DATA_DIR",
        default_value = "./telltale-data",
        global = true
    )]
    pub data_dir: PathBuf,

    /// Catalog URL; default `sqlite://<data-dir>/catalog.db`.
    #[arg(long, env = "TELLTALE_CATALOG_URL", global = true)]
    pub catalog: Option<String>,

    /// Lake URL: a folder, `file:///path`, or `s3://bucket[/prefix]` (endpoint, region and
    /// credentials from the AWS environment variables); default `<data-dir>/lake`.
    #[arg(long, env = "TELLTALE_LAKE_URL", global = true)]
    pub lake: Option<String>,
}

impl StorageArgs {
    pub fn catalog_url(&self) -> String {
        self.catalog
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("catalog.db").display()))
    }

    pub fn lake_url(&self) -> String {
        self.lake
            .clone()
            .unwrap_or_else(|| self.data_dir.join("lake").display().to_string())
    }

    /// The deployment's settings, as the `instance` crate takes them.
    pub fn settings(&self) -> instance::Settings {
        let mut settings = instance::Settings::new(
            self.data_dir.clone(),
            self.catalog.clone(),
            self.lake.clone(),
        );
        settings.s3 = self.s3_settings();
        settings
    }

    /// An S3 lake's settings: the process's `AWS_*` environment variables (`AWS_ENDPOINT`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`...), as the
    /// AWS tools read them. The binary reads the environment; the lake crate is handed them.
    pub fn s3_settings(&self) -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(name, _)| name.starts_with("AWS_"))
            .collect()
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service: collector, integration API and status.
    Serve(ServeArgs),
    /// Manage organizations.
    #[command(subcommand)]
    Org(OrgCommand),
    /// Manage integration keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Run a scoring run from the shell and show its progress.
    ///
    /// Scores what the lake and the catalog hold. Events a running server acknowledged in the
    /// last flush interval (10 s by default) may not be in the lake yet; a run started through
    /// the API flushes them first.
    Score {
        /// The survey's id (24 hex characters).
        #[arg(long = "survey", value_name = "SURVEY_ID")]
        survey: String,
        /// Re-score sessions that already have a score.
        #[arg(long)]
        force: bool,
        /// Print the finished run as JSON instead of a summary.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        scoring: ScoringArgs,
    },
    /// Run SQL over the lake's `events`, `features` and `scores` tables (DataFusion), as their
    /// Delta logs' newest snapshots have them, or as of an earlier point.
    Sql {
        /// The query, e.g. "SELECT score_band, count(*) FROM scores GROUP BY 1".
        query: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
        format: SqlFormat,
        /// Read the tables as they were: an RFC 3339 time (each table's newest version committed
        /// by then), or a version of the `events` table (the other two as of that version's
        /// commit time). Reaches back as far as the lake retention keeps replaced files.
        #[arg(long, value_name = "VERSION|TIME")]
        as_of: Option<String>,
    },
    /// Flush this data dir's write-ahead log into the lake and the catalog, then exit: run it
    /// on an instance's data dir after stopping its server and before retiring the machine.
    ///
    /// Fails while a server holds the log. Exits 0 only when every record of the log is in the
    /// lake and the session statistics, after which the data dir can be deleted.
    Drain {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give up a fleet instance whose data dir is lost: fence it off and record it as gone, so
    /// that scoring runs stop waiting for the events its log held and backups without a log
    /// stop refusing for it (docs/deploy.md, "Instances and their logs").
    ///
    /// Refused while the instance reported within the lease. Whatever its log acknowledged and
    /// had not flushed is given up; with the data dir at hand, `telltale drain` it instead.
    ForgetInstance {
        /// The instance's id (its data dir's `instance-id`; in `deferredReason` and in the
        /// deletion's `waitingOn`).
        #[arg(value_name = "INSTANCE_ID")]
        instance: String,
        /// An instance not seen for this long (by the catalog's clock) counts as stopped; the
        /// fleet's `--instance-lease-secs`.
        #[arg(
            long,
            env = "TELLTALE_INSTANCE_LEASE_SECS",
            default_value_t = 30,
            value_parser = clap::value_parser!(u64).range(1..)
        )]
        instance_lease_secs: u64,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy this deployment (the catalog, the lake's tables and this data dir's write-ahead
    /// log) into a new folder, consistently, while its server runs (docs/backup.md).
    ///
    /// The log is held (no segment is retired) while the lake's tables are copied, each as of
    /// one version, then the catalog (SQLite's `VACUUM INTO`, or `pg_dump` for PostgreSQL), then
    /// the log's segments. Restored, the log replays what the lake copy lacks.
    Backup {
        /// The folder to write: new, or empty.
        #[arg(long, value_name = "FOLDER")]
        to: PathBuf,
        /// Back up without the write-ahead log (a machine other than the instance's). Checked:
        /// every running instance is asked to flush what it acknowledged and must answer within
        /// 30 s, and every stopped one must have left cleanly (stopped with its log flushed, or
        /// `telltale drain`ed). Without this flag a data dir with no log is refused: the
        /// batches it would hold would be lost.
        #[arg(long)]
        without_log: bool,
        /// An instance not seen for this long (by the catalog's clock) counts as stopped, for
        /// `--without-log`; the fleet's `--instance-lease-secs`.
        #[arg(
            long,
            env = "TELLTALE_INSTANCE_LEASE_SECS",
            default_value_t = 30,
            value_parser = clap::value_parser!(u64).range(1..)
        )]
        instance_lease_secs: u64,
        /// Print the backup's manifest as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Restore a backup into this (empty) data dir, catalog and lake; then start `serve` on
    /// them. Every deletion in the backup is done again, and with `--tombstones-from` the
    /// deletions requested after the backup are requested too: no erased session comes back.
    Restore {
        /// The backup's folder (`telltale backup --to`).
        #[arg(long, value_name = "FOLDER")]
        from: PathBuf,
        /// A catalog that holds the deletions requested since the backup, usually the one the
        /// backup was taken from (`sqlite:///path` or `postgres://...`); read for its
        /// tombstones, never changed (no migration). Required, or `--without-tombstones`.
        #[arg(long, value_name = "CATALOG_URL")]
        tombstones_from: Option<String>,
        /// Restore without a source of the deletions requested since the backup (there is no
        /// such catalog left, or they will be requested again): sessions erased after the
        /// backup come back until then.
        #[arg(long)]
        without_tombstones: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read this data dir's write-ahead log out, or log recorded batches into it.
    #[command(subcommand)]
    Log(LogCommand),
    /// Score sessions from their feature rows (JSON lines `{"reference", "features": {name:
    /// value}}`, the `features` table's columns) as one survey's scoring run would: the cohort
    /// of all of them, then the model. Prints one JSON line a session.
    ScoreFeatures {
        /// The rows; standard input when omitted.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        #[command(flatten)]
        scoring: ScoringArgs,
    },
    /// Merge small events files into large ones sorted by session (what `serve` does in the
    /// background every `--compaction-interval-secs`).
    Compact {
        /// Only this survey's files (24 hex characters); default every survey.
        #[arg(long = "survey", value_name = "SURVEY_ID")]
        survey: Option<String>,
        /// Rows a compacted file holds at most.
        #[arg(
            long,
            env = "TELLTALE_COMPACTION_TARGET_ROWS",
            default_value_t = 2_000_000,
            value_parser = clap::value_parser!(u64).range(2..)
        )]
        target_rows: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete the lake files no table snapshot of the last `--retention-secs` needs: files a
    /// compaction replaced at least that long ago, and uploads no commit names (a writer died
    /// before its commit) at least that old. What `serve` does after each background
    /// compaction. A retention shorter than a writer's upload-to-commit time (seconds) can
    /// delete an upload a running server is about to commit: keep it at minutes unless every
    /// server on the lake is stopped or idle.
    Vacuum {
        /// Keep files removed (or uploaded) less than this long ago.
        #[arg(long, env = "TELLTALE_LAKE_RETENTION_SECS", default_value_t = 3600)]
        retention_secs: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Print every record this data dir's write-ahead log holds as JSON lines (`lsn`,
    /// `receivedAt`, `surveyId`, `identifier`, `body`: the request body as received). Reads the
    /// log without changing it; fails while a server or a drain holds it.
    Export {
        /// Write to this file instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Log batches another deployment's collector received (JSON lines as `export` writes
    /// them, gzip-compressed when the name ends in `.gz`) for a survey of this one, through the
    /// collector's path with their recorded arrival times, then flush them into the lake and
    /// the session statistics. Fails while a server holds the log.
    Import {
        /// The survey the batches go to (24 hex characters); it must be provisioned.
        #[arg(long = "survey", value_name = "SURVEY_ID")]
        survey: String,
        /// The recorded batches.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SqlFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, env = "TELLTALE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// Public base URL of this service, used in provisioning results; default `http://<bind>`.
    #[arg(long, env = "TELLTALE_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Secret that signs review links (at least 32 characters). Default: one made at first
    /// start and kept in the data dir (`review-secret`); instances of a fleet need the same one.
    #[arg(long, env = "TELLTALE_REVIEW_SECRET", hide_env_values = true)]
    pub review_secret: Option<String>,

    /// Milliseconds between flushes of buffered events to the lake.
    #[arg(
        long,
        env = "TELLTALE_FLUSH_INTERVAL_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(100..)
    )]
    pub flush_interval_ms: u64,

    /// Buffered request bytes that trigger a flush to the lake before the interval.
    #[arg(
        long,
        env = "TELLTALE_FLUSH_BYTES",
        default_value_t = 32 * 1024 * 1024,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(65_536..)
    )]
    pub flush_bytes: usize,

    /// Collector requests per second allowed from one client IP (0: unlimited).
    #[arg(long, env = "TELLTALE_COLLECTOR_IP_RATE", default_value_t = 1000)]
    pub collector_ip_rate: u32,

    /// Collector requests per second allowed for one browser-session identifier (0: unlimited).
    #[arg(long, env = "TELLTALE_COLLECTOR_IDENTIFIER_RATE", default_value_t = 20)]
    pub collector_identifier_rate: u32,

    /// Collector requests per second for one survey (tracking key) on this instance (0:
    /// unlimited). The embed sends at most one batch every 2 s per active respondent, so the
    /// default lets 10,000 respondents of one survey be active at once on each instance.
    #[arg(long, env = "TELLTALE_COLLECTOR_SURVEY_RATE", default_value_t = 5000)]
    pub collector_survey_rate: u32,

    /// New browser sessions one survey may start per minute on this instance (0: unlimited);
    /// past it a new identifier gets 429 while known ones go on. The default lets 100,000
    /// respondents start within five minutes.
    #[arg(
        long,
        env = "TELLTALE_COLLECTOR_NEW_SESSIONS_PER_MINUTE",
        default_value_t = 20_000
    )]
    pub collector_new_sessions_per_minute: u32,

    /// Bytes of collector request bodies read or waiting for the log at once (declared
    /// `Content-Length`; a chunked body counts as the 1 MiB limit); past it a request gets 503
    /// with `Retry-After` before its body is read.
    #[arg(
        long,
        env = "TELLTALE_COLLECTOR_BYTES_IN_FLIGHT",
        default_value_t = 64 * 1024 * 1024
    )]
    pub collector_bytes_in_flight: usize,

    /// Seconds a client has to send a whole request body before it gets 408.
    #[arg(
        long,
        env = "TELLTALE_BODY_TIMEOUT_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub body_timeout_secs: u64,

    /// Behind a load balancer: take the client address for the per-IP limits from the last
    /// `X-Forwarded-For` entry instead of the TCP peer.
    #[arg(long, env = "TELLTALE_TRUST_FORWARDED_FOR", default_value_t = false)]
    pub trust_forwarded_for: bool,

    /// Integration requests with a well-formed key that is wrong, revoked or of a deleted
    /// organization, per client address per rolling minute, per instance; past it the address
    /// gets 429 before its key is looked up (0: off).
    #[arg(long, env = "TELLTALE_FAILED_AUTH_PER_MINUTE", default_value_t = 20)]
    pub failed_auth_per_minute: u32,

    /// Requests to signed review and desk links per second per client address, per instance,
    /// bursts of four times that; past it 429 before the link is checked (0: off).
    #[arg(long, env = "TELLTALE_SIGNED_LINK_RATE", default_value_t = 50)]
    pub signed_link_rate: u32,

    /// Connections served at once; past it a new connection gets a 503 with `Retry-After` and
    /// is closed, so a flood of connections cannot exhaust memory or file descriptors.
    #[arg(long, env = "TELLTALE_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Seconds a client has to send a request's headers (and an idle kept-alive connection to
    /// start its next request) before the connection is closed: slow-header clients cannot hold
    /// connections.
    #[arg(
        long,
        env = "TELLTALE_HEADER_TIMEOUT_SECS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub header_timeout_secs: u64,

    /// Integration API requests per key per rolling minute.
    #[arg(long, env = "TELLTALE_API_RATE_PER_MINUTE", default_value_t = 120)]
    pub api_rate_per_minute: u32,

    /// Seconds between background compactions of small events files (0: never).
    #[arg(long, env = "TELLTALE_COMPACTION_INTERVAL_SECS", default_value_t = 300)]
    pub compaction_interval_secs: u64,

    /// Rows a compacted events file holds at most.
    #[arg(
        long,
        env = "TELLTALE_COMPACTION_TARGET_ROWS",
        default_value_t = 2_000_000,
        value_parser = clap::value_parser!(u64).range(2..)
    )]
    pub compaction_target_rows: u64,

    /// Seconds a file a compaction replaced stays in the lake for readers of older snapshots
    /// (and `telltale sql --as-of`) before the vacuum after a compaction deletes it, and commit
    /// files in `_delta_log/` once a checkpoint covers them; also how old an upload no commit
    /// names must be before the vacuum takes it for a dead writer's.
    #[arg(long, env = "TELLTALE_LAKE_RETENTION_SECS", default_value_t = 3600)]
    pub lake_retention_secs: u64,

    #[command(flatten)]
    pub scoring: ScoringArgs,
}

/// How scoring runs work; shared by `serve` and `score`.
#[derive(Debug, Clone, Args)]
pub struct ScoringArgs {
    /// A model file to score with instead of the built-in one (see scorer/models/).
    #[arg(long, env = "TELLTALE_MODEL")]
    pub model: Option<PathBuf>,

    /// Sessions scored and published per step of a run; counters move after each step.
    #[arg(
        long,
        env = "TELLTALE_SCORING_CHUNK_SESSIONS",
        default_value_t = 50_000,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub scoring_chunk_sessions: usize,

    /// Most events a run holds in memory at once; larger surveys are read in several passes.
    #[arg(
        long,
        env = "TELLTALE_SCORING_MAX_EVENTS_PER_PASS",
        default_value_t = 12_000_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub scoring_max_events_per_pass: u64,

    /// Milliseconds to pause between steps of a run (throttles runs on a busy instance).
    #[arg(long, env = "TELLTALE_SCORING_PAUSE_MS", default_value_t = 0)]
    pub scoring_pause_ms: u64,

    /// Seconds a worker's hold on a run lasts without renewal; renewed every third of it. When
    /// an instance dies, another takes its runs over once this has passed.
    #[arg(
        long,
        env = "TELLTALE_SCORING_LEASE_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub scoring_lease_secs: u64,

    /// Seconds after which an instance that stopped reporting itself (4 times a lease, by the
    /// catalog's clock) no longer holds up erasures, which fence it off instead (it can write
    /// nothing more until it joins again), and is not asked to flush for a scoring run.
    #[arg(
        long,
        env = "TELLTALE_INSTANCE_LEASE_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub instance_lease_secs: u64,

    /// Seconds a scoring run waits for the fleet's other live instances to flush what they
    /// acknowledged before it plans; a session whose events are still missing then is deferred
    /// to a later run, never scored on part of them.
    #[arg(
        long,
        env = "TELLTALE_FLEET_FLUSH_WAIT_SECS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub fleet_flush_wait_secs: u64,
}

#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Create an organization.
    Create {
        #[arg(long)]
        name: String,
        /// Print `{"id": ..., "name": ...}`.
        #[arg(long)]
        json: bool,
    },
    /// Delete an organization: its keys stop working on every instance.
    Delete {
        #[arg(value_name = "ORG_ID")]
        id: String,
    },
    /// List organizations.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an integration key; the secret is printed once and never stored.
    Create {
        #[arg(long = "org", value_name = "ORG_ID")]
        organization: String,
        #[arg(long)]
        label: String,
        /// Comma-separated scopes; default all of them.
        #[arg(long)]
        scopes: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List an organization's keys (never their secrets).
    List {
        #[arg(long = "org", value_name = "ORG_ID")]
        organization: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by its prefix.
    Revoke {
        #[arg(value_name = "PREFIX")]
        prefix: String,
    },
}
