//! `telltale serve`: opens the catalog and the lake, replays the write-ahead log, serves HTTP,
//! and on SIGTERM/SIGINT stops accepting requests and flushes everything buffered. Also
//! `telltale drain`, which replays and flushes a stopped instance's log without serving.

use std::time::Duration;

use anyhow::Context;
use catalog::Scope;
use ingest::{IngestConfig, Ingestor};
use tokio_util::task::AbortOnDropHandle;

use crate::cli::{ServeArgs, StorageArgs};
use crate::http::{self, AppState, Limits};

/// How often an instance looks for scoring runs that lost their worker (at most; more often
/// with a lease shorter than this).
const RUN_JANITOR_PERIOD: Duration = Duration::from_secs(10);

/// How long in-flight requests may take to finish after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

pub async fn serve(storage: &StorageArgs, args: &ServeArgs) -> anyhow::Result<()> {
    // First: handles the libraries take before it is installed would record nowhere.
    let metrics = crate::telemetry::install_metrics()?;
    std::fs::create_dir_all(&storage.data_dir)
        .with_context(|| format!("creating data dir {}", storage.data_dir.display()))?;
    let catalog_url = storage.catalog_url();
    let catalog = catalog::open(&catalog_url)
        .await
        .with_context(|| format!("opening catalog {catalog_url}"))?;

    let lake = lake::Lake::open(
        &storage.lake_url(),
        scorer::Features::NAMES,
        &storage.s3_settings(),
    )
    .await
    .context("opening the lake")?;
    lake.set_retention(Duration::from_secs(args.lake_retention_secs));
    let instance = instance_id(storage)?;
    let mut config = IngestConfig::new(instance.clone(), storage.data_dir.join("wal"));
    config.flush_interval = Duration::from_millis(args.flush_interval_ms);
    config.flush_bytes = args.flush_bytes;
    config.max_buffered_bytes = config
        .max_buffered_bytes
        .max(config.flush_bytes.saturating_mul(4));
    let ingestor = Ingestor::start(config, catalog.clone(), lake.clone())
        .await
        .context("starting the ingest pipeline")?;
    let scorer = crate::analysis::build_scorer(
        catalog.clone(),
        lake.clone(),
        &args.scoring,
        Some(ingestor.clone()),
        instance.clone(),
    )?;
    let deletions = crate::erasure::DeletionService::new(
        catalog.clone(),
        lake.clone(),
        Some(ingestor.clone()),
        instance.clone(),
        Duration::from_secs(args.instance_lease_secs),
    );
    let deletion_worker = deletions.spawn();
    let log_purger = deletions.spawn_purger();
    let compactor = (args.compaction_interval_secs > 0).then(|| {
        crate::erasure::spawn_compaction(
            catalog.clone(),
            lake.clone(),
            instance,
            Duration::from_secs(args.compaction_interval_secs),
            lake::compaction::CompactionConfig {
                target_rows: args.compaction_target_rows,
            },
            Duration::from_secs(args.lake_retention_secs),
        )
    });
    let scoring = scorer::ScoringService::new(scorer);
    // Resumes this instance's runs a crash interrupted at once, and later any run whose worker
    // stopped renewing its lease.
    let janitor = scoring.spawn_janitor(
        RUN_JANITOR_PERIOD.min(Duration::from_secs(args.scoring.scoring_lease_secs)),
    );
    // The background tasks stop when this is dropped: at shutdown, before the final flush, or
    // at once when the start fails further down.
    let background: Vec<AbortOnDropHandle<()>> =
        [Some(janitor), Some(deletion_worker), log_purger, compactor]
            .into_iter()
            .flatten()
            .map(AbortOnDropHandle::new)
            .collect();

    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    let local = listener.local_addr()?;
    // Only once the address is ours: a start that cannot serve (the port is taken) must not
    // show the one-time key and leave the next start with none to show.
    bootstrap(catalog.as_ref()).await?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let limits = Limits {
        api_requests_per_minute: args.api_rate_per_minute,
        collector_ip_rate: args.collector_ip_rate,
        collector_identifier_rate: args.collector_identifier_rate,
        collector_survey_rate: args.collector_survey_rate,
        collector_new_sessions_per_minute: args.collector_new_sessions_per_minute,
        collector_bytes_in_flight: args.collector_bytes_in_flight,
        body_timeout: Duration::from_secs(args.body_timeout_secs),
        trust_forwarded_for: args.trust_forwarded_for,
    };
    let review_secret =
        http::review::ReviewSecret::load(args.review_secret.as_deref(), &storage.data_dir)
            .context("loading the review link secret")?;
    let state = AppState::new(
        http::Stores { catalog, lake },
        ingestor.clone(),
        scoring,
        deletions,
        http::Site {
            public_url: public_url.clone(),
            review_secret,
        },
        &limits,
        metrics,
    );
    let app = http::app(state);

    println!("telltale listening on http://{local}");
    tracing::info!(%local, %public_url, "serving");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        stop.send_replace(true);
    });
    // In-flight requests get a bounded time to finish; a client holding a connection open must
    // not delay the final flush (its batches are in the log either way).
    crate::http_serve::serve(
        listener,
        app,
        crate::http_serve::ConnectionLimits {
            max_connections: args.max_connections,
            header_timeout: Duration::from_secs(args.header_timeout_secs),
        },
        stopped,
        SHUTDOWN_GRACE,
    )
    .await;

    // Runs in progress stay `running` with this instance as owner: the next start resumes
    // them (or another instance once the lease expires).
    // An erasure or compaction cut short is repeated from the start after the next start.
    drop(background);
    tracing::info!("shutting down: flushing buffered events");
    let report = ingestor.shutdown().await.context("final flush")?;
    tracing::info!(
        files = report.files,
        events = report.events,
        "final flush done"
    );
    Ok(())
}

