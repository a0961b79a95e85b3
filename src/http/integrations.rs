//! The integration API (`/integrations/v1`): context, survey provisioning and session lookup.
//!
//! Checks run in this order: key (401), rate limit (429), scope (403), then the request itself
//! (400/404). A survey of another organization is indistinguishable from a missing one (404).

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use catalog::{Scope, SurveyId};
use ingest::batch::normalize_reference;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Authenticated, KeyContext};
use super::error::ApiError;
use super::error::ErrorBody;
use super::extract::{ApiPath, JsonBytes, parse_json};
use super::format::iso8601;
use super::rules::{MAX_LOOKUP_REFERENCES, external_survey_id_is_valid, survey_name};
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/integrations/v1/context", get(get_context))
        .route("/integrations/v1/surveys/", put(provision_empty_id))
        .route(
            "/integrations/v1/surveys/{externalSurveyId}",
            put(provision_survey),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/sessions/lookup",
            post(lookup_sessions),
        )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OrganizationView {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    pub prefix: String,
    pub label: String,
    pub scopes: Vec<String>,
}

/// Integration context.
#[derive(Debug, Serialize, ToSchema)]
pub struct IntegrationContext {
    pub organization: OrganizationView,
    pub key: KeyView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ContextEnvelope {
    pub data: IntegrationContext,
}

/// Survey provisioning request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProvisionRequest {
    /// Must contain a non-whitespace character; after trimming, 1 to 200 characters.
    pub name: String,
}

/// Survey provisioning result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionResult {
    /// The service's survey id (24 hex characters).
    pub survey_id: String,
    /// Public tracking key (24 hex characters), used in the collector path and the embed.
    pub tracking_key: String,
    /// Address the embed sends events to: `{collectorApiUrl}/{trackingKey}/{identifier}`.
    #[schema(format = "uri")]
    pub collector_api_url: String,
    /// Address of the embed script.
    #[schema(format = "uri")]
    pub embed_script_url: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProvisionEnvelope {
    pub data: ProvisionResult,
}

/// Session lookup request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LookupRequest {
    /// 1 to 100 UUIDs.
    pub external_references: Vec<String>,
}

/// One row per submitted reference, in input order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LookupRow {
    pub external_reference: String,
    pub captured: bool,
    pub event_count: u64,
    #[schema(required = true, format = DateTime)]
    pub first_event_at: Option<String>,
    #[schema(required = true, format = DateTime)]
    pub last_event_at: Option<String>,
    #[schema(required = true, minimum = 0, maximum = 100)]
    pub human_score_percent: Option<f64>,
    /// One of `automation-like`, `review`, `human-like`.
    #[schema(required = true)]
    pub score_band: Option<String>,
    #[schema(required = true, format = DateTime)]
    pub scored_at: Option<String>,
    #[schema(required = true)]
    pub model_version: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LookupEnvelope {
    pub data: Vec<LookupRow>,
}

