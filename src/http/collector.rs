//! The browser collector: `POST /event/{key}/{identifier}`.
//!
//! Unauthenticated and addressed by the survey's public tracking key, so CORS is open to every
//! origin. Bodies may be `application/json` or `text/plain` (what `navigator.sendBeacon` sends
//! for a string). A 201 means the batch is fsync'd in the write-ahead log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequest, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ingest::batch::{BatchError, MAX_BODY_BYTES};
use ingest::wal::WalError;
use ingest::{Accepted, IngestError};
use serde::Serialize;
use tokio::sync::OwnedSemaphorePermit;
use tower_http::cors::{Any, CorsLayer};
use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::{ApiBytes, ApiPath, client_ip};
use super::state::AppState;
use crate::rate_limit::retry_after_secs;

pub fn routes() -> Router<AppState> {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::POST, Method::OPTIONS])
        .allow_headers([header::CONTENT_TYPE])
        // The embed's back-off honours Retry-After on 429 and 503; a cross-origin script can
        // read only the headers exposed to it.
        .expose_headers([header::RETRY_AFTER])
        .max_age(std::time::Duration::from_secs(86_400));
    Router::new()
        // An explicit OPTIONS route: the router's 405 fallback would otherwise answer preflights
        // outside the CORS layer.
        .route(
            "/event/{key}/{identifier}",
            post(collect).options(|| async { StatusCode::NO_CONTENT }),
        )
        // One byte over the limit is enough to know the body is too large.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(cors)
}

/// Ingestion result (the collector's bare response body).
#[derive(Debug, Serialize, ToSchema)]
pub struct IngestionResult {
    /// True on acceptance.
    pub success: bool,
    /// Number of events accepted.
    pub count: usize,
    /// Present, and true, when the session was deleted and the events discarded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

/// Sends a batch of behavioural events for one browser session.
#[utoipa::path(
    post,
    path = "/event/{key}/{identifier}",
    tag = "collector",
    operation_id = "collectEvents",
    params(
        ("key" = String, Path, description = "the survey's public tracking key"),
        ("identifier" = String, Path, description = "browser-session identifier: 1 to 128 of [A-Za-z0-9._:-]"),
    ),
    responses(
        (status = 201, description = "events accepted (durably logged)", body = IngestionResult),
        (status = 202, description = "session deleted; events discarded", body = IngestionResult),
        (status = 400, description = "malformed body or identifier", body = super::error::ErrorBody),
        (status = 404, description = "unknown tracking key", body = super::error::ErrorBody),
        (status = 408, description = "the body did not arrive within the body timeout", body = super::error::ErrorBody),
        (status = 413, description = "body over 1 MiB or more than 1000 events", body = super::error::ErrorBody),
        (status = 415, description = "unsupported content type", body = super::error::ErrorBody),
        (status = 429, description = "too many requests from this client, for this survey or for this identifier, or too many new sessions for this survey; `Retry-After` says when to retry", body = super::error::ErrorBody),
        (status = 503, description = "collector is catching up, its log cannot be written, or it holds too many request bodies; `Retry-After` says when to retry", body = super::error::ErrorBody),
    )
)]
pub async fn collect(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ApiPath((key, identifier)): ApiPath<(String, String)>,
    headers: HeaderMap,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    // Everything that can refuse a request is checked before its body is buffered: a refused
    // client never gets the server to hold up to 1 MiB for it. What it is still sending is read
    // and dropped (bounded in bytes and time) so that it sees the refusal, not a reset.
    let _body_bytes = match admit(&state, peer, &key, &identifier, &headers).await {
        Ok(permit) => permit,
        Err(refusal) => {
            let declared = declared_length(&headers).unwrap_or(0);
            if declared <= DISCARD_AT_MOST {
                discard_body(request).await;
            }
            return Err(refusal);
        }
    };
    let ApiBytes(body) = ApiBytes::from_request(request, &state).await?;
    let body_len = body.len() as u64;
    let outcome = state
        .ingestor()
        .accept(&key, &identifier, body)
        .await
        .map_err(ingest_error)?;
    let (outcome_label, count) = match &outcome {
        Accepted::Stored { count } => ("stored", *count),
        Accepted::Deleted { count } => ("discarded_deleted", *count),
    };
    series::COLLECTOR_BATCHES_TOTAL
        .with(&[("outcome", outcome_label)])
        .increment(1);
    series::COLLECTOR_EVENTS_TOTAL
        .with(&[("outcome", outcome_label)])
        .increment(count as u64);
    series::COLLECTOR_BYTES_TOTAL
        .with(&[("outcome", outcome_label)])
        .increment(body_len);
    let (status, result) = match outcome {
        Accepted::Stored { count } => (
            StatusCode::CREATED,
            IngestionResult {
                success: true,
                count,
                deleted: None,
            },
        ),
        Accepted::Deleted { count } => (
            StatusCode::ACCEPTED,
            IngestionResult {
                success: true,
                count,
                deleted: Some(true),
            },
        ),
    };
    Ok((status, axum::Json(result)).into_response())
}

