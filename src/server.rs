//! `telltale serve`: starts the deployment (`instance::deployment`, which assembles and drains
//! it), serves HTTP, and on SIGTERM/SIGINT stops accepting requests and drains it. A start while
//! a store is down takes its address at once and answers 503 (with `Retry-After`; liveness 200,
//! readiness 503) until the stores answer, then serves; a start that fails for any other reason
//! exits non-zero with it, never leaving a process that answers 503 for good. Also `telltale
//! drain`, which replays and flushes a stopped instance's log without serving.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use instance::LogSettings;
use instance::deployment::{Deployment, DeploymentSettings};
use instance::workers::WorkerSettings;
use tower::ServiceExt;

use crate::cli::{ServeArgs, StorageArgs};
use crate::http::{self, ApiError, AppState, Limits};

/// How long in-flight requests may take to finish after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often a start waiting for its stores tries them again.
const STORES_RETRY: Duration = Duration::from_secs(1);

/// What `serve`'s flags say the deployment is.
fn deployment_settings(args: &ServeArgs) -> DeploymentSettings {
    DeploymentSettings {
        log: LogSettings {
            flush_interval: Duration::from_millis(args.flush_interval_ms),
            flush_bytes: args.flush_bytes,
        },
        scorer: crate::analysis::scorer_settings(&args.scoring),
        instance_lease: Duration::from_secs(args.scoring.instance_lease_secs),
        workers: WorkerSettings {
            scoring_lease: Duration::from_secs(args.scoring.scoring_lease_secs),
            compaction_interval: (args.compaction_interval_secs > 0)
                .then(|| Duration::from_secs(args.compaction_interval_secs)),
            compaction: lake::operations::compact::CompactionConfig {
                target_rows: args.compaction_target_rows,
            },
            retention: Duration::from_secs(args.lake_retention_secs),
        },
        lake_retention: Duration::from_secs(args.lake_retention_secs),
        review_secret: args.review_secret.clone(),
    }
}

