//! The browser embed, served at the versioned address provisioning hands out
//! (`/embed/v1/telltale.js`).
//!
//! The script is compiled into the binary, so every instance serves the same bytes; its ETag is
//! derived from them. Cached for an hour (a new embed version gets a new path), CORS open since
//! survey pages live on integrators' domains.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;

/// The embed's source (`ingest/embed/telltale.js`).
pub const EMBED_SCRIPT: &str = include_str!("../../ingest/embed/telltale.js");

/// A strong validator of the script's bytes (FNV-1a 64: stable across builds and platforms).
static EMBED_ETAG: LazyLock<String> = LazyLock::new(|| {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in EMBED_SCRIPT.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
});

pub fn routes() -> Router<AppState> {
    Router::new().route("/embed/v1/telltale.js", get(embed_script))
}

async fn embed_script(request_headers: HeaderMap) -> Response {
    let etag = EMBED_ETAG.as_str();
    let matches = request_headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    if matches {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    (StatusCode::OK, headers, EMBED_SCRIPT).into_response()
}