/// A refused request's body is read and dropped up to this many declared bytes (4 MiB); past
/// it, the connection is closed at once.
const DISCARD_AT_MOST: u64 = 4 * MAX_BODY_BYTES as u64;

/// The checks that need no body, cheapest first: content type, declared length, identifier,
/// per-IP rate, tracking key, per-survey rate, per-identifier rate, new sessions per survey, and
/// last the budget of body bytes in flight, whose permit the caller holds until the batch is
/// logged.
async fn admit(
    state: &AppState,
    peer: SocketAddr,
    key: &str,
    identifier: &str,
    headers: &HeaderMap,
) -> Result<OwnedSemaphorePermit, ApiError> {
    check_content_type(headers)?;
    let declared = declared_length(headers);
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(ApiError::PayloadTooLarge("body exceeds 1 MiB".to_owned()));
    }
    // Before any per-identifier state: a hostile identifier must not become a limiter key.
    ingest::batch::validate_identifier(identifier).map_err(ApiError::BadRequest)?;
    let limited = |limit: &'static str| {
        move |wait| {
            series::RATE_LIMIT_REFUSALS_TOTAL
                .with(&[("limit", limit)])
                .increment(1);
            ApiError::RateLimited {
                retry_after_secs: retry_after_secs(wait),
            }
        }
    };
    let now = Instant::now();
    if let Some(limiter) = &state.edge.ip_limiter {
        let client = client_ip(headers, peer, state.edge.trust_forwarded_for);
        limiter
            .check(&client, now)
            .map_err(limited("collector_ip"))?;
    }
    // Unknown keys end here (cached, so a stream of them costs no catalog round trips), before
    // a survey-keyed limiter would remember them.
    let survey = state
        .ingestor()
        .survey_for_tracking_key(key)
        .await
        .map_err(ingest_error)?;
    if let Some(limiter) = &state.edge.survey_limiter {
        limiter
            .check(&survey, now)
            .map_err(limited("collector_survey"))?;
    }
    if let Some(limiter) = &state.edge.identifier_limiter {
        limiter
            .check(&(key.to_owned(), identifier.to_owned()), now)
            .map_err(limited("collector_identifier"))?;
    }
    if let Some(sessions) = &state.edge.new_sessions {
        sessions
            .check(&survey, identifier, now)
            .map_err(limited("collector_new_sessions"))?;
    }
    // A body of unknown length (chunked) may grow to the limit: it is charged the limit.
    let charge = declared.map_or(MAX_BODY_BYTES as u64, |length| length.max(1));
    let charge = u32::try_from(charge).unwrap_or(state.edge.body_budget);
    Arc::clone(&state.edge.body_bytes)
        .try_acquire_many_owned(charge.min(state.edge.body_budget))
        .map_err(|_| {
            series::COLLECTOR_REFUSALS_TOTAL
                .with(&[("reason", "bytes_in_flight")])
                .increment(1);
            ApiError::Unavailable(
                "the collector is reading too many request bodies at once; retry shortly"
                    .to_owned(),
            )
        })
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
}