pub async fn serve(storage: &StorageArgs, args: &ServeArgs) -> anyhow::Result<()> {
    // First: handles the libraries take before it is installed would record nowhere.
    let metrics = crate::telemetry::install_metrics()?;
    let settings = storage.settings();
    let deploy = deployment_settings(args);
    // The address first, announced only once serving (or answering 503 while the stores are
    // away): a start that cannot take it shows no one-time key.
    let listener = bind(args).await?;
    let local = listener.local_addr()?;
    match Deployment::start(settings.clone(), &deploy).await {
        Ok(deployment) => {
            let running = Running::start(deployment, args, metrics, local);
            announce(&listener)?;
            serve_until_signal(listener, running.app.clone(), args, std::future::pending()).await;
            running.shutdown().await
        }
        Err(error) if error.store_down() => {
            tracing::warn!(%error, "a store is unavailable at start: answering 503 until it is back");
            announce(&listener)?;
            let slot: Arc<OnceLock<Running>> = Arc::new(OnceLock::new());
            let (failed, failure) = tokio::sync::oneshot::channel::<anyhow::Error>();
            let opener = {
                let (slot, args, metrics) = (Arc::clone(&slot), args.clone(), metrics.clone());
                tokio::spawn(async move {
                    // Each new reason is logged once, not every second.
                    let last = parking_lot::Mutex::new(String::new());
                    let started = Deployment::start_when_stores_answer(
                        settings,
                        &deploy,
                        STORES_RETRY,
                        |error| {
                            let reason = error.to_string();
                            if *last.lock() != reason {
                                tracing::warn!(
                                    error = reason,
                                    "the instance cannot start yet; trying again every second"
                                );
                                *last.lock() = reason;
                            } else {
                                tracing::debug!(%error, "a store is still unavailable");
                            }
                        },
                    )
                    .await;
                    match started {
                        Ok(deployment) => {
                            tracing::info!("the stores answer: serving");
                            let _ = slot.set(Running::start(deployment, &args, metrics, local));
                        }
                        Err(error) => {
                            // What it took is released (`Deployment::start`); the process ends
                            // with the reason rather than answer 503 for good.
                            tracing::error!(%error, "the instance cannot start; exiting");
                            let _ = failed.send(anyhow::Error::new(error));
                        }
                    }
                })
            };
            let app = Router::new()
                .fallback(dispatch)
                .with_state(Arc::clone(&slot));
            // Serving ends on a signal, or once the start failed for good.
            let (stop_failed, start_failed) = tokio::sync::oneshot::channel();
            let watch_failure = async move {
                if let Ok(error) = failure.await {
                    let _ = stop_failed.send(error);
                } else {
                    std::future::pending::<()>().await;
                }
            };
            serve_until_signal(listener, app, args, watch_failure).await;
            opener.abort();
            if let Ok(error) = start_failed.await {
                return Err(error);
            }
            match slot.get() {
                Some(running) => running.shutdown().await,
                None => Ok(()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// A serving instance: its deployment and its routes.
struct Running {
    deployment: Arc<Deployment>,
    app: Router,
}

impl Running {
    /// Shows the first start's key, if this start made one, and builds the routes.
    fn start(
        deployment: Deployment,
        args: &ServeArgs,
        metrics: metrics_exporter_prometheus::PrometheusHandle,
        local: std::net::SocketAddr,
    ) -> Running {
        if let Some(key) = deployment.take_first_key() {
            println!(
                "first start: created organization {} and an integration key with every scope.",
                key.info.organization_id
            );
            println!("It is shown only this once; store it now:");
            println!("TELLTALE_INTEGRATION_KEY={}", key.secret.expose());
        }
        let limits = Limits {
            api_requests_per_minute: args.api_rate_per_minute,
            collector_ip_rate: args.collector_ip_rate,
            collector_identifier_rate: args.collector_identifier_rate,
            collector_survey_rate: args.collector_survey_rate,
            collector_new_sessions_per_minute: args.collector_new_sessions_per_minute,
            collector_bytes_in_flight: args.collector_bytes_in_flight,
            body_timeout: Duration::from_secs(args.body_timeout_secs),
            trust_forwarded_for: args.trust_forwarded_for,
            failed_auth_per_minute: args.failed_auth_per_minute,
            signed_link_rate: args.signed_link_rate,
        };
        let public_url = args
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let deployment = Arc::new(deployment);
        let state = AppState::new(Arc::clone(&deployment), &public_url, &limits, metrics);
        Running {
            deployment,
            app: http::app(state),
        }
    }

    /// Drains the deployment: the workers stop, then what the log holds is flushed.
    async fn shutdown(&self) -> anyhow::Result<()> {
        tracing::info!("shutting down: flushing buffered events");
        let report = self.deployment.drain().await.context("final flush")?;
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

/// Serves until SIGTERM/SIGINT (or `or_until` ends). In-flight requests get a bounded time to
/// finish; a client holding a connection open must not delay the final flush (its batches are
/// in the log either way).
async fn serve_until_signal(
    listener: tokio::net::TcpListener,
    app: Router,
    args: &ServeArgs,
    or_until: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown_signal() => {}
            () = or_until => {}
        }
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
/// checks that nothing is left only in the log (`instance::deployment::drain_stopped`).
pub async fn drain(storage: &StorageArgs, json: bool) -> anyhow::Result<()> {
    let drained = instance::deployment::drain_stopped(storage.settings()).await?;
    let (instance, position) = (&drained.instance, drained.position);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "instance": instance,
                "recordsFlushed": drained.records_flushed,
                "position": position,
                "drained": position.is_drained(),
            })
        );
    } else {
        println!(
            "instance {instance}: {} logged batches flushed to the lake; log through {}, lake \
             through {}, statistics through {}",
            drained.records_flushed,
            position.last_lsn,
            position.lake_watermark,
            position.stats_watermark
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

/// `telltale forget-instance`: fences off a lost instance and records it as gone
/// (`instance::erasure::forget_instance`).
pub async fn forget_instance(
    storage: &StorageArgs,
    instance: &str,
    lease: std::time::Duration,
    json: bool,
) -> anyhow::Result<()> {
    let stores = instance::Stores::open(&storage.settings()).await?;
    let forgotten =
        instance::erasure::forget_instance(stores.catalog.as_ref(), &stores.lake, instance, lease)
            .await?;
    let (epoch, already) = match forgotten {
        instance::erasure::Forgotten::AlreadyLeft { epoch } => (epoch, true),
        instance::erasure::Forgotten::Fenced { epoch, .. } => (epoch, false),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"instance": instance, "epoch": epoch, "alreadyLeft": already})
        );
    } else if already {
        println!("instance {instance} left the fleet cleanly at epoch {epoch}: nothing to do");
    } else {
        println!(
            "instance {instance} fenced off at epoch {epoch} and recorded as gone; what its log \
             held and had not flushed is given up"
        );
    }
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
