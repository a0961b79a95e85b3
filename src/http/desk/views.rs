//! What the desk's API answers and takes: the summary, the list's rows and pages, the list's
//! query (in the OpenAPI document through `utoipa`).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

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
