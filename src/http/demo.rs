//! A demo survey page (`/demo/{trackingKey}`) with the embed on it: a few questions of each kind
//! over three pages, for people trying Telltale and for browser tests. `?response=<uuid>` sets
//! the response id (the session's reference); otherwise the page makes one per browser tab.
//! Answers never leave the page.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use catalog::TrackingKey;

use super::error::ApiError;
use super::extract::ApiPath;
use super::state::AppState;

const DEMO_PAGE: &str = include_str!("demo.html");

pub fn routes() -> Router<AppState> {
    Router::new().route("/demo/{trackingKey}", get(demo_page))
}

async fn demo_page(
    State(state): State<AppState>,
    ApiPath(tracking_key): ApiPath<String>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound("no survey has this tracking key".to_owned());
    let key = TrackingKey::parse(&tracking_key).ok_or_else(not_found)?;
    state
        .catalog()
        .survey_by_tracking_key(&key)
        .await?
        .ok_or_else(not_found)?;
    // The key is 24 hex characters (parsed above), so it is safe inside the page's script.
    let page = DEMO_PAGE.replace("{{TRACKING_KEY}}", key.as_str());
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        page,
    )
        .into_response())
}
