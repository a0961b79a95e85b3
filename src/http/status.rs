//! Availability and operations endpoints: liveness (`/status/health`), readiness
//! (`/status/ready`: the catalog and the lake answer), status, and Prometheus metrics
//! (`/metrics`). None of them checks keys or surveys.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use super::format::iso8601;
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/status/health", get(health))
        .route("/status/live", get(live))
        .route("/status/ready", get(ready))
        .route("/status/", get(status))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` when healthy.
    pub status: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    pub status: &'static str,
    /// The service's current date and time.
    #[schema(format = DateTime)]
    pub date: String,
    pub version: &'static str,
}

/// What one store answered a readiness check.
#[derive(Debug, Serialize, ToSchema)]
pub struct Checks {
    /// `ok`, or why the catalog (SQLite or PostgreSQL) is not usable.
    pub catalog: String,
    /// `ok`, or why the lake's object store (folder or S3) is not usable.
    pub lake: String,
}

/// The instance can serve: both stores answered.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `ready`.
    pub status: &'static str,
    pub checks: Checks,
}

/// The instance cannot serve now: a store did not answer in time or failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotReady {
    /// Which store is down, and why.
    pub error: String,
    pub checks: Checks,
}

/// Liveness: answers `{"status": "ok"}` while the process serves requests, whatever its stores
/// do (restarting it would not bring them back).
#[utoipa::path(get, path = "/status/health", tag = "status", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Liveness under the name that pairs with `/status/ready` (what orchestrators probe): the same
/// answer as `/status/health`.
#[utoipa::path(get, path = "/status/live", tag = "status", responses((status = 200, body = Health)))]
pub async fn live() -> Json<Health> {
    health().await
}

/// Readiness: the catalog answers a query and the lake's object store a request, each within
/// 2 s. A load balancer should route only to instances that answer 200 here.
#[utoipa::path(
    get,
    path = "/status/ready",
    tag = "status",
    responses(
        (status = 200, description = "both stores answered", body = Ready),
        (status = 503, description = "a store is down; `Retry-After` says when to ask again", body = NotReady),
    )
)]
pub async fn ready(State(state): State<AppState>) -> Response {
    let outage::StoresProbe { catalog, lake } = state.deployment.stores().probe().await;
    let checks = Checks {
        catalog: catalog.clone().err().unwrap_or_else(|| "ok".to_owned()),
        lake: lake.clone().err().unwrap_or_else(|| "ok".to_owned()),
    };
    let down: Vec<String> = [("catalog", catalog), ("lake", lake)]
        .into_iter()
        .filter_map(|(name, outcome)| outcome.err().map(|why| format!("{name}: {why}")))
        .collect();
    series::READY
        .get()
        .set(if down.is_empty() { 1.0 } else { 0.0 });
    if down.is_empty() {
        return Json(Ready {
            status: "ready",
            checks,
        })
        .into_response();
    }
    tracing::warn!(checks = %down.join("; "), "not ready");
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(NotReady {
            error: format!("not ready: {}", down.join("; ")),
            checks,
        }),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
    response
}

/// Status with the service's current date and version.
#[utoipa::path(get, path = "/status/", tag = "status", responses((status = 200, body = Status)))]
pub async fn status() -> Json<Status> {
    Json(Status {
        status: "ok",
        date: iso8601(catalog::now_millis()),
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// Prometheus metrics in the text exposition format (series listed in docs/operations.md).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "status",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    // Gauges of state the service holds anyway are read when scraped, not kept up to date on
    // every request.
    let position = state.ingestor().log_position();
    series::WAL_LAST_LSN.get().set(position.last_lsn as f64);
    series::LOG_LAKE_LAG_RECORDS
        .get()
        .set(position.last_lsn.saturating_sub(position.lake_watermark) as f64);
    series::LOG_STATS_LAG_RECORDS
        .get()
        .set(position.last_lsn.saturating_sub(position.stats_watermark) as f64);
    series::LAKE_BACKLOG_BYTES
        .get()
        .set(state.ingestor().lake_backlog_bytes() as f64);
    let free = state.edge.body_bytes.available_permits() as f64;
    series::COLLECTOR_BYTES_IN_FLIGHT
        .get()
        .set((f64::from(state.edge.body_budget) - free).max(0.0));
    let body = state.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}
