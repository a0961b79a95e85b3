//! A survey's review desk (docs/review.md, "A survey's desk"): the survey's scored sessions at
//! a glance for the people who act on the scores.
//!
//! - In the integration API (scope `sessions:read`): the summary (the latest run, counts per
//!   band, a histogram of scores, the captured sessions not scored, the clusters the runs
//!   named), a page of sessions in score order with their reasons, and the same list as CSV.
//! - The desk page, behind a signed link the integrator's server asks for (as the review
//!   page's): the link names the survey, the key that asked for it and an expiry at most an
//!   hour ahead. It answers 404 once tampered with, expired, or once that key is revoked. The
//!   page reads the same summary and list through its own signed routes, draws each cluster's
//!   members' paths small side by side, and opens a session's review page in place.
//!
//! Erasure holds at once: a reference whose deletion was requested leaves the counts, the
//! clusters, the list and the export in the same instant (the catalog leaves tombstoned
//! references out of every desk read).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use catalog::{DESK_HISTOGRAM_BINS, DeskOrder, DeskQuery, DeskRow, KeyPrefix, Scope, SurveyId};
use scorer::cohort::groups::Group;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Authenticated;
use super::error::ErrorBody;
use super::evidence::{EvidenceEnvelope, captured_session, session_evidence};
use super::integrations::owned_survey;
use super::review::{self, LinkRequest, MAX_LINK_SECS};
use super::{ApiError, ApiPath, AppState, JsonBytes, iso8601};

mod clusters;
pub use clusters::DeskClusters;

const PAGE: &str = include_str!("desk.html");
const SCRIPT: &str = include_str!("desk.js");
const STYLE: &str = include_str!("desk.css");

/// Rows of one page of the list when the request names no `limit`, and the most it may ask.
pub const DEFAULT_PAGE_ROWS: u32 = 100;
pub const MAX_PAGE_ROWS: u32 = 1000;
/// The bands, lowest first.
const BANDS: [&str; 3] = ["automation-like", "review", "human-like"];

/// The desk's Content-Security-Policy: the review page's, and the review page in a frame.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/integrations/v1/surveys/{surveyId}/summary",
            get(get_summary),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/summary/sessions",
            get(get_sessions),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/summary/sessions.csv",
            get(get_sessions_csv),
        )
        .route(
            "/integrations/v1/surveys/{surveyId}/desk-links",
            post(create_desk_link),
        )
        .route("/desk/assets/desk.js", get(script))
        .route("/desk/assets/desk.css", get(style))
        .route("/desk/{surveyId}", get(page))
        .route("/desk/{surveyId}/summary", get(desk_summary))
        .route("/desk/{surveyId}/sessions", get(desk_sessions))
        .route("/desk/{surveyId}/sessions.csv", get(desk_sessions_csv))
        .route(
            "/desk/{surveyId}/sessions/{reference}/evidence",
            get(desk_evidence),
        )
        .route(
            "/desk/{surveyId}/sessions/{reference}/review-link",
            get(desk_review_link),
        )
}

/// The latest run of a survey, as the desk shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeskRunView {
    pub id: String,
    /// `running`, `completed`, `failed` or `canceled`.
    pub status: String,
    pub total: u64,
    pub scored: u64,
    pub skipped: u64,
    pub failed: u64,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
}

/// Scored sessions per band.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct BandCounts {
    #[serde(rename = "automation-like")]
    pub automation_like: u64,
    pub review: u64,
    #[serde(rename = "human-like")]
    pub human_like: u64,
}

/// One bin of the histogram of scores: sessions with `from <= score < to` (the last bin
/// includes 100).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistogramBin {
    pub from: f64,
    pub to: f64,
    pub sessions: u64,
}

/// A feature a cluster's members share: their median percentile among people and how far
/// apart they are on it (largest minus smallest, percentile points).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedFeatureView {
    pub name: String,
    pub median_percentile: f64,
    pub range_percentile: f64,
}

