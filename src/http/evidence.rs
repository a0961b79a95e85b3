//! A session's evidence for a reviewer: `GET .../sessions/by-reference/{reference}/evidence`.
//!
//! The same key scope and 404 rules as the lookup, and more: a reference that names no captured
//! session, or one whose deletion was requested (at once, before the erasure runs), is 404.
//! What it returns is read from the lake by `scorer::evidence`.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use catalog::Scope;
use ingest::batch::normalize_reference;
use scorer::evidence::SessionEvidence;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Authenticated;
use super::error::ApiError;
use super::error::ErrorBody;
use super::extract::ApiPath;
use super::integrations::owned_survey;
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence",
        get(get_evidence),
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EvidenceEnvelope {
    pub data: SessionEvidence,
}

/// A session's behaviour and the evidence behind its score: its timeline (pointer paths,
/// presses, key rhythm by key class, scrolls, focus and visibility, pasted and inserted text
/// lengths), the environment the embed reported, its latest score with its reasons, and every
/// feature with its value, its contribution under the server's model and its percentile among
/// the model's TRAIN humans.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence",
    tag = "integration",
    operation_id = "getSessionEvidence",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("reference" = String, Path, description = "the session's external reference (UUID)"),
    ),
    responses(
        (status = 200, body = EvidenceEnvelope),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's, no session captured for the reference, or its deletion requested", body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 503, description = "the catalog or the lake is unavailable; `Retry-After` says when to retry", body = ErrorBody),
    )
)]
pub async fn get_evidence(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
) -> Result<Json<EvidenceEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let evidence = session_evidence(&state, &survey, &reference).await?;
    Ok(Json(EvidenceEnvelope { data: evidence }))
}

/// How long a request waits for the lake: the outage policy's read timeout. The object store's
/// client retries a refused connection for much longer (a background flush should outlast an
/// outage); a client waiting on an answer is better served by a 503 it retries, as it is during
/// a catalog outage.
const LAKE_READ_DEADLINE: Duration = outage::LAKE_READ_TIMEOUT;

fn lake_unavailable() -> ApiError {
    ApiError::Unavailable("the lake is unavailable; retry shortly".to_owned())
}

/// The normalized reference and its linked identifiers, when it names a captured session whose
/// deletion was not asked for; 404 otherwise (the evidence and the review links share this).
pub async fn captured_session(
    state: &AppState,
    survey: &catalog::SurveyId,
    reference: &str,
) -> Result<(String, Vec<String>), ApiError> {
    let not_found = || ApiError::NotFound("no session captured for this reference".to_owned());
    let reference = normalize_reference(reference).ok_or_else(not_found)?;
    if state
        .catalog()
        .session_deletion(survey, &reference)
        .await?
        .is_some()
    {
        return Err(ApiError::NotFound(
            "the session's deletion was requested".to_owned(),
        ));
    }
    let identifiers = state
        .catalog()
        .reference_identifiers(survey, &reference)
        .await?;
    if identifiers.is_empty() {
        return Err(not_found());
    }
    Ok((reference, identifiers))
}

/// The evidence of `reference` in `survey`, or 404 when there is none to show.
pub async fn session_evidence(
    state: &AppState,
    survey: &catalog::SurveyId,
    reference: &str,
) -> Result<SessionEvidence, ApiError> {
    let (reference, identifiers) = captured_session(state, survey, reference).await?;
    let scorer = state.scoring().scorer();
    let read = scorer::evidence::read(
        &scorer.lake,
        &scorer.query,
        &scorer.model,
        survey.as_str(),
        &reference,
        &identifiers,
    );
    let evidence = match tokio::time::timeout(LAKE_READ_DEADLINE, read).await {
        Ok(Ok(evidence)) => evidence,
        // A failed read of stores that answer is a fault of ours (500); of one that does not, an
        // outage (503).
        Ok(Err(error)) if !outage::is_store_down(&error) && state.store_down().await.is_none() => {
            return Err(ApiError::internal(
                "reading the session's evidence failed",
                error,
            ));
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "lake unavailable");
            return Err(lake_unavailable());
        }
        Err(_) => {
            tracing::warn!(
                deadline_secs = LAKE_READ_DEADLINE.as_secs(),
                "the lake did not answer an evidence read in time"
            );
            return Err(lake_unavailable());
        }
    };
    if evidence.timeline.event_count == 0 {
        // Linked, but nothing of it has reached the lake (or all of it was erased).
        return Err(ApiError::NotFound(
            "no session captured for this reference".to_owned(),
        ));
    }
    Ok(evidence)
}
