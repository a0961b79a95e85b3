//! `telltale serve`: opens the deployment (`instance`), serves HTTP, and on SIGTERM/SIGINT
//! stops accepting requests and flushes everything buffered. A start while a store is down
//! takes its address at once and answers 503 (with `Retry-After`; liveness 200) until the stores
//! answer, then serves. Also `telltale drain`, which replays and flushes a stopped instance's
//! log without serving.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use catalog::Scope;
use instance::workers::{WorkerSettings, Workers};
use instance::{Instance, LogSettings};
use tower::ServiceExt;

use crate::cli::{ServeArgs, StorageArgs};
use crate::http::{self, ApiError, AppState, Limits};

/// How long in-flight requests may take to finish after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often a start waiting for its stores tries them again.
const STORES_RETRY: Duration = Duration::from_secs(1);

pub async fn serve(storage: &StorageArgs, args: &ServeArgs) -> anyhow::Result<()> {
    // First: handles the libraries take before it is installed would record nowhere.
    let metrics = crate::telemetry::install_metrics()?;
    let settings = storage.settings();
    let log = LogSettings {
        flush_interval: Duration::from_millis(args.flush_interval_ms),
        flush_bytes: args.flush_bytes,
    };
    match Instance::start(settings.clone(), Some(log.clone())).await {
        Ok(instance) => {
            // The address is taken only once the stores answer, and the bootstrap key shown
            // only once the address is ours: a start that cannot serve (the port is taken) must
            // not show the one-time key and leave the next start with none to show.
            let listener = bind(args).await?;
            let local = listener.local_addr()?;
            let running = Running::start(instance, args, metrics, local).await?;
            announce(&listener)?;
            serve_until_signal(listener, running.app.clone(), args).await;
            running.shutdown().await
        }
        Err(error) if error.store_down() => {
            tracing::warn!(%error, "a store is unavailable at start: answering 503 until it is back");
            let listener = bind(args).await?;
            let local = listener.local_addr()?;
            announce(&listener)?;
            let slot: Arc<OnceLock<Running>> = Arc::new(OnceLock::new());
            let opener = {
                let (slot, args, metrics) = (Arc::clone(&slot), args.clone(), metrics.clone());
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(STORES_RETRY).await;
                        match Instance::start(settings.clone(), Some(log.clone())).await {
                            Ok(instance) => {
                                match Running::start(instance, &args, metrics.clone(), local).await
                                {
                                    Ok(running) => {
                                        tracing::info!("the stores answer: serving");
                                        let _ = slot.set(running);
                                        return;
                                    }
                                    Err(error) => {
                                        tracing::warn!(%error, "starting failed; will retry")
                                    }
                                }
                            }
                            Err(error) if error.store_down() => {
                                tracing::debug!(%error, "a store is still unavailable")
                            }
                            Err(error) => {
                                tracing::error!(%error, "the stores answer but the instance cannot start");
                                return;
                            }
                        }
                    }
                })
            };
            let app = Router::new()
                .fallback(dispatch)
                .with_state(Arc::clone(&slot));
            serve_until_signal(listener, app, args).await;
            opener.abort();
            match slot.get() {
                Some(running) => running.shutdown().await,
                None => Ok(()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// A serving instance: its log, its workers and its routes.
struct Running {
    ingestor: ingest::Ingestor,
    /// Taken (and so stopped) at shutdown, before the final flush.
    workers: parking_lot::Mutex<Option<Workers>>,
    app: Router,
}

impl Running {
    async fn start(
        instance: Instance,
        args: &ServeArgs,
        metrics: metrics_exporter_prometheus::PrometheusHandle,
        local: std::net::SocketAddr,
    ) -> anyhow::Result<Running> {
        instance
            .stores
            .lake
            .set_retention(Duration::from_secs(args.lake_retention_secs));
        let scorer = crate::analysis::build_scorer(
            instance.stores.catalog.clone(),
            instance.stores.lake.clone(),
            &args.scoring,
            Some(instance.ingestor.clone()),
            instance.id.clone(),
        )?;
        let deletions = instance::erasure::DeletionService::new(
            instance.stores.catalog.clone(),
            instance.stores.lake.clone(),
            Some(instance.ingestor.clone()),
            instance.id.clone(),
            Duration::from_secs(args.scoring.instance_lease_secs),
        );
        let scoring = scorer::ScoringService::new(scorer);
        let workers = Workers::start(
            &instance,
            &scoring,
            &deletions,
            &WorkerSettings {
                scoring_lease: Duration::from_secs(args.scoring.scoring_lease_secs),
                compaction_interval: (args.compaction_interval_secs > 0)
                    .then(|| Duration::from_secs(args.compaction_interval_secs)),
                compaction: lake::operations::compact::CompactionConfig {
                    target_rows: args.compaction_target_rows,
                },
                retention: Duration::from_secs(args.lake_retention_secs),
            },
        );
        bootstrap(instance.stores.catalog.as_ref()).await?;
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
        let review_secret = http::review::ReviewSecret::load(
            args.review_secret.as_deref(),
            &instance.settings.data_dir,
        )
        .context("loading the review link secret")?;
        let public_url = args
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let state = AppState::new(
            instance.stores.clone(),
            instance.ingestor.clone(),
            scoring,
            deletions,
            http::Site {
                public_url,
                review_secret,
            },
            &limits,
            metrics,
        );
        Ok(Running {
            ingestor: instance.ingestor,
            workers: parking_lot::Mutex::new(Some(workers)),
            app: http::app(state),
        })
    }

    /// Stops the workers, then flushes what the log holds. Runs in progress stay `running`
    /// with this instance as owner: the next start resumes them (or another instance once the
    /// lease expires); an erasure or compaction cut short is repeated from the start.
    async fn shutdown(&self) -> anyhow::Result<()> {
        drop(self.workers.lock().take());
        tracing::info!("shutting down: flushing buffered events");
        let report = self.ingestor.shutdown().await.context("final flush")?;
        tracing::info!(
            files = report.files,
            events = report.events,
            "final flush done"
        );
        Ok(())
    }
}

/// While the stores are away: liveness answers (the process serves), everything else is a 503
/// the client retries; once the instance runs, every request goes to its routes.
async fn dispatch(State(slot): State<Arc<OnceLock<Running>>>, request: Request) -> Response {
    if let Some(running) = slot.get() {
        return match running.app.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    match request.uri().path() {
        "/status/health" | "/status/live" => {
            axum::Json(serde_json::json!({"status": "ok"})).into_response()
        }
        _ => ApiError::Unavailable(
            "the service is starting: its stores are not reachable yet; retry shortly".to_owned(),
        )
        .into_response(),
    }
}

async fn bind(args: &ServeArgs) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))
}

