//! Scoring runs: start, poll, cancel (`/integrations/v1/surveys/{surveyId}/scoring-runs`).
//!
//! Start returns at once with 202; the run works in the background on this instance (see
//! `scorer::run`). A run of another survey, or of a survey of another organization, is 404.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use catalog::{RunId, Scope, ScoringRun};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::Authenticated;
use super::error::ApiError;
use super::error::ErrorBody;
use super::extract::{ApiPath, JsonBytes, parse_json};
use super::format::iso8601;
use super::integrations::owned_survey;
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/integrations/v1/surveys/{surveyId}/scoring-runs",
            post(start_run),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/scoring-runs/{runId}",
            get(get_run),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/scoring-runs/{runId}/cancel",
            post(cancel_run),
        )
}

/// Start scoring run request. Unknown fields are refused, so a misspelt `force` cannot
/// silently start a run that skips scored sessions.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRunRequest {
    /// true re-scores sessions that already have a score; false (the default) skips them.
    #[serde(default)]
    pub force: Option<bool>,
}

/// One session a run could not score.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoringFailureView {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub message: String,
}

/// A scoring run with its current counters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoringRunView {
    pub id: String,
    pub survey_id: String,
    pub force: bool,
    /// `running`, `completed`, `failed` or `canceled`.
    pub status: String,
    pub total: u64,
    pub scored: u64,
    pub skipped: u64,
    pub failed: u64,
    pub failures: Vec<ScoringFailureView>,
    /// Sessions left for a later run: some of their acknowledged events were not in the lake
    /// yet (another instance's log held them). A session is never scored on part of its events.
    pub deferred: u64,
    /// Why sessions were deferred; present when `deferred` is above 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred_reason: Option<String>,
    /// Present on a failed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub updated_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub cancel_requested_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub canceled_at: Option<String>,
    /// Prefix of the key that asked for the cancel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canceled_by: Option<String>,
}

impl From<ScoringRun> for ScoringRunView {
    fn from(run: ScoringRun) -> Self {
        ScoringRunView {
            id: run.id.to_string(),
            survey_id: run.survey_id.to_string(),
            force: run.force,
            status: run.status.as_str().to_owned(),
            total: run.total,
            scored: run.scored,
            skipped: run.skipped,
            failed: run.failed,
            failures: run
                .failures
                .into_iter()
                .map(|failure| ScoringFailureView {
                    session_id: failure.session_id,
                    code: failure.code,
                    message: failure.message,
                })
                .collect(),
            deferred: run.deferred,
            deferred_reason: run.deferred_reason,
            error: run.error,
            created_at: iso8601(run.created_at),
            started_at: iso8601(run.started_at),
            completed_at: run.completed_at.map(iso8601),
            updated_at: run.updated_at.map(iso8601),
            cancel_requested_at: run.cancel_requested_at.map(iso8601),
            canceled_at: run.canceled_at.map(iso8601),
            canceled_by: run.canceled_by,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScoringRunEnvelope {
    pub data: ScoringRunView,
}

/// Starts a scoring run, or returns the survey's active run; returns at once.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/scoring-runs",
    tag = "integration",
    operation_id = "startSurveyScoringRun",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters")),
    request_body(content = StartRunRequest, description = "may be empty: force defaults to false"),
    responses(
        (status = 202, body = ScoringRunEnvelope),
        (status = 400, description = "invalid body", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks scoring:write", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn start_run(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    JsonBytes(body): JsonBytes,
) -> Result<(StatusCode, Json<ScoringRunEnvelope>), ApiError> {
    auth.require(Scope::ScoringWrite)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let request: StartRunRequest = if body.iter().all(u8::is_ascii_whitespace) {
        StartRunRequest::default()
    } else {
        parse_json(&body)?
    };
    let run = state
        .scoring()
        .start(&survey, request.force.unwrap_or(false))
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ScoringRunEnvelope { data: run.into() }),
    ))
}

/// A scoring run with its current counters.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/scoring-runs/{runId}",
    tag = "integration",
    operation_id = "getSurveyScoringRun",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("runId" = String, Path, description = "24 hexadecimal characters"),
    ),
    responses(
        (status = 200, body = ScoringRunEnvelope),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks scoring:read", body = ErrorBody),
        (status = 404, description = "survey or run not found for this survey", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_run(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, run_id)): ApiPath<(String, String)>,
) -> Result<Json<ScoringRunEnvelope>, ApiError> {
    auth.require(Scope::ScoringRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let run = owned_run(&state, &survey, &run_id).await?;
    Ok(Json(ScoringRunEnvelope { data: run.into() }))
}

/// Asks a running run to stop; it becomes `canceled` once its worker stops. A run that has
/// already ended is returned unchanged.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/scoring-runs/{runId}/cancel",
    tag = "integration",
    operation_id = "cancelSurveyScoringRun",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("runId" = String, Path, description = "24 hexadecimal characters"),
    ),
    responses(
        (status = 202, body = ScoringRunEnvelope),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks scoring:write", body = ErrorBody),
        (status = 404, description = "survey or run not found for this survey", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn cancel_run(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, run_id)): ApiPath<(String, String)>,
) -> Result<(StatusCode, Json<ScoringRunEnvelope>), ApiError> {
    auth.require(Scope::ScoringWrite)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let id = RunId::parse(&run_id).ok_or_else(run_not_found)?;
    let run = state
        .catalog()
        .request_run_cancel(&survey, &id, auth.0.key.prefix.as_str())
        .await?
        .ok_or_else(run_not_found)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ScoringRunEnvelope { data: run.into() }),
    ))
}

fn run_not_found() -> ApiError {
    ApiError::NotFound("scoring run not found for this survey".to_owned())
}

async fn owned_run(
    state: &AppState,
    survey: &catalog::SurveyId,
    run_id: &str,
) -> Result<ScoringRun, ApiError> {
    let id = RunId::parse(run_id).ok_or_else(run_not_found)?;
    state
        .catalog()
        .scoring_run(survey, &id)
        .await?
        .ok_or_else(run_not_found)
}
