//! Telltale's service: the HTTP layer and the operator's command line behind the `telltale`
//! binary.
//!
//! - `cli`: flags and subcommands (clap), each with an environment-variable fallback.
//! - `server`: `telltale serve`: start-up, first-run bootstrap, graceful shutdown.
//! - `admin`: `org` and `key` subcommands against the catalog.
//! - `analysis`: `score` and `sql` subcommands, and the scorer set-up `serve` shares.
//! - `erasure`: session deletion's worker and background compaction.
//! - `http`: router, handlers and the JSON error type.
//! - `rate_limit`: in-process rate limiters.
//! - `telemetry`: logging set-up and the Prometheus recorder behind `/metrics`.

pub mod admin;
pub mod analysis;
pub mod cli;
pub mod erasure;
pub mod http;
pub mod http_serve;
pub mod rate_limit;
pub mod server;
pub mod telemetry;

use clap::Parser;

/// Runs the command line: parses arguments, sets up logging and dispatches.
pub fn run() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    telemetry::init_logging(cli.log_filter.as_deref(), cli.log_format)?;
    // Crash tests stop rewrites at a named point (tests/it/deletion.rs); the libraries read no
    // environment, so the binary passes it on.
    if let Ok(point) = std::env::var("TELLTALE_TEST_REWRITE_PAUSE") {
        lake::rewrite::pause_rewrites_at(point);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            cli::Command::Serve(args) => server::serve(&cli.storage, &args).await,
            cli::Command::Org(command) => admin::org(&cli.storage, command).await,
            cli::Command::Key(command) => admin::key(&cli.storage, command).await,
            cli::Command::Score {
                survey,
                force,
                json,
                scoring,
            } => analysis::score(&cli.storage, &survey, force, json, &scoring).await,
            cli::Command::Sql {
                query,
                format,
                as_of,
            } => analysis::sql(&cli.storage, &query, format, as_of.as_deref()).await,
            cli::Command::Drain { json } => server::drain(&cli.storage, json).await,
            cli::Command::Compact {
                survey,
                target_rows,
                json,
            } => analysis::compact(&cli.storage, survey.as_deref(), target_rows, json).await,
            cli::Command::Vacuum {
                retention_secs,
                json,
            } => analysis::vacuum(&cli.storage, retention_secs, json).await,
        }
    })
}