/// Describes the calling key and its organization; the check for a key.
#[utoipa::path(
    get,
    path = "/integrations/v1/context",
    tag = "integration",
    operation_id = "getIntegrationContext",
    security(("bearer" = [])),
    responses(
        (status = 200, body = ContextEnvelope),
        (status = 401, body = ErrorBody),
        (status = 404, description = "the organization that owns the key no longer exists", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_context(KeyContext(key): KeyContext) -> Result<Json<ContextEnvelope>, ApiError> {
    if key.organization_deleted {
        return Err(ApiError::NotFound(
            "the organization that owns this key no longer exists".to_owned(),
        ));
    }
    Ok(Json(ContextEnvelope {
        data: IntegrationContext {
            organization: OrganizationView {
                id: key.key.organization_id.to_string(),
                name: key.organization_name,
            },
            key: KeyView {
                prefix: key.key.prefix.to_string(),
                label: key.key.label,
                scopes: key
                    .key
                    .scopes
                    .iter()
                    .map(|scope| scope.as_str().to_owned())
                    .collect(),
            },
        },
    }))
}

async fn provision_empty_id(auth: Authenticated) -> Result<Json<ProvisionEnvelope>, ApiError> {
    auth.require(Scope::SurveysWrite)?;
    Err(ApiError::BadRequest(
        "external survey id must be 1 to 200 characters".to_owned(),
    ))
}

/// Creates the survey, or renames it; idempotent per organization and external survey id.
#[utoipa::path(
    put,
    path = "/integrations/v1/surveys/{externalSurveyId}",
    tag = "integration",
    operation_id = "provisionSurvey",
    security(("bearer" = [])),
    params(("externalSurveyId" = String, Path, description = "the integrator's survey id, 1 to 200 characters")),
    request_body = ProvisionRequest,
    responses(
        (status = 200, body = ProvisionEnvelope),
        (status = 400, description = "invalid external survey id or body", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks surveys:write", body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 500, description = "survey could not be provisioned", body = ErrorBody),
    )
)]
pub async fn provision_survey(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(external_survey_id): ApiPath<String>,
    JsonBytes(body): JsonBytes,
) -> Result<Json<ProvisionEnvelope>, ApiError> {
    auth.require(Scope::SurveysWrite)?;
    if !external_survey_id_is_valid(&external_survey_id) {
        return Err(ApiError::BadRequest(
            "external survey id must be 1 to 200 characters, none of them NUL".to_owned(),
        ));
    }
    let request: ProvisionRequest = parse_json(&body)?;
    let name = survey_name(&request.name).ok_or_else(|| {
        ApiError::BadRequest(
            "name must contain a non-whitespace character, be at most 200 characters after trimming and hold no NUL"
                .to_owned(),
        )
    })?;
    let survey = state
        .catalog()
        .provision_survey(&auth.0.key.organization_id, &external_survey_id, name)
        .await
        .map_err(|error| {
            // A catalog that is away (a restart, SQLite busy past its timeout under load) is
            // worth a retry: 503 with Retry-After; anything else is the spec's 500.
            if outage::is_store_down(&error) {
                ApiError::from(error)
            } else {
                ApiError::internal("survey could not be provisioned", error)
            }
        })?;
    state
        .ingestor()
        .remember_survey(&survey.tracking_key, &survey.id);
    Ok(Json(ProvisionEnvelope {
        data: ProvisionResult {
            survey_id: survey.id.to_string(),
            tracking_key: survey.tracking_key.to_string(),
            collector_api_url: format!("{}/event", state.site.public_url),
            embed_script_url: format!("{}/embed/v1/telltale.js", state.site.public_url),
        },
    }))
}

/// Capture statistics and scores of sessions, one row per reference, in input order.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/sessions/lookup",
    tag = "integration",
    operation_id = "lookupSurveySessions",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters")),
    request_body = LookupRequest,
    responses(
        (status = 200, body = LookupEnvelope),
        (status = 400, description = "body must hold 1 to 100 UUID references", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn lookup_sessions(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    JsonBytes(body): JsonBytes,
) -> Result<Json<LookupEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey_id = owned_survey(&state, &auth, &survey_id).await?;
    let request: LookupRequest = parse_json(&body)?;
    let count = request.external_references.len();
    if count == 0 || count > MAX_LOOKUP_REFERENCES {
        return Err(ApiError::BadRequest(format!(
            "externalReferences must hold 1 to 100 references, not {count}"
        )));
    }
    let mut normalized = Vec::with_capacity(count);
    for reference in &request.external_references {
        let uuid = normalize_reference(reference)
            .ok_or_else(|| ApiError::BadRequest(format!("{reference:?} is not a UUID")))?;
        normalized.push(uuid);
    }
    let mut distinct = normalized.clone();
    distinct.sort();
    distinct.dedup();
    let summaries: HashMap<String, catalog::SessionSummary> = state
        .catalog()
        .lookup_sessions(&survey_id, &distinct)
        .await?
        .into_iter()
        .map(|summary| (summary.reference.clone(), summary))
        .collect();

    let rows = request
        .external_references
        .into_iter()
        .zip(normalized)
        .map(|(submitted, reference)| {
            let summary = summaries.get(&reference);
            let captured = summary.is_some_and(|s| s.event_count > 0);
            let score = summary.and_then(|s| s.score.as_ref());
            LookupRow {
                external_reference: submitted,
                captured,
                event_count: summary.map_or(0, |s| s.event_count),
                first_event_at: summary
                    .and_then(|s| s.first_event_at)
                    .filter(|_| captured)
                    .map(iso8601),
                last_event_at: summary
                    .and_then(|s| s.last_event_at)
                    .filter(|_| captured)
                    .map(iso8601),
                human_score_percent: score.map(|s| s.human_score_percent),
                score_band: score.map(|s| s.score_band.clone()),
                scored_at: score.map(|s| iso8601(s.scored_at)),
                model_version: score.map(|s| s.model_version.clone()),
            }
        })
        .collect();
    Ok(Json(LookupEnvelope { data: rows }))
}

/// The survey, if it exists and belongs to the key's organization; 404 otherwise.
pub async fn owned_survey(
    state: &AppState,
    auth: &Authenticated,
    survey_id: &str,
) -> Result<SurveyId, ApiError> {
    let not_found = || ApiError::NotFound("survey not found".to_owned());
    let id = SurveyId::parse(survey_id).ok_or_else(not_found)?;
    let organization = &auth.0.key.organization_id;
    if let Some(owner) = state.survey_owners.read().get(&id) {
        return if owner == organization {
            Ok(id)
        } else {
            Err(not_found())
        };
    }
    let survey = state
        .catalog()
        .survey_by_id(&id)
        .await?
        .ok_or_else(not_found)?;
    {
        let mut owners = state.survey_owners.write();
        if owners.len() >= super::state::MAX_CACHED_SURVEY_OWNERS {
            owners.clear();
        }
        owners.insert(survey.id.clone(), survey.organization_id.clone());
    }
    if &survey.organization_id == organization {
        Ok(survey.id)
    } else {
        Err(not_found())
    }
}