/// A group of sessions the runs found alike: the same modality and measured features, each
/// within 3 percentile points of another member's.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// Names the cluster in `cluster` filters and in the list's `cluster` column.
    pub id: String,
    /// `pointing`, `typing` or `touch`.
    pub modality: String,
    pub size: u64,
    /// The members' references, sorted.
    pub members: Vec<String>,
    pub features: Vec<SharedFeatureView>,
    /// The largest difference between two members on any feature, percentile points.
    pub widest_percentile: f64,
}

/// A survey at a glance.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SurveySummary {
    pub survey_id: String,
    /// The most recently started run; absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_run: Option<DeskRunView>,
    /// Sessions with a score (each its latest), per band below.
    pub scored: u64,
    /// Sessions captured with a reference and not scored yet.
    pub unscored: u64,
    pub bands: BandCounts,
    /// 20 bins of 5 points.
    pub histogram: Vec<HistogramBin>,
    /// Largest first.
    pub clusters: Vec<ClusterView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SurveySummaryEnvelope {
    pub data: SurveySummary,
}

/// One scored session as the desk lists it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeskSessionView {
    pub reference: String,
    pub human_score_percent: f64,
    /// `automation-like`, `review` or `human-like`.
    pub score_band: String,
    /// Why, most important first.
    pub reasons: Vec<String>,
    /// The cluster it is a member of (a summary cluster's `id`), if any.
    pub cluster: Option<String>,
    pub event_count: u64,
    #[schema(format = DateTime)]
    pub first_event_at: Option<String>,
    #[schema(format = DateTime)]
    pub last_event_at: Option<String>,
    #[schema(format = DateTime)]
    pub scored_at: String,
    pub model_version: String,
}

/// A page of the list.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeskSessionsEnvelope {
    pub data: Vec<DeskSessionView>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The list's filters and page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this band: `automation-like`, `review` or `human-like`.
    pub band: Option<String>,
    /// Only this cluster's members (a summary cluster's `id`).
    pub cluster: Option<String>,
    /// `asc` (lowest score first, the default) or `desc`.
    pub order: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Rows a page: 1 to 1000; 100 when absent.
    pub limit: Option<u32>,
}

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

fn parse_query<T: for<'de> Deserialize<'de> + Default>(raw: Option<String>) -> Result<T, ApiError> {
    match raw.as_deref() {
        None | Some("") => Ok(T::default()),
        Some(query) => serde_urlencoded::from_str(query)
            .map_err(|error| ApiError::BadRequest(format!("query: {error}"))),
    }
}

/// The survey's summary, answered alike to the API and to the desk page.
async fn summary(state: &AppState, survey: &SurveyId) -> Result<SurveySummary, ApiError> {
    let (counts, run, clusters) = tokio::try_join!(
        async { Ok::<_, ApiError>(state.catalog.desk_counts(survey).await?) },
        async { Ok(state.catalog.latest_scoring_run(survey).await?) },
        clusters_of(state, survey),
    )?;
    let mut bands = BandCounts::default();
    for (band, count) in &counts.bands {
        match band.as_str() {
            "automation-like" => bands.automation_like = *count,
            "review" => bands.review = *count,
            "human-like" => bands.human_like = *count,
            _ => {}
        }
    }
    let width = 100.0 / DESK_HISTOGRAM_BINS as f64;
    Ok(SurveySummary {
        survey_id: survey.to_string(),
        latest_run: run.map(|run| DeskRunView {
            id: run.id.to_string(),
            status: run.status.as_str().to_owned(),
            total: run.total,
            scored: run.scored,
            skipped: run.skipped,
            failed: run.failed,
            created_at: iso8601(run.created_at),
            completed_at: run.completed_at.map(iso8601),
        }),
        scored: counts.bands.iter().map(|(_, n)| n).sum(),
        unscored: counts.unscored,
        bands,
        histogram: counts
            .histogram
            .iter()
            .enumerate()
            .map(|(i, &sessions)| HistogramBin {
                from: i as f64 * width,
                to: (i + 1) as f64 * width,
                sessions,
            })
            .collect(),
        clusters: clusters.iter().map(cluster_view).collect(),
    })
}

