//! One span per request, a log line per answered request and the request metrics.
//!
//! The span (`request`, at info) carries the method and the route template (never the path:
//! paths hold tracking keys, survey ids and references), so every event a handler logs names
//! its request. When the response head is ready one event logs the status and the latency (in
//! milliseconds, to the microsecond): at info, except for the high-volume, low-information answers (collector
//! batches accepted, CORS preflights, status and metrics polls), which log at debug. Their
//! counts and latencies are in `/metrics` whatever the log level.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Route label of requests no route matched (404s of the fallback, 405s).
const UNMATCHED: &str = "unmatched";

pub async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_owned(), |path| path.as_str().to_owned());
    let span = tracing::info_span!("request", method, route = route.as_str());
    let response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = response.status();
    // Microseconds are the clock's resolution worth logging; rounded, the float prints short.
    let latency_ms = (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0;
    let quiet = status.is_success()
        && (route.starts_with("/event/")
            || route.starts_with("/status")
            || route == "/metrics"
            || method == "OPTIONS");
    span.in_scope(|| {
        if quiet {
            tracing::debug!(status = status.as_u16(), latency_ms, "request answered");
        } else {
            tracing::info!(status = status.as_u16(), latency_ms, "request answered");
        }
    });
    series::HTTP_REQUESTS_TOTAL
        .with(vec![
            series::Label::new("route", route.clone()),
            series::Label::new("method", method),
            series::Label::new("status", status.as_u16().to_string()),
        ])
        .increment(1);
    series::HTTP_REQUEST_DURATION_SECONDS
        .with(vec![
            series::Label::new("route", route),
            series::Label::new("method", method),
        ])
        .record(elapsed);
    response
}

/// The method as a label; methods outside HTTP's registered set share one label, so a client
/// inventing methods cannot create series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_label() {
        assert_eq!(method_label(&Method::POST), "POST");
        let invented = Method::from_bytes(b"BREW").expect("method");
        assert_eq!(method_label(&invented), "other");
    }
}
