//! Availability endpoints. They check that the service answers, not keys or surveys.

use axum::Json;
use axum::Router;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use super::{AppState, iso8601};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/status/health", get(health))
        .route("/status/", get(status))
        .route("/status", get(status))
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

/// Liveness: answers `{"status": "ok"}` while the service runs.
#[utoipa::path(get, path = "/status/health", tag = "status", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
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
