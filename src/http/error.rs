//! The one error type of the HTTP edge. Every error leaves as `{"error": "..."}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Every error response's body, as the OpenAPI document names it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("rate limit exceeded; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("{0}")]
    Unavailable(String),
    /// Logged in full; the client gets `public` only.
    #[error("{public}")]
    Internal {
        public: &'static str,
        detail: String,
    },
}

impl ApiError {
    pub fn internal(public: &'static str, detail: impl std::fmt::Display) -> Self {
        ApiError::Internal {
            public,
            detail: detail.to_string(),
        }
    }

    /// The status of each error, chosen in one place.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A JSON error response with `status` and `message`.
pub fn error_response(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal { detail, public } = &self {
            tracing::error!(error = %detail, "{public}");
        }
        let status = self.status();
        let mut response = error_response(status, &self.to_string());
        match self {
            ApiError::RateLimited { retry_after_secs } => {
                let value = HeaderValue::from(retry_after_secs);
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            ApiError::Unavailable(_) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
            }
            // RFC 6750: a 401 names the scheme the request must use.
            ApiError::Unauthorized(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

impl From<catalog::Error> for ApiError {
    /// A catalog that cannot be reached right now (a PostgreSQL restart, an exhausted pool) is
    /// a 503 with `Retry-After`, which clients retry; any other catalog failure is a 500.
    fn from(error: catalog::Error) -> Self {
        if outage::is_store_down(&error) {
            tracing::warn!(%error, "catalog unavailable");
            ApiError::Unavailable("the catalog is unavailable; retry shortly".to_owned())
        } else {
            ApiError::internal("catalog error", error)
        }
    }
}
