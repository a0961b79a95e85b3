//! Records stored in and returned by the catalog.

use crate::ids::{OrganizationId, SurveyId, TrackingKey};
use crate::keys::{IntegrationKeySecret, KeyPrefix, Scope};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    pub id: OrganizationId,
    pub name: String,
    pub created_at: i64,
}

/// A key as listed: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    pub prefix: KeyPrefix,
    pub organization_id: OrganizationId,
    pub label: String,
    pub scopes: Vec<Scope>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// A key just created; `secret` exists only in this value.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    pub secret: IntegrationKeySecret,
    pub info: KeyInfo,
}

/// The result of authenticating a presented key.
#[derive(Debug, Clone)]
pub struct AuthenticatedKey {
    pub key: KeyInfo,
    pub organization_name: String,
    /// The organization was deleted: context answers 404, everything else 401.
    pub organization_deleted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    pub id: SurveyId,
    pub organization_id: OrganizationId,
    pub external_survey_id: String,
    pub name: String,
    pub tracking_key: TrackingKey,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which consumer of a write-ahead log a watermark belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalConsumer {
    /// Session statistics for lookup.
    Stats,
    /// Parquet files in the lake.
    Lake,
}

impl WalConsumer {
    pub fn as_str(self) -> &'static str {
        match self {
            WalConsumer::Stats => "stats",
            WalConsumer::Lake => "lake",
        }
    }
}

/// Statistics to add to one browser session (identifier) of a survey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDelta {
    pub survey_id: SurveyId,
    pub identifier: String,
    /// Normalized (lowercase, hyphenated) UUID, when known. A known reference is never replaced
    /// by `None`.
    pub reference: Option<String>,
    /// The reference was named by the embed (`interviewId`), rather than defaulted from a UUID
    /// identifier; only an explicit reference replaces an explicit one.
    pub reference_explicit: bool,
    pub event_count: u64,
    pub first_event_at: i64,
    pub last_event_at: i64,
}

/// What lookup reports for one reference.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub reference: String,
    pub event_count: u64,
    pub first_event_at: Option<i64>,
    pub last_event_at: Option<i64>,
    pub score: Option<SessionScore>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionScore {
    pub human_score_percent: f64,
    pub score_band: String,
    pub scored_at: i64,
    pub model_version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LakeFileKind {
    Events,
    Features,
    Scores,
}

impl LakeFileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LakeFileKind::Events => "events",
            LakeFileKind::Features => "features",
            LakeFileKind::Scores => "scores",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "events" => Some(LakeFileKind::Events),
            "features" => Some(LakeFileKind::Features),
            "scores" => Some(LakeFileKind::Scores),
            _ => None,
        }
    }
}

/// A file written to the lake, to be made live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLakeFile {
    /// Object path relative to the lake root, e.g.
    /// `events/survey_id=…/date=2026-11-22/….parquet`.
    pub path: String,
    pub kind: LakeFileKind,
    pub survey_id: SurveyId,
    pub partition_date: Option<String>,
    pub row_count: u64,
    pub size_bytes: u64,
    pub min_session: Option<String>,
    pub max_session: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LakeFile {
    pub id: i64,
    pub file: NewLakeFile,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub id: i64,
    pub survey_id: SurveyId,
    pub reference: String,
    pub created_at: i64,
}
