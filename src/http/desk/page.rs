//! The desk page and the routes its script reads, behind a signed link: the link names the
//! survey, the prefix of the key that asked for it and its expiry; every answer is 404 once the
//! link is tampered with or expired or the key revoked, and carries the review page's private
//! headers with the desk's own Content-Security-Policy.

use axum::Json;
use axum::extract::{Extension, RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use catalog::SurveyId;
use serde::Deserialize;

use super::super::error::ApiError;
use super::super::evidence::{EvidenceEnvelope, captured_session, session_evidence};
use super::super::extract::ApiPath;
use super::super::format::iso8601;
use super::super::review::{self, MAX_LINK_SECS};
use super::super::state::AppState;
use super::{
    Desk, KeptClusters, ListParams, SurveySummaryEnvelope, parse_query, sessions_csv,
    sessions_page, summary,
};

const PAGE: &str = include_str!("desk.html");
const SCRIPT: &str = include_str!("desk.js");
const STYLE: &str = include_str!("desk.css");

/// The desk's Content-Security-Policy: the review page's, and the review page in a frame.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// A signed desk link's query, with the list's parameters where the route takes them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignedParams {
    key: Option<String>,
    expires: Option<u64>,
    sig: Option<String>,
    band: Option<String>,
    cluster: Option<String>,
    order: Option<String>,
    after: Option<String>,
    limit: Option<u32>,
}

impl SignedParams {
    fn list(&self) -> ListParams {
        ListParams {
            band: self.band.clone(),
            cluster: self.cluster.clone(),
            order: self.order.clone(),
            after: self.after.clone(),
            limit: self.limit,
        }
    }
}

/// The survey of a desk link that is signed for it, has not expired, and whose key is still
/// valid for the survey's organization with `sessions:read`; 404 otherwise.
async fn check_desk_link(
    state: &AppState,
    survey_id: &str,
    signed: &SignedParams,
) -> Result<(SurveyId, u64), ApiError> {
    let not_found = || ApiError::NotFound("this desk link is not valid or has expired".to_owned());
    let (Some(key), Some(expires), Some(signature)) =
        (signed.key.as_deref(), signed.expires, signed.sig.as_deref())
    else {
        return Err(not_found());
    };
    let now = review::now_secs();
    if expires < now || expires > now + MAX_LINK_SECS {
        return Err(not_found());
    }
    let survey = SurveyId::parse(survey_id).ok_or_else(not_found)?;
    if !state
        .site
        .links
        .verify_desk(survey.as_str(), key, expires, signature)
    {
        return Err(not_found());
    }
    if !review::key_speaks_for(state, key, &survey).await? {
        return Err(not_found());
    }
    Ok((survey, expires))
}

/// Headers every answer under `/desk/` carries (the review page's, with its frame allowed).
fn private(response: Response) -> Response {
    review::private_with(response, CONTENT_SECURITY_POLICY)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    private(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// Answers a signed desk route: `work` runs only for a valid link.
async fn signed<T, F>(
    state: &AppState,
    survey_id: &str,
    raw: Option<String>,
    work: impl FnOnce(AppState, SurveyId, u64, SignedParams) -> F,
) -> Response
where
    F: std::future::Future<Output = Result<T, ApiError>>,
    T: IntoResponse,
{
    let outcome = async {
        let params: SignedParams = parse_query(raw)?;
        let (survey, expires) = check_desk_link(state, survey_id, &params).await?;
        work(state.clone(), survey, expires, params).await
    }
    .await;
    match outcome {
        Ok(answer) => private(answer.into_response()),
        Err(error) => private(error.into_response()),
    }
}

/// The page of a valid link: it holds nothing of the survey; its script asks with the same
/// signed query.
pub(super) async fn page(
    State(state): State<AppState>,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |_, _, _, _| async {
        Ok(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE))
    })
    .await
}

pub(super) async fn desk_summary(
    State(state): State<AppState>,
    Extension(clusters): KeptClusters,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |state, survey, _, _| async move {
        let desk = Desk {
            state: &state,
            clusters: &clusters,
        };
        Ok(Json(SurveySummaryEnvelope {
            data: summary(desk, &survey).await?,
        }))
    })
    .await
}

pub(super) async fn desk_sessions(
    State(state): State<AppState>,
    Extension(clusters): KeptClusters,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(
        &state,
        &survey_id,
        raw,
        |state, survey, _, params| async move {
            let desk = Desk {
                state: &state,
                clusters: &clusters,
            };
            Ok(Json(sessions_page(desk, &survey, &params.list()).await?))
        },
    )
    .await
}

pub(super) async fn desk_sessions_csv(
    State(state): State<AppState>,
    Extension(clusters): KeptClusters,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(
        &state,
        &survey_id,
        raw,
        |state, survey, _, params| async move {
            let desk = Desk {
                state: &state,
                clusters: &clusters,
            };
            sessions_csv(desk, &survey, &params.list()).await
        },
    )
    .await
}

/// One member's evidence, for the cluster's small drawings.
pub(super) async fn desk_evidence(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |state, survey, _, _| async move {
        let data = session_evidence(&state, &survey, &reference).await?;
        Ok(Json(EvidenceEnvelope { data }))
    })
    .await
}

/// A review link of one session of the survey, living no longer than the desk's.
pub(super) async fn desk_review_link(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(
        &state,
        &survey_id,
        raw,
        |state, survey, expires, params| async move {
            let (reference, _) = captured_session(&state, &survey, &reference).await?;
            // The desk's own key: the review link dies with it, as the desk's link does.
            let key = params.key.unwrap_or_default();
            Ok(Json(review::EvidenceLinkEnvelope {
                data: review::EvidenceLink {
                    url: review::review_url(&state, &survey, &reference, &key, expires),
                    expires_at: iso8601(review::secs_to_millis(expires)),
                },
            }))
        },
    )
    .await
}
