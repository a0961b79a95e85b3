//! The review page and its signed links (docs/review.md).
//!
//! An integrator's server asks for a link (`POST .../evidence-links`, scope `sessions:read`);
//! the link names the survey, the reference and an expiry at most an hour ahead, signed with
//! HMAC-SHA-256 under the server's review secret. Whoever holds the link sees that one session's
//! evidence until it expires, and nothing else: no key ever reaches the browser. A tampered,
//! expired or other session's link, and any link of a session whose deletion was requested, is
//! 404. Every answer under `/review/` is `no-store`, sends no referrer and allows only its own
//! script and the evidence request (Content-Security-Policy).

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use catalog::Scope;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::Authenticated;
use super::error::ApiError;
use super::error::ErrorBody;
use super::evidence::{EvidenceEnvelope, captured_session, session_evidence};
use super::extract::{ApiPath, JsonBytes, parse_json};
use super::format::iso8601;
use super::integrations::owned_survey;
use super::state::AppState;

/// The longest a link may live.
pub const MAX_LINK_SECS: u64 = 3600;
/// A link's life when the request names none.
pub const DEFAULT_LINK_SECS: u64 = 900;

const PAGE: &str = include_str!("review.html");
const SCRIPT: &str = include_str!("review.js");
const PATHS: &str = include_str!("paths.js");
const STYLE: &str = include_str!("review.css");

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence-links",
            post(create_link),
        )
        .route("/review/assets/review.js", get(script))
        .route("/review/assets/paths.js", get(paths))
        .route("/review/assets/review.css", get(style))
        .route("/review/{surveyId}/{reference}", get(page))
        .route(
            "/review/{surveyId}/{reference}/evidence",
            get(page_evidence),
        )
}

/// Body of `POST .../evidence-links` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkRequest {
    /// How long the link works: 1 to 3600 seconds; 900 when absent.
    #[schema(minimum = 1, maximum = 3600)]
    pub expires_in_seconds: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceLink {
    /// The review page of the session: open it in a browser; it needs no key.
    pub url: String,
    #[schema(format = DateTime)]
    pub expires_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EvidenceLinkEnvelope {
    pub data: EvidenceLink,
}

/// A short-lived signed link to the session's review page, for a person to open in a browser.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence-links",
    tag = "integration",
    operation_id = "createEvidenceLink",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("reference" = String, Path, description = "the session's external reference (UUID)"),
    ),
    request_body(content = Option<LinkRequest>, description = "optional; `{}` or no body for 900 s"),
    responses(
        (status = 201, body = EvidenceLinkEnvelope),
        (status = 400, description = "expiresInSeconds outside 1 to 3600", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's, no session captured for the reference, or its deletion requested", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn create_link(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    JsonBytes(body): JsonBytes,
) -> Result<(StatusCode, Json<EvidenceLinkEnvelope>), ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let seconds = link_seconds(&body)?;
    let (reference, _) = captured_session(&state, &survey, &reference).await?;
    let expires = now_secs() + seconds;
    let url = review_url(
        &state,
        &survey,
        &reference,
        auth.0.key.prefix.as_str(),
        expires,
    );
    Ok((
        StatusCode::CREATED,
        Json(EvidenceLinkEnvelope {
            data: EvidenceLink {
                url,
                expires_at: iso8601(secs_to_millis(expires)),
            },
        }),
    ))
}

