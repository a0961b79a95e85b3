//! The whole application: every route group merged, the integration API's body limit and store
//! deadline, the request span.

use std::time::Duration;

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};

use super::error::ApiError;
use super::extract::{BodyDeadline, MAX_JSON_BODY_BYTES, client_ip};
use super::state::AppState;
use super::{
    collector, deletions, demo, desk, embed, evidence, integrations, observe, openapi, review,
    scoring, status,
};
use crate::rate_limit::retry_after_secs;

/// Answers 429 to a client address past its rate of signed-link requests (review and desk
/// pages and what they fetch), before the link's key is looked up in the catalog.
async fn signed_link_rate(
    State(state): State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = request.uri().path();
    if let Some(limiter) = &state.edge.signed_links
        && (path.starts_with("/review/") || path.starts_with("/desk/"))
    {
        let peer = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |info| info.0);
        let client = client_ip(request.headers(), peer, state.edge.trust_forwarded_for);
        if let Err(wait) = limiter.check(&client, Instant::now()) {
            series::RATE_LIMIT_REFUSALS_TOTAL
                .with(&[("limit", "signed_link")])
                .increment(1);
            return ApiError::RateLimited {
                retry_after_secs: retry_after_secs(wait),
            }
            .into_response();
        }
    }
    next.run(request).await
}

/// The whole application.
pub fn app(state: AppState) -> Router {
    let body_deadline = state.edge.body_timeout;
    Router::new()
        .merge(collector::routes())
        .merge(embed::routes())
        .merge(demo::routes())
        .merge(
            Router::new()
                .merge(integrations::routes())
                .merge(scoring::routes())
                .merge(deletions::routes())
                .merge(evidence::routes())
                .merge(review::routes())
                .merge(desk::routes())
                .layer(axum::extract::DefaultBodyLimit::max(MAX_JSON_BODY_BYTES))
                .layer(axum::middleware::from_fn(store_deadline)),
        )
        .merge(status::routes())
        .merge(openapi::routes())
        .fallback(|| async { ApiError::NotFound("no such route".to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::Extension(BodyDeadline(body_deadline)))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            signed_link_rate,
        ))
        .layer(axum::middleware::from_fn(observe::observe))
        .with_state(state)
}

/// The longest an integration request waits on the stores: the outage policy's statement
/// timeout. A store that hangs (a frozen database, a bucket that takes connections and never
/// answers) gets the client a 503 it retries, not a request held open; what the request began
/// is one catalog transaction at a time, rolled back when dropped.
const STORE_DEADLINE: Duration = outage::CATALOG_STATEMENT_TIMEOUT;

async fn store_deadline(
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(STORE_DEADLINE, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                deadline_secs = STORE_DEADLINE.as_secs(),
                "a request's stores did not answer in time"
            );
            ApiError::Unavailable("a store did not answer in time; retry shortly".to_owned())
                .into_response()
        }
    }
}
