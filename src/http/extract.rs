//! The request extractors every handler shares: a path, a body and a JSON body whose
//! rejections are JSON errors, the parsing of a JSON object body, and the client's address.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The time a client has to send a whole request body, for [`ApiBytes`] (a layer of the
/// router sets it from the edge's limits).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Duration);

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

/// The client's address: the TCP peer, or behind a trusted proxy the right-most address of
/// `X-Forwarded-For` (the one the proxy itself appended; earlier entries are the client's say).
pub fn client_ip(headers: &HeaderMap, peer: SocketAddr, trust_forwarded_for: bool) -> IpAddr {
    if trust_forwarded_for {
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .rev()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.rsplit(','))
            .find_map(|entry| entry.trim().parse::<IpAddr>().ok());
        if let Some(ip) = forwarded {
            return ip;
        }
    }
    peer.ip()
}

/// [`client_ip`] of a request's parts (the TCP peer from the server's connection info; an
/// unspecified address for a router served without it, as in tests of single routes).
pub fn client_ip_of(parts: &Parts, trust_forwarded_for: bool) -> IpAddr {
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |info| info.0);
    client_ip(&parts.headers, peer, trust_forwarded_for)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_for_is_used_only_when_trusted_and_its_last_entry_wins() {
        let peer: SocketAddr = "10.0.0.1:5000".parse().expect("addr");
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            "203.0.113.9, 198.51.100.7".parse().expect("value"),
        );
        assert_eq!(client_ip(&headers, peer, false), peer.ip());
        let last: IpAddr = "198.51.100.7".parse().expect("ip");
        assert_eq!(client_ip(&headers, peer, true), last);
        headers.append("x-forwarded-for", "garbage".parse().expect("value"));
        assert_eq!(client_ip(&headers, peer, true), last);
        assert_eq!(client_ip(&HeaderMap::new(), peer, true), peer.ip());
    }
}
