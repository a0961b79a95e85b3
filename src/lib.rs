//! Telltale's service: the HTTP layer and the operator's command line behind the `telltale`
//! binary.
//!
//! - `cli`: flags and subcommands (clap), each with an environment-variable fallback.
//! - `server`: `telltale serve`: start-up, first-run bootstrap, graceful shutdown.
//! - `admin`: `org` and `key` subcommands against the catalog.
//! - `analysis`: `score`, `score-features` and `sql` subcommands, and the scorer set-up `serve`
//!   shares.
//! - `logs`: `log export` and `log import`: the write-ahead log's records out, recorded batches
//!   in.
//! - `http`: router, handlers and the JSON error type.
//! - `rate_limit`: in-process rate limiters.
//! - `telemetry`: logging set-up and the Prometheus recorder behind `/metrics`.

pub mod admin;
pub mod analysis;
pub mod backup;
pub mod cli;
pub mod http;
pub mod http_serve;
pub mod logs;
pub mod rate_limit;
pub mod server;
pub mod telemetry;

use clap::Parser;

/// An error as the command line prints it: `error: <message>`, then each cause not already
/// said. Library errors often put their source's text into their own message as well as
/// chaining it (`catalog database error: unable to open database file`, then `unable to open
/// database file` again), and anyhow's default report would repeat every one.
pub fn error_report(error: &anyhow::Error) -> String {
    let mut said: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if said.iter().any(|earlier| earlier.contains(text.trim())) {
            continue;
        }
        said.push(text);
    }
    let mut report = format!("error: {}", said.first().map_or("", String::as_str));
    for cause in said.iter().skip(1) {
        report.push_str(&format!("\n  caused by: {cause}"));
    }
    report
}

/// Runs the command line: parses arguments, sets up logging and dispatches.
pub fn run() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    let progress_bar = matches!(cli.command, cli::Command::Score { .. })
        && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let default_filter = if progress_bar {
        telemetry::PROGRESS_LOG_FILTER
    } else {
        telemetry::DEFAULT_LOG_FILTER
    };
    telemetry::init_logging(cli.log_filter.as_deref(), cli.log_format, default_filter)?;
    // Crash tests stop rewrites at named fail points (tests/it/deletion.rs), set in `FAILPOINTS`;
    // only a build with the `failpoints` feature has them.
    #[cfg(feature = "failpoints")]
    let _fail_points = fail::FailScenario::setup();
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
            cli::Command::ForgetInstance {
                instance,
                instance_lease_secs,
                json,
            } => {
                let lease = std::time::Duration::from_secs(instance_lease_secs);
                server::forget_instance(&cli.storage, &instance, lease, json).await
            }
            cli::Command::Backup {
                to,
                without_log,
                instance_lease_secs,
                json,
            } => {
                let lease = std::time::Duration::from_secs(instance_lease_secs);
                backup::backup(&cli.storage, &to, without_log, lease, json).await
            }
            cli::Command::Restore {
                from,
                tombstones_from,
                without_tombstones,
                json,
            } => {
                backup::restore(
                    &cli.storage,
                    &from,
                    tombstones_from.as_deref(),
                    without_tombstones,
                    json,
                )
                .await
            }
            cli::Command::Log(cli::LogCommand::Export { out }) => {
                logs::export(&cli.storage, out.as_deref())
            }
            cli::Command::Log(cli::LogCommand::Import { survey, file, json }) => {
                logs::import(&cli.storage, &survey, &file, json).await
            }
            cli::Command::ScoreFeatures { file, scoring } => {
                analysis::score_features(file.as_deref(), &scoring)
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_report_says_each_cause_once() {
        let root = std::io::Error::other("(code: 14) unable to open database file");
        let error = anyhow::Error::new(root)
            .context("error returned from database: (code: 14) unable to open database file")
            .context("catalog database error: error returned from database: (code: 14) unable to open database file")
            .context("opening catalog sqlite:///x.db");
        assert_eq!(
            error_report(&error),
            "error: opening catalog sqlite:///x.db\n  caused by: catalog database error: error returned \
             from database: (code: 14) unable to open database file"
        );
        let plain = anyhow::anyhow!("no active key with prefix tt_0000000000");
        assert_eq!(
            error_report(&plain),
            "error: no active key with prefix tt_0000000000"
        );
    }
}