/// Reads and drops what a refused client is still sending, for at most a second, keeping
/// nothing: it then reads the refusal instead of a connection reset.
async fn discard_body(request: axum::extract::Request) {
    use futures::StreamExt;
    let mut stream = request.into_body().into_data_stream();
    let mut seen = 0u64;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len() as u64;
            if seen > DISCARD_AT_MOST {
                break;
            }
        }
    })
    .await;
}

fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    // The media type alone decides, read from the raw bytes: parameters may hold bytes that are
    // not visible ASCII (the fuzzer sent `text/plain;charse\u{feff}t=UTF-8`), which do not make
    // a text/plain body anything else.
    let bytes = value.as_bytes();
    let media_type = bytes
        .split(|byte| *byte == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if media_type.eq_ignore_ascii_case(b"application/json")
        || media_type.eq_ignore_ascii_case(b"text/plain")
    {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(
            "content type must be application/json or text/plain".to_owned(),
        ))
    }
}

fn ingest_error(error: IngestError) -> ApiError {
    match error {
        IngestError::InvalidIdentifier(message) => ApiError::BadRequest(message),
        IngestError::UnknownTrackingKey => ApiError::NotFound("unknown tracking key".to_owned()),
        IngestError::Batch(BatchError::TooLarge) => {
            ApiError::PayloadTooLarge("body exceeds 1 MiB".to_owned())
        }
        IngestError::Batch(error @ BatchError::TooManyEvents) => {
            ApiError::PayloadTooLarge(error.to_string())
        }
        IngestError::Batch(error) => ApiError::BadRequest(error.to_string()),
        IngestError::Overloaded => {
            series::COLLECTOR_REFUSALS_TOTAL
                .with(&[("reason", "lake_backlog")])
                .increment(1);
            ApiError::Unavailable(error.to_string())
        }
        // The log cannot be written (disk full or failing): nothing was acknowledged, and the
        // batch is welcome again once the log has recovered.
        IngestError::Wal(wal) if !matches!(*wal, WalError::Closed) => {
            tracing::warn!(error = %wal, "collector refusing a batch: the log cannot be written");
            series::COLLECTOR_REFUSALS_TOTAL
                .with(&[("reason", "log_unwritable")])
                .increment(1);
            ApiError::Unavailable(
                "the event log cannot be written right now; retry shortly".to_owned(),
            )
        }
        // The log is closed: the instance is shutting down, and another (or this one once
        // restarted) takes the batch.
        IngestError::Wal(_) => {
            ApiError::Unavailable("the collector is shutting down; retry shortly".to_owned())
        }
        // The tracking key could not be looked up: 503 while the catalog is unreachable.
        IngestError::Catalog(error) => ApiError::from(error),
        // A store behind the batch (the lake, for a flush the collector waited on) is away:
        // nothing was acknowledged, and the batch is welcome again shortly.
        other if outage::is_store_down(&other) => {
            tracing::warn!(error = %other, "collector refusing a batch: a store is unavailable");
            ApiError::Unavailable("a store is unavailable; retry shortly".to_owned())
        }
        other => ApiError::internal("could not store the batch", other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn content_types_of_fetch_and_beacon_are_accepted() {
        let mut headers = HeaderMap::new();
        assert!(check_content_type(&headers).is_ok());
        headers.insert(
            header::CONTENT_TYPE,
            "text/plain;charset=UTF-8".parse().expect("value"),
        );
        assert!(check_content_type(&headers).is_ok());
        headers.insert(
            header::CONTENT_TYPE,
            "Application/JSON".parse().expect("value"),
        );
        assert!(check_content_type(&headers).is_ok());
        headers.insert(
            header::CONTENT_TYPE,
            "multipart/form-data".parse().expect("value"),
        );
        assert!(check_content_type(&headers).is_err());
        // Found by the collector's fuzzer: a parameter that is not visible ASCII.
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_bytes("text/plain;charse\u{feff}t=UTF-8".as_bytes()).expect("value"),
        );
        assert!(check_content_type(&headers).is_ok());
    }
}