async fn clusters_of(state: &AppState, survey: &SurveyId) -> Result<Arc<Vec<Group>>, ApiError> {
    state.desk_clusters.of(&state.catalog, survey).await
}

fn cluster_view(group: &Group) -> ClusterView {
    ClusterView {
        id: group.id(),
        modality: group.modality.to_owned(),
        size: group.members.len() as u64,
        members: group.members.clone(),
        features: group
            .features
            .iter()
            .map(|feature| SharedFeatureView {
                name: feature.name.to_owned(),
                median_percentile: feature.median,
                range_percentile: feature.range,
            })
            .collect(),
        widest_percentile: group.widest,
    }
}

/// What a list request asks of the catalog, and the clusters its rows are named by.
async fn list_query(
    state: &AppState,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<(DeskQuery, HashMap<String, String>), ApiError> {
    if let Some(band) = &params.band
        && !BANDS.contains(&band.as_str())
    {
        return Err(ApiError::BadRequest(format!(
            "band must be one of {}, not {band:?}",
            BANDS.join(", ")
        )));
    }
    let order = match params.order.as_deref() {
        None | Some("asc") => DeskOrder::Ascending,
        Some("desc") => DeskOrder::Descending,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "order must be asc or desc, not {other:?}"
            )));
        }
    };
    let limit = params.limit.unwrap_or(DEFAULT_PAGE_ROWS);
    if !(1..=MAX_PAGE_ROWS).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_PAGE_ROWS}, not {limit}"
        )));
    }
    let after = params.after.as_deref().map(parse_cursor).transpose()?;
    let groups = clusters_of(state, survey).await?;
    let mut cluster_of = HashMap::new();
    for group in groups.iter() {
        for member in &group.members {
            cluster_of.insert(member.clone(), group.id());
        }
    }
    let references = match &params.cluster {
        None => None,
        Some(id) => Some(
            groups
                .iter()
                .find(|group| group.id() == *id)
                .map(|group| group.members.clone())
                .ok_or_else(|| ApiError::NotFound(format!("no cluster {id:?} in this survey")))?,
        ),
    };
    Ok((
        DeskQuery {
            band: params.band.clone(),
            references,
            order,
            after,
            limit,
        },
        cluster_of,
    ))
}

/// A page's `next`: the last row's score and reference.
fn cursor(row: &DeskRow) -> String {
    format!("{}:{}", row.human_score_percent, row.reference)
}

fn parse_cursor(cursor: &str) -> Result<(f64, String), ApiError> {
    let invalid = || ApiError::BadRequest(format!("after is not a page's next: {cursor:?}"));
    let (score, reference) = cursor.split_once(':').ok_or_else(invalid)?;
    let score: f64 = score.parse().map_err(|_| invalid())?;
    if !score.is_finite() || reference.is_empty() {
        return Err(invalid());
    }
    Ok((score, reference.to_owned()))
}

fn session_view(row: DeskRow, cluster_of: &HashMap<String, String>) -> DeskSessionView {
    DeskSessionView {
        cluster: cluster_of.get(&row.reference).cloned(),
        reference: row.reference,
        human_score_percent: row.human_score_percent,
        score_band: row.score_band,
        reasons: row.reasons,
        event_count: row.event_count,
        first_event_at: row.first_event_at.map(iso8601),
        last_event_at: row.last_event_at.map(iso8601),
        scored_at: iso8601(row.scored_at),
        model_version: row.model_version,
    }
}

