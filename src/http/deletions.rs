//! Session deletion: `DELETE .../sessions/by-reference/{reference}` and
//! `GET .../session-deletions/{reference}`.
//!
//! The DELETE answers 202 once the tombstone is committed to the catalog and loaded by this
//! instance's collector; the erasure itself runs in the background (`instance::erasure`). A
//! repeated DELETE returns the existing deletion unchanged (a `failed` one starts over).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get};
use catalog::{Scope, SessionDeletion};
use ingest::batch::normalize_reference;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Authenticated;
use super::error::ApiError;
use super::error::ErrorBody;
use super::extract::ApiPath;
use super::format::iso8601;
use super::integrations::owned_survey;
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}",
            delete(request_deletion),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/session-deletions/{reference}",
            get(get_deletion),
        )
}

/// A session deletion.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDeletionView {
    /// The session's external reference (a UUID, lower case).
    pub reference: String,
    /// `pending`, `completed` or `failed`.
    pub status: String,
    /// Erasure attempts made so far.
    pub attempts: u32,
    #[schema(format = DateTime)]
    pub requested_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// While `pending`: what the erasure waits on, as its last attempt found it (`instance
    /// <id>`: an instance of the fleet that has not purged its log; `run <id>`: a scoring run
    /// writing the survey's scores), or null.
    pub waiting_on: Option<String>,
    /// While `pending`: why it waits, or null.
    pub wait_reason: Option<String>,
}

impl From<SessionDeletion> for SessionDeletionView {
    fn from(deletion: SessionDeletion) -> Self {
        SessionDeletionView {
            reference: deletion.reference,
            status: deletion.status.as_str().to_owned(),
            attempts: deletion.attempts,
            requested_at: iso8601(deletion.requested_at),
            updated_at: iso8601(deletion.updated_at),
            completed_at: deletion.completed_at.map(iso8601),
            error: deletion.error,
            waiting_on: deletion.waiting_on,
            wait_reason: deletion.wait_reason,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDeletionEnvelope {
    pub data: SessionDeletionView,
}

/// Deletes a session: tombstones it at once (later collector batches are answered 202
/// `deleted` and discarded) and erases it from the log, the lake and the catalog in the
/// background.
#[utoipa::path(
    delete,
    path = "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}",
    tag = "integration",
    operation_id = "requestSessionDeletion",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("reference" = String, Path, description = "the session's external reference (UUID)"),
    ),
    responses(
        (status = 202, body = SessionDeletionEnvelope),
        (status = 400, description = "reference is not a UUID", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:delete", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn request_deletion(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
) -> Result<(StatusCode, Json<SessionDeletionEnvelope>), ApiError> {
    auth.require(Scope::SessionsDelete)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let reference = normalize_reference(&reference)
        .ok_or_else(|| ApiError::BadRequest(format!("reference {reference:?} is not a UUID")))?;
    let deletion = state.deletions().request(&survey, &reference).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SessionDeletionEnvelope {
            data: deletion.into(),
        }),
    ))
}

/// A session deletion's progress.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/session-deletions/{reference}",
    tag = "integration",
    operation_id = "getSessionDeletion",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("reference" = String, Path, description = "the session's external reference (UUID)"),
    ),
    responses(
        (status = 200, body = SessionDeletionEnvelope),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:delete", body = ErrorBody),
        (status = 404, description = "survey missing, another organization's, or no deletion requested for the reference", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_deletion(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
) -> Result<Json<SessionDeletionEnvelope>, ApiError> {
    auth.require(Scope::SessionsDelete)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let not_found =
        || ApiError::NotFound("no deletion has been requested for this reference".to_owned());
    let reference = normalize_reference(&reference).ok_or_else(not_found)?;
    let deletion = state
        .catalog()
        .session_deletion(&survey, &reference)
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(SessionDeletionEnvelope {
        data: deletion.into(),
    }))
}