/// `telltale drain`: replays the data dir's write-ahead log into the lake and the catalog and
/// checks that nothing is left only in the log.
pub async fn drain(storage: &StorageArgs, json: bool) -> anyhow::Result<()> {
    let wal_dir = storage.data_dir.join("wal");
    let id_path = storage.data_dir.join("instance-id");
    if !wal_dir.exists() || !id_path.exists() {
        anyhow::bail!(
            "{} holds no write-ahead log of a telltale instance: nothing to drain",
            storage.data_dir.display()
        );
    }
    let catalog_url = storage.catalog_url();
    let catalog = catalog::open(&catalog_url)
        .await
        .with_context(|| format!("opening catalog {catalog_url}"))?;
    let lake = lake::Lake::open(
        &storage.lake_url(),
        scorer::Features::NAMES,
        &storage.s3_settings(),
    )
    .await
    .context("opening the lake")?;
    let instance = instance_id(storage)?;
    let applied_before = ingest::Ingestor::lake_position(&lake, &instance).await?;
    // Starting replays the log and flushes what the lake lacks; the shutdown flushes the rest.
    let ingestor = Ingestor::start(IngestConfig::new(instance.clone(), wal_dir), catalog, lake)
        .await
        .context("opening the write-ahead log (is a server still running on this data dir?)")?;
    ingestor.shutdown().await.context("flushing the log")?;
    let position = ingestor.log_position();
    let records_flushed = position.lake_watermark.saturating_sub(applied_before);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "instance": instance,
                "recordsFlushed": records_flushed,
                "position": position,
                "drained": position.is_drained(),
            })
        );
    } else {
        println!(
            "instance {instance}: {records_flushed} logged batches flushed to the lake; log \
             through {}, lake through {}, statistics through {}",
            position.last_lsn, position.lake_watermark, position.stats_watermark
        );
    }
    if !position.is_drained() {
        anyhow::bail!("records remain only in the write-ahead log; run drain again");
    }
    if !json {
        println!("drained: every acknowledged event is in the lake and the catalog");
    }
    Ok(())
}

/// On an empty catalog, creates an organization and a key and prints the key once.
async fn bootstrap(catalog: &dyn catalog::Catalog) -> anyhow::Result<()> {
    if catalog.count_organizations().await? > 0 {
        return Ok(());
    }
    let organization = catalog.create_organization("Default organization").await?;
    let key = catalog
        .create_key(&organization.id, "bootstrap", &Scope::ALL)
        .await?;
    println!(
        "first start: created organization {} and an integration key with every scope.",
        organization.id
    );
    println!("It is shown only this once; store it now:");
    println!("TELLTALE_INTEGRATION_KEY={}", key.secret.expose());
    Ok(())
}

/// A stable id for this data dir's write-ahead log and files, created on first start.
pub(crate) fn instance_id(storage: &StorageArgs) -> anyhow::Result<String> {
    let path = storage.data_dir.join("instance-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            let id = catalog::ids::random_hex24()[..12].to_owned();
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, &id)?;
            std::fs::File::open(&temporary)?.sync_all()?;
            std::fs::rename(&temporary, &path)?;
            // The rename itself must be durable: a new id after a power loss would replay the
            // whole log under fresh watermarks.
            std::fs::File::open(&storage.data_dir)?.sync_all()?;
            Ok(id)
        }
    }
}

async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}