fn announce(listener: &tokio::net::TcpListener) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    println!("telltale listening on http://{local}");
    tracing::info!(%local, "serving");
    Ok(())
}

/// Serves until SIGTERM/SIGINT. In-flight requests get a bounded time to finish; a client
/// holding a connection open must not delay the final flush (its batches are in the log either
/// way).
async fn serve_until_signal(listener: tokio::net::TcpListener, app: Router, args: &ServeArgs) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        stop.send_replace(true);
    });
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
}

/// `telltale drain`: replays the data dir's write-ahead log into the lake and the catalog and
/// checks that nothing is left only in the log.
pub async fn drain(storage: &StorageArgs, json: bool) -> anyhow::Result<()> {
    let settings = storage.settings();
    if !settings.data_dir.wal().exists() || !settings.data_dir.instance_id().exists() {
        anyhow::bail!(
            "{} holds no write-ahead log of a telltale instance: nothing to drain",
            storage.data_dir.display()
        );
    }
    let stores = instance::Stores::open(&settings).await?;
    let instance = settings.data_dir.instance_id_or_new()?;
    let lake = stores.lake.clone();
    let applied_before = ingest::Ingestor::lake_position(&lake, &instance).await?;
    // Starting replays the log and flushes what the lake lacks; the shutdown flushes the rest.
    let ingestor = Instance::start_on(settings, stores, None)
        .await
        .context("opening the write-ahead log (is a server still running on this data dir?)")?
        .ingestor;
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