/// How long a link asked for with `body` (a [`LinkRequest`], or nothing) lives, in seconds.
pub(super) fn link_seconds(body: &[u8]) -> Result<u64, ApiError> {
    let request: LinkRequest = if body.is_empty() {
        LinkRequest::default()
    } else {
        parse_json(body)?
    };
    let seconds = request.expires_in_seconds.unwrap_or(DEFAULT_LINK_SECS);
    if !(1..=MAX_LINK_SECS).contains(&seconds) {
        return Err(ApiError::BadRequest(format!(
            "expiresInSeconds must be 1 to {MAX_LINK_SECS}, not {seconds}"
        )));
    }
    Ok(seconds)
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Unix seconds as Unix milliseconds, saturated.
pub fn secs_to_millis(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// A review link of the session, made with the key of prefix `key`, working until `expires`.
pub(super) fn review_url(
    state: &AppState,
    survey: &catalog::SurveyId,
    reference: &str,
    key: &str,
    expires: u64,
) -> String {
    let signature = state
        .site
        .links
        .sign(survey.as_str(), reference, key, expires);
    format!(
        "{}/review/{}/{reference}?key={key}&expires={expires}&sig={signature}",
        state.site.public_url,
        survey.as_str()
    )
}

/// The query of a signed link.
#[derive(Debug, Deserialize)]
pub struct Signed {
    key: Option<String>,
    expires: Option<u64>,
    sig: Option<String>,
}

/// The survey of a link that is signed for exactly this survey, reference and key and has not
/// expired, whose key still speaks for the survey's organization; 404 otherwise (a wrong link
/// names nothing). The signature is checked before anything is asked of the catalog.
async fn check_link(
    state: &AppState,
    survey_id: &str,
    reference: &str,
    signed: &Signed,
) -> Result<catalog::SurveyId, ApiError> {
    let not_found =
        || ApiError::NotFound("this review link is not valid or has expired".to_owned());
    let (Some(key), Some(expires), Some(signature)) =
        (signed.key.as_deref(), signed.expires, signed.sig.as_deref())
    else {
        return Err(not_found());
    };
    if expires < now_secs() || expires > now_secs() + MAX_LINK_SECS {
        return Err(not_found());
    }
    let survey = catalog::SurveyId::parse(survey_id).ok_or_else(not_found)?;
    if !state
        .site
        .links
        .verify(survey.as_str(), reference, key, expires, signature)
    {
        return Err(not_found());
    }
    if !key_speaks_for(state, key, &survey).await? {
        return Err(not_found());
    }
    Ok(survey)
}

/// Whether the key of prefix `key` still speaks for `survey`'s organization with
/// `sessions:read`: unrevoked, its organization not deleted. Asked each time a signed link is
/// opened, so a link dies with its key and its organization at once.
pub(super) async fn key_speaks_for(
    state: &AppState,
    key: &str,
    survey: &catalog::SurveyId,
) -> Result<bool, ApiError> {
    let Some(prefix) = catalog::KeyPrefix::parse(key) else {
        return Ok(false);
    };
    let (standing, owner) = tokio::try_join!(
        state.catalog().key_standing(&prefix),
        state.catalog().survey_by_id(survey),
    )?;
    Ok(match (standing, owner) {
        (Some(standing), Some(owner)) => {
            standing.allows(Scope::SessionsRead)
                && standing.key.organization_id == owner.organization_id
        }
        _ => false,
    })
}

/// Headers every answer under `/review/` carries.
fn private(response: Response) -> Response {
    private_with(response, CONTENT_SECURITY_POLICY)
}

/// The review page's private headers (`no-store`, `no-referrer`, `nosniff`) under `policy`:
/// the survey desk's answers carry them with a policy of their own.
pub(super) fn private_with(mut response: Response, policy: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    private(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// The path drawing the review page and the survey desk share.
async fn paths() -> Response {
    asset("text/javascript; charset=utf-8", PATHS)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// The page of a valid link: the page itself holds nothing of the session; its script asks
/// for the evidence with the same signed query.
async fn page(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    Query(signed): Query<Signed>,
) -> Response {
    let checked = match check_link(&state, &survey_id, &reference, &signed).await {
        Ok(survey) => captured_session(&state, &survey, &reference)
            .await
            .map(|_| ()),
        Err(error) => Err(error),
    };
    match checked {
        Ok(()) => asset("text/html; charset=utf-8", PAGE),
        Err(error) => private(error.into_response()),
    }
}

async fn page_evidence(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    Query(signed): Query<Signed>,
) -> Response {
    let evidence = match check_link(&state, &survey_id, &reference, &signed).await {
        Ok(survey) => session_evidence(&state, &survey, &reference).await,
        Err(error) => Err(error),
    };
    match evidence {
        Ok(data) => private(Json(EvidenceEnvelope { data }).into_response()),
        Err(error) => private(error.into_response()),
    }
}
