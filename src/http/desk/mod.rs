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
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use catalog::{DESK_HISTOGRAM_BINS, DeskOrder, DeskQuery, DeskRow, Scope, SurveyId};
use scorer::cohort::groups::Group;
use serde::Deserialize;

use super::auth::Authenticated;
use super::error::ApiError;
use super::error::ErrorBody;
use super::extract::{ApiPath, JsonBytes};
use super::format::iso8601;
use super::integrations::owned_survey;
use super::review::{self, LinkRequest};
use super::state::AppState;

mod clusters;
mod page;
mod views;
pub use clusters::{Clusters, DeskClusters};
pub use views::*;

/// Rows of one page of the list when the request names no `limit`, and the most it may ask.
pub const DEFAULT_PAGE_ROWS: u32 = 100;
pub const MAX_PAGE_ROWS: u32 = 1000;
/// The bands, lowest first.
const BANDS: [&str; 3] = ["automation-like", "review", "human-like"];

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
        .route("/desk/assets/desk.js", get(page::script))
        .route("/desk/assets/desk.css", get(page::style))
        .route("/desk/{surveyId}", get(page::page))
        .route("/desk/{surveyId}/summary", get(page::desk_summary))
        .route("/desk/{surveyId}/sessions", get(page::desk_sessions))
        .route(
            "/desk/{surveyId}/sessions.csv",
            get(page::desk_sessions_csv),
        )
        .route(
            "/desk/{surveyId}/sessions/{reference}/evidence",
            get(page::desk_evidence),
        )
        .route(
            "/desk/{surveyId}/sessions/{reference}/review-link",
            get(page::desk_review_link),
        )
        // The clusters the desk keeps, its own: the shared state knows nothing of the desk.
        .layer(Extension(Arc::new(DeskClusters::default())))
}

fn parse_query<T: for<'de> Deserialize<'de> + Default>(raw: Option<String>) -> Result<T, ApiError> {
    match raw.as_deref() {
        None | Some("") => Ok(T::default()),
        Some(query) => serde_urlencoded::from_str(query)
            .map_err(|error| ApiError::BadRequest(format!("query: {error}"))),
    }
}

/// What the desk's reads share: the handlers' state, and the surveys' clusters the desk keeps
/// (`clusters`; its own, a layer of its routes, so the shared state knows nothing of the desk).
pub(super) struct Desk<'a> {
    state: &'a AppState,
    clusters: &'a DeskClusters,
}

/// The kept clusters, as handlers extract them.
type KeptClusters = Extension<Arc<DeskClusters>>;

/// The survey's summary, answered alike to the API and to the desk page.
async fn summary(desk: Desk<'_>, survey: &SurveyId) -> Result<SurveySummary, ApiError> {
    let state = desk.state;
    let (counts, run, clusters) = tokio::try_join!(
        async { Ok::<_, ApiError>(state.catalog().desk_counts(survey).await?) },
        async { Ok(state.catalog().latest_scoring_run(survey).await?) },
        clusters_of(&desk, survey),
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
        clusters: clusters.groups.iter().map(cluster_view).collect(),
    })
}

async fn clusters_of(desk: &Desk<'_>, survey: &SurveyId) -> Result<Arc<Clusters>, ApiError> {
    desk.clusters.of(desk.state.catalog(), survey).await
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
    desk: &Desk<'_>,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<(DeskQuery, Arc<Clusters>), ApiError> {
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
    let clusters = clusters_of(desk, survey).await?;
    let references = match &params.cluster {
        None => None,
        Some(id) => Some(
            clusters
                .groups
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
        clusters,
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
    desk: Desk<'_>,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<DeskSessionsEnvelope, ApiError> {
    let (query, clusters) = list_query(&desk, survey, params).await?;
    let rows = desk.state.catalog().desk_page(survey, &query).await?;
    let next = (rows.len() == query.limit as usize)
        .then(|| rows.last().map(cursor))
        .flatten();
    Ok(DeskSessionsEnvelope {
        data: rows
            .into_iter()
            .map(|row| session_view(row, &clusters.cluster_of))
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
    desk: Desk<'_>,
    survey: &SurveyId,
    params: &ListParams,
) -> Result<Response, ApiError> {
    let state = desk.state;
    if params.after.is_some() || params.limit.is_some() {
        return Err(ApiError::BadRequest(
            "the CSV holds every row: it takes no after or limit".to_owned(),
        ));
    }
    let (mut query, clusters) = list_query(&desk, survey, params).await?;
    query.limit = MAX_PAGE_ROWS;
    let mut writer = csv::Writer::from_writer(Vec::new());
    let csv_error = |error: csv::Error| ApiError::internal("could not write the CSV", error);
    writer.write_record(CSV_HEADER).map_err(csv_error)?;
    loop {
        let rows = state.catalog().desk_page(survey, &query).await?;
        let full = rows.len() == query.limit as usize;
        query.after = rows
            .last()
            .map(|row| (row.human_score_percent, row.reference.clone()));
        for row in rows {
            let view = session_view(row, &clusters.cluster_of);
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
    Extension(clusters): KeptClusters,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
) -> Result<Json<SurveySummaryEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let desk = Desk {
        state: &state,
        clusters: &clusters,
    };
    Ok(Json(SurveySummaryEnvelope {
        data: summary(desk, &survey).await?,
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
    Extension(clusters): KeptClusters,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<DeskSessionsEnvelope>, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let params: ListParams = parse_query(raw)?;
    let desk = Desk {
        state: &state,
        clusters: &clusters,
    };
    Ok(Json(sessions_page(desk, &survey, &params).await?))
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
    Extension(clusters): KeptClusters,
    auth: Authenticated,
    ApiPath(survey_id): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let params: ListParams = parse_query(raw)?;
    let desk = Desk {
        state: &state,
        clusters: &clusters,
    };
    sessions_csv(desk, &survey, &params).await
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
    let signature = state.site.links.sign_desk(survey.as_str(), key, expires);
    let url = format!(
        "{}/desk/{}?key={key}&expires={expires}&sig={signature}",
        state.site.public_url,
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