/// One page of the list.
async fn sessions_page(
    state: &AppState,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<DeskSessionsEnvelope, ApiError> {
    let (query, cluster_of) = list_query(state, survey, params).await?;
    let rows = state.catalog.desk_page(survey, &query).await?;
    let next = (rows.len() == query.limit as usize)
        .then(|| rows.last().map(cursor))
        .flatten();
    Ok(DeskSessionsEnvelope {
        data: rows
            .into_iter()
            .map(|row| session_view(row, &cluster_of))
            .collect(),
        next,
    })
}

/// The CSV's columns: the list's fields, reasons joined by ` | `.
const CSV_HEADER: [&str; 8] = [
    "reference",
    "human_score_percent",
    "score_band",
    "reasons",
    "cluster",
    "event_count",
    "first_event_at",
    "last_event_at",
];

/// Every row the list's filters select, as CSV (read a page of 1000 at a time).
async fn sessions_csv(
    state: &AppState,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<Response, ApiError> {
    if params.after.is_some() || params.limit.is_some() {
        return Err(ApiError::BadRequest(
            "the CSV holds every row: it takes no after or limit".to_owned(),
        ));
    }
    let (mut query, cluster_of) = list_query(state, survey, params).await?;
    query.limit = MAX_PAGE_ROWS;
    let mut writer = csv::Writer::from_writer(Vec::new());
    let csv_error = |error: csv::Error| ApiError::internal("could not write the CSV", error);
    writer.write_record(CSV_HEADER).map_err(csv_error)?;
    loop {
        let rows = state.catalog.desk_page(survey, &query).await?;
        let full = rows.len() == query.limit as usize;
        query.after = rows
            .last()
            .map(|row| (row.human_score_percent, row.reference.clone()));
        for row in rows {
            let view = session_view(row, &cluster_of);
            writer
                .write_record([
                    view.reference,
                    view.human_score_percent.to_string(),
                    view.score_band,
                    view.reasons.join(" | "),
                    view.cluster.unwrap_or_default(),
                    view.event_count.to_string(),
                    view.first_event_at.unwrap_or_default(),
                    view.last_event_at.unwrap_or_default(),
                ])
                .map_err(csv_error)?;
        }
        if !full {
            break;
        }
    }
    let body = writer
        .into_inner()
        .map_err(|error| ApiError::internal("could not write the CSV", error))?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"sessions.csv\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// The survey at a glance: the latest run, counts per band, a histogram of scores, sessions
/// not scored yet, and the clusters the runs named.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/summary",
    tag = "integration",
    operation_id = "getSurveySummary",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters")),
    responses(
        (status = 200, body = SurveySummaryEnvelope),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_summary(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
) -> Result<Json<SurveySummaryEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    Ok(Json(SurveySummaryEnvelope {
        data: summary(&state, &survey).await?,
    }))
}

/// The survey's scored sessions in score order (lowest first unless `order=desc`), a page at
/// a time, with their reasons and cluster.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/summary/sessions",
    tag = "integration",
    operation_id = "listSurveySessions",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters"), ListParams),
    responses(
        (status = 200, body = DeskSessionsEnvelope),
        (status = 400, description = "a filter, order, cursor or limit not understood", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's, or no such cluster", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_sessions(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<DeskSessionsEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let params: ListParams = parse_query(raw)?;
    Ok(Json(sessions_page(&state, &survey, &params).await?))
}

/// Every session the filters select as CSV: reference, human_score_percent, score_band,
/// reasons (joined by ` | `), cluster, event_count, first_event_at, last_event_at.
#[utoipa::path(
    get,
    path = "/integrations/v1/surveys/{surveyId}/summary/sessions.csv",
    tag = "integration",
    operation_id = "exportSurveySessions",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters"), ListParams),
    responses(
        (status = 200, content_type = "text/csv", body = String),
        (status = 400, description = "a filter or order not understood, or a page asked for", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's, or no such cluster", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn get_sessions_csv(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let params: ListParams = parse_query(raw)?;
    sessions_csv(&state, &survey, &params).await
}

/// A short-lived signed link to the survey's desk page, for a person to open in a browser.
/// It stops working when it expires or when the key that asked for it is revoked.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/desk-links",
    tag = "integration",
    operation_id = "createDeskLink",
    security(("bearer" = [])),
    params(("surveyId" = String, Path, description = "24 hexadecimal characters")),
    request_body(content = Option<LinkRequest>, description = "optional; `{}` or no body for 900 s"),
    responses(
        (status = 201, body = review::EvidenceLinkEnvelope),
        (status = 400, description = "expiresInSeconds outside 1 to 3600", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn create_desk_link(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    JsonBytes(body): JsonBytes,
) -> Result<(StatusCode, Json<review::EvidenceLinkEnvelope>), ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let seconds = review::link_seconds(&body)?;
    let key = auth.0.key.prefix.as_str();
    let expires = review::now_secs() + seconds;
    let signature = state.review_secret.sign_desk(survey.as_str(), key, expires);
    let url = format!(
        "{}/desk/{}?key={key}&expires={expires}&sig={signature}",
        state.public_url,
        survey.as_str()
    );
    Ok((
        StatusCode::CREATED,
        Json(review::EvidenceLinkEnvelope {
            data: review::EvidenceLink {
                url,
                expires_at: iso8601(review::secs_to_millis(expires)),
            },
        }),
    ))
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
        .review_secret
        .verify_desk(survey.as_str(), key, expires, signature)
    {
        return Err(not_found());
    }
    let prefix = KeyPrefix::parse(key).ok_or_else(not_found)?;
    let (info, owner) = tokio::try_join!(
        state.catalog.key_info(&prefix),
        state.catalog.survey_by_id(&survey),
    )?;
    match (info, owner) {
        (Some(info), Some(owner))
            if info.revoked_at.is_none()
                && info.organization_id == owner.organization_id
                && info.scopes.contains(&Scope::SessionsRead) =>
        {
            Ok((survey, expires))
        }
        _ => Err(not_found()),
    }
}

/// Headers every answer under `/desk/` carries (the review page's, with its frame allowed).
fn private(response: Response) -> Response {
    review::private_with(response, CONTENT_SECURITY_POLICY)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    private(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
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
async fn page(
    State(state): State<AppState>,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |_, _, _, _| async {
        Ok(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE))
    })
    .await
}

async fn desk_summary(
    State(state): State<AppState>,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |state, survey, _, _| async move {
        Ok(Json(SurveySummaryEnvelope {
            data: summary(&state, &survey).await?,
        }))
    })
    .await
}

async fn desk_sessions(
    State(state): State<AppState>,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(
        &state,
        &survey_id,
        raw,
        |state, survey, _, params| async move {
            Ok(Json(sessions_page(&state, &survey, &params.list()).await?))
        },
    )
    .await
}

async fn desk_sessions_csv(
    State(state): State<AppState>,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(&state, &survey_id, raw, |state, survey, _, params| async move {
        sessions_csv(&state, &survey, &params.list()).await
    })
    .await
}

/// One member's evidence, for the cluster's small drawings.
async fn desk_evidence(
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
async fn desk_review_link(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    signed(
        &state,
        &survey_id,
        raw,
        |state, survey, expires, _| async move {
            let (reference, _) = captured_session(&state, &survey, &reference).await?;
            let signature = state
                .review_secret
                .sign(survey.as_str(), &reference, expires);
            Ok(Json(review::EvidenceLinkEnvelope {
                data: review::EvidenceLink {
                    url: format!(
                        "{}/review/{}/{reference}?expires={expires}&sig={signature}",
                        state.public_url,
                        survey.as_str()
                    ),
                    expires_at: iso8601(review::secs_to_millis(expires)),
                },
            }))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_the_last_row_and_reads_back() {
        let row = DeskRow {
            reference: "6f1c9b3e-0000-4000-8000-000000000001".to_owned(),
            human_score_percent: 12.345,
            score_band: "automation-like".to_owned(),
            scored_at: 0,
            model_version: "v".to_owned(),
            reasons: Vec::new(),
            cluster: None,
            event_count: 1,
            first_event_at: None,
            last_event_at: None,
        };
        let next = cursor(&row);
        assert_eq!(
            parse_cursor(&next).expect("cursor"),
            (12.345, row.reference.clone())
        );
        for bad in ["", "12", "x:ref", "12:", "inf:ref", "NaN:ref"] {
            assert!(parse_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_query_parameters_are_refused() {
        assert!(parse_query::<ListParams>(Some("band=review&limit=5".to_owned())).is_ok());
        assert!(parse_query::<ListParams>(Some("bogus=1".to_owned())).is_err());
        assert!(parse_query::<ListParams>(Some("limit=many".to_owned())).is_err());
        assert!(parse_query::<ListParams>(None).is_ok());
    }
}
