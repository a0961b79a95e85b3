//! Bearer authentication of integration keys, scope checks and the per-key rate limit.
//!
//! Every request is authenticated against the catalog, so a key revoked or an organization
//! deleted from the command line stops working on every instance at once. Only authenticated
//! requests count towards a key's limit, and refused ones do not count. On a catalog shared by
//! a fleet (PostgreSQL) the limit is counted in the catalog, so it holds for all instances
//! together; on the embedded SQLite default it is counted in process. A client address whose
//! well-formed keys failed `--failed-auth-per-minute` times within the last minute gets 429
//! before its next key is looked up: guessing costs the catalog nothing.

use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use catalog::{ApiAdmission, AuthenticatedKey, IntegrationKeySecret, Scope};

use super::error::ApiError;
use super::extract::client_ip_of;
use super::state::AppState;
use crate::rate_limit::retry_after_secs;

/// A valid, unrevoked key, whose organization may have been deleted (only context accepts that).
pub struct KeyContext(pub AuthenticatedKey);

/// A valid key of a live organization.
pub struct Authenticated(pub AuthenticatedKey);

impl Authenticated {
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.0.key.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this key lacks the {scope} scope"
            )))
        }
    }
}

impl FromRequestParts<AppState> for KeyContext {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or(ApiError::Unauthorized("missing bearer integration key"))?;
        let value = header
            .to_str()
            .map_err(|_| ApiError::Unauthorized("malformed authorization header"))?;
        let (scheme, token) = value
            .split_once(' ')
            .ok_or(ApiError::Unauthorized("malformed authorization header"))?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized(
                "authorization scheme must be Bearer",
            ));
        }
        let secret = IntegrationKeySecret::parse(token.trim())
            .ok_or(ApiError::Unauthorized("malformed integration key"))?;
        let client = client_ip_of(parts, state.edge.trust_forwarded_for).to_string();
        if let Some(failures) = &state.edge.failed_auth
            && let Err(wait) = failures.peek(&client, Instant::now())
        {
            series::RATE_LIMIT_REFUSALS_TOTAL
                .with(&[("limit", "failed_auth")])
                .increment(1);
            return Err(ApiError::RateLimited {
                retry_after_secs: retry_after_secs(wait),
            });
        }
        let failed = || {
            if let Some(failures) = &state.edge.failed_auth {
                failures.record(&client, Instant::now());
            }
            ApiError::Unauthorized("invalid or revoked integration key")
        };
        let (authenticated, wait) = if state.catalog().counts_api_requests() {
            // Several instances share the catalog: the limit is counted there, for all of
            // them, in the same round trip as the key check.
            let (authenticated, admission) = state
                .catalog()
                .authenticate_and_admit(&secret, state.edge.api_requests_per_minute, 60_000)
                .await?
                .ok_or_else(failed)?;
            let wait = match admission {
                ApiAdmission::Accepted => None,
                ApiAdmission::Refused { wait_ms } => {
                    Some(Duration::from_millis(wait_ms.max(0) as u64))
                }
            };
            (authenticated, wait)
        } else {
            let authenticated = state
                .catalog()
                .authenticate(&secret)
                .await?
                .ok_or_else(failed)?;
            let wait = state
                .edge
                .api_limiter
                .check(authenticated.key.prefix.as_str(), Instant::now())
                .err();
            (authenticated, wait)
        };
        if let Some(wait) = wait {
            series::RATE_LIMIT_REFUSALS_TOTAL
                .with(&[("limit", "integration_key")])
                .increment(1);
            return Err(ApiError::RateLimited {
                retry_after_secs: retry_after_secs(wait),
            });
        }
        Ok(KeyContext(authenticated))
    }
}

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let KeyContext(key) = KeyContext::from_request_parts(parts, state).await?;
        if key.organization_deleted {
            return Err(ApiError::Unauthorized(
                "the key's organization no longer exists",
            ));
        }
        Ok(Authenticated(key))
    }
}
