//! The HTTP layer: router, shared state and request extractors. The only code that knows HTTP
//! and JSON.
//!
//! - `collector`: `POST /event/{key}/{identifier}` for browsers (no authentication, CORS open).
//! - `embed`: the browser script at `/embed/v1/telltale.js`; `demo`: a demo survey page.
//! - `integrations`: `/integrations/v1/...` for integrators' servers (bearer keys, scopes,
//!   rate limit).
//! - `scoring`: scoring runs (start, poll, cancel).
//! - `deletions`: session deletion (request, poll).
//! - `status`: liveness, readiness, status and Prometheus metrics.
//! - `observe`: the request span, its log line and the request metrics.
//! - `openapi`: the OpenAPI 3.1 document, generated from the handlers.
//! - `rules`: the inputs' rules (patterns, bounds, checks) the handlers enforce and the
//!   document states.
//! - `auth`: bearer authentication and the per-key rate limit.
//! - `error`: [`ApiError`], the only way errors leave, and its body's schema.
//! - `state`: [`AppState`], what every handler shares (the instance's parts, the edge's
//!   limiters, the site), built once at start.
//!
//! Imports point one way: `openapi` names the handlers it documents; the handlers name
//! `error`, `rules` and `auth`, never `openapi` (a unit test checks for cycles).

pub mod auth;
pub mod collector;
pub mod deletions;
pub mod demo;
pub mod desk;
pub mod embed;
pub mod error;
pub mod evidence;
pub mod integrations;
pub mod observe;
pub mod openapi;
pub mod review;
pub mod rules;
pub mod scoring;
pub mod state;
pub mod status;

use std::time::Duration;

use axum::Router;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

pub use error::ApiError;
pub use state::{AppState, Limits, MAX_CACHED_SURVEY_OWNERS, Site, StateInner};

/// The time a client has to send a whole request body, for [`ApiBytes`].
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Duration);

/// The whole application.
pub fn app(state: AppState) -> Router {
    let body_deadline = state.body_timeout;
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

/// `Path` whose rejections are JSON errors (404: a path that does not decode names nothing).
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => Err(ApiError::BadRequest(
                format!("invalid path parameter: {}", error.body_text()),
            )),
            Err(error) => Err(ApiError::BadRequest(error.body_text())),
        }
    }
}

/// The request body as bytes, with the body-limit rejection as a JSON 413 and a body not
/// received within the [`BodyDeadline`] as a JSON 408.
pub struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let deadline = request
            .extensions()
            .get::<BodyDeadline>()
            .map_or(DEFAULT_BODY_DEADLINE, |deadline| deadline.0);
        match tokio::time::timeout(deadline, Bytes::from_request(request, state)).await {
            Ok(Ok(bytes)) => Ok(ApiBytes(bytes)),
            Ok(Err(rejection)) => Err(bytes_rejection(rejection)),
            Err(_) => Err(ApiError::RequestTimeout(format!(
                "the request body did not arrive within {} s",
                deadline.as_secs()
            ))),
        }
    }
}

/// A JSON endpoint's body: [`ApiBytes`] whose `Content-Type`, when there is a body, is JSON
/// (`application/json` or a `+json` type); any other type is a 415, as the collector answers
/// one it does not take. A body without a `Content-Type` is read as JSON.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .cloned();
        let ApiBytes(body) = ApiBytes::from_request(request, state).await?;
        if !body.is_empty()
            && let Some(value) = content_type
            && !is_json_media_type(&value)
        {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not JSON: send application/json",
                value.to_str().unwrap_or("(not text)")
            )));
        }
        Ok(JsonBytes(body))
    }
}

fn is_json_media_type(value: &axum::http::HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The integration API's largest request body (the collector's is the same).
pub const MAX_JSON_BODY_BYTES: usize = 1024 * 1024;

/// For a router built without [`app`] (tests of single routes).
const DEFAULT_BODY_DEADLINE: Duration = Duration::from_secs(30);

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge("body exceeds 1 MiB".to_owned())
    } else {
        ApiError::BadRequest(format!(
            "could not read the body: {}",
            rejection.body_text()
        ))
    }
}

/// Parses a JSON object request body into `T`, mapping every failure to a 400 with a useful
/// message.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value = serde_json::from_slice(body).map_err(|error| match error.classify() {
        serde_json::error::Category::Data => ApiError::BadRequest(format!("invalid body: {error}")),
        _ => ApiError::BadRequest(format!("body is not valid JSON: {error}")),
    })?;
    // serde also fills a struct from a JSON array, field by field; request bodies are objects.
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::BadRequest(
            "body must be a JSON object".to_owned(),
        ));
    }
    Ok(value)
}

/// ISO 8601 UTC with milliseconds, e.g. `2026-11-22T20:32:55.123Z`.
pub fn iso8601(millis: i64) -> String {
    // chrono's RFC 3339 writer, not `format("%Y-...")`: that parses its format string on every
    // call, about 5 % of the server's CPU in a lookup of 100 rows (benches/README.md).
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn times_are_written_in_utc_to_the_millisecond() {
        assert_eq!(
            super::iso8601(1_764_312_626_243),
            "2025-11-28T06:50:26.243Z"
        );
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::iso8601(1_764_312_626_000),
            "2025-11-28T06:50:26.000Z"
        );
    }

    /// The HTTP layer's modules form no import cycle: each names its siblings through
    /// `super::<module>`, and following those references never leads back. (`openapi` names
    /// every handler it documents; the handlers name `error` and `rules`, never `openapi`.)
    #[test]
    fn the_http_modules_import_no_cycle() {
        let sources: &[(&str, &str)] = &[
            ("auth", include_str!("auth.rs")),
            ("collector", include_str!("collector.rs")),
            ("deletions", include_str!("deletions.rs")),
            ("demo", include_str!("demo.rs")),
            ("embed", include_str!("embed.rs")),
            ("error", include_str!("error.rs")),
            ("integrations", include_str!("integrations.rs")),
            ("observe", include_str!("observe.rs")),
            ("openapi", include_str!("openapi.rs")),
            ("rules", include_str!("rules.rs")),
            ("scoring", include_str!("scoring.rs")),
            ("status", include_str!("status.rs")),
        ];
        let names: BTreeSet<&str> = sources.iter().map(|(name, _)| *name).collect();
        let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (module, text) in sources {
            // Production code only: a module's tests may look anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            for (index, _) in code.match_indices("super::") {
                let rest = &code[index + "super::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(name.as_str()) && name != *module {
                    let target = names.get(name.as_str()).copied().unwrap_or_default();
                    edges.entry(module).or_default().insert(target);
                }
            }
            // `use super::{a::X, b::Y}`.
            for (index, _) in code.match_indices("super::{") {
                let group = &code[index..];
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for name in &names {
                    if group.contains(&format!("{name}::")) && name != module {
                        edges.entry(module).or_default().insert(name);
                    }
                }
            }
        }
        fn visit<'a>(
            node: &'a str,
            edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            path: &mut Vec<&'a str>,
        ) {
            if let Some(start) = path.iter().position(|seen| *seen == node) {
                panic!("import cycle: {} -> {node}", path[start..].join(" -> "));
            }
            path.push(node);
            for next in edges.get(node).into_iter().flatten() {
                visit(next, edges, path);
            }
            path.pop();
        }
        for name in &names {
            visit(name, &edges, &mut Vec::new());
        }
        assert!(
            edges["openapi"].contains("integrations"),
            "the check reads the imports: {edges:?}"
        );
    }
}
