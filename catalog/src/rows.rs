//! Reading catalog records out of result rows, once for both backends.
//!
//! The two backends store the same columns; only the row type differs. [`Columns`] is the
//! handful of typed reads the records need, implemented for each backend's row, so each
//! record is mapped by one function.

use sqlx::Row;

use crate::ids::{OrganizationId, RunId, SurveyId, TrackingKey};
use crate::keys::{KeyPrefix, Scope};
use crate::model::*;
use crate::{Error, Result};

/// The typed column reads the record mappers use.
pub(crate) trait Columns {
    fn text(&self, column: &str) -> Result<String>;
    fn opt_text(&self, column: &str) -> Result<Option<String>>;
    fn int(&self, column: &str) -> Result<i64>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>>;
    fn flag(&self, column: &str) -> Result<bool>;
    fn bytes(&self, column: &str) -> Result<Vec<u8>>;
    fn float(&self, column: &str) -> Result<f64>;

    /// A non-negative count (stored signed).
    fn count(&self, column: &str) -> Result<u64> {
        Ok(self.int(column)?.max(0) as u64)
    }
}

macro_rules! columns_for {
    ($row:ty) => {
        impl Columns for $row {
            fn text(&self, column: &str) -> Result<String> {
                Ok(self.try_get(column)?)
            }
            fn opt_text(&self, column: &str) -> Result<Option<String>> {
                Ok(self.try_get(column)?)
            }
            fn int(&self, column: &str) -> Result<i64> {
                Ok(self.try_get(column)?)
            }
            fn opt_int(&self, column: &str) -> Result<Option<i64>> {
                Ok(self.try_get(column)?)
            }
            fn flag(&self, column: &str) -> Result<bool> {
                Ok(self.try_get(column)?)
            }
            fn bytes(&self, column: &str) -> Result<Vec<u8>> {
                Ok(self.try_get(column)?)
            }
            fn float(&self, column: &str) -> Result<f64> {
                Ok(self.try_get(column)?)
            }
        }
    };
}

columns_for!(sqlx::sqlite::SqliteRow);
columns_for!(sqlx::postgres::PgRow);

pub(crate) fn organization(row: &impl Columns) -> Result<Organization> {
    Ok(Organization {
        id: OrganizationId::from_stored(row.text("id")?),
        name: row.text("name")?,
        created_at: row.int("created_at")?,
    })
}

pub(crate) fn key_info(row: &impl Columns) -> Result<KeyInfo> {
    let prefix = row.text("prefix")?;
    let scopes = row.text("scopes")?;
    Ok(KeyInfo {
        prefix: KeyPrefix::parse(&prefix)
            .ok_or_else(|| Error::Corrupt(format!("key prefix {prefix:?}")))?,
        organization_id: OrganizationId::from_stored(row.text("organization_id")?),
        label: row.text("label")?,
        scopes: Scope::parse_list(&scopes).map_err(Error::Corrupt)?,
        created_at: row.int("created_at")?,
        revoked_at: row.opt_int("revoked_at")?,
    })
}

/// What [`authenticated_key`] reads: a key `k` joined with its organization `o`.
pub(crate) const AUTHENTICATED_KEY_COLUMNS: &str = "k.prefix, k.organization_id, k.label, k.scopes, k.created_at, k.revoked_at, \
     k.secret_sha256, o.name AS organization_name, o.deleted_at";

/// A key row joined with its organization's `organization_name` and `deleted_at`, checked
/// against the presented secret's digest. `None` for a wrong secret or a revoked key.
pub(crate) fn authenticated_key(
    row: &impl Columns,
    presented_sha256: &str,
) -> Result<Option<AuthenticatedKey>> {
    // Comparing digests: timing reveals nothing useful about the secret itself.
    if row.text("secret_sha256")? != presented_sha256 {
        return Ok(None);
    }
    let key = key_info(row)?;
    if key.revoked_at.is_some() {
        return Ok(None);
    }
    Ok(Some(AuthenticatedKey {
        key,
        organization_name: row.text("organization_name")?,
        organization_deleted: row.opt_int("deleted_at")?.is_some(),
    }))
}

pub(crate) const SURVEY_COLUMNS: &str =
    "id, organization_id, external_survey_id, name, tracking_key, created_at, updated_at";

pub(crate) fn survey(row: &impl Columns) -> Result<Survey> {
    Ok(Survey {
        id: SurveyId::from_stored(row.text("id")?),
        organization_id: OrganizationId::from_stored(row.text("organization_id")?),
        external_survey_id: row.text("external_survey_id")?,
        name: row.text("name")?,
        tracking_key: TrackingKey::from_stored(row.text("tracking_key")?),
        created_at: row.int("created_at")?,
        updated_at: row.int("updated_at")?,
    })
}

pub(crate) fn tombstone(row: &impl Columns) -> Result<Tombstone> {
    Ok(Tombstone {
        id: row.int("id")?,
        survey_id: SurveyId::from_stored(row.text("survey_id")?),
        reference: row.text("reference")?,
        created_at: row.int("created_at")?,
    })
}

pub(crate) fn tombstoned_identifier(row: &impl Columns) -> Result<TombstonedIdentifier> {
    Ok(TombstonedIdentifier {
        id: row.int("id")?,
        survey_id: SurveyId::from_stored(row.text("survey_id")?),
        identifier_sha256: row.text("identifier_sha256")?,
    })
}

pub(crate) const RUN_COLUMNS: &str = "id, survey_id, force, status, total, scored, skipped,
    failed, failures, deferred, deferred_reason, error, created_at, started_at, completed_at,
    updated_at, cancel_requested_at, cancel_requested_by, canceled_at, canceled_by, owner,
    lease_until";

pub(crate) fn scoring_run(row: &impl Columns) -> Result<ScoringRun> {
    let status = row.text("status")?;
    let failures = row.text("failures")?;
    Ok(ScoringRun {
        id: RunId::from_stored(row.text("id")?),
        survey_id: SurveyId::from_stored(row.text("survey_id")?),
        force: row.flag("force")?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| Error::Corrupt(format!("run status {status:?}")))?,
        total: row.count("total")?,
        scored: row.count("scored")?,
        skipped: row.count("skipped")?,
        failed: row.count("failed")?,
        failures: serde_json::from_str(&failures)
            .map_err(|error| Error::Corrupt(format!("run failures: {error}")))?,
        deferred: row.count("deferred")?,
        deferred_reason: row.opt_text("deferred_reason")?,
        error: row.opt_text("error")?,
        created_at: row.int("created_at")?,
        started_at: row.int("started_at")?,
        completed_at: row.opt_int("completed_at")?,
        updated_at: row.opt_int("updated_at")?,
        cancel_requested_at: row.opt_int("cancel_requested_at")?,
        cancel_requested_by: row.opt_text("cancel_requested_by")?,
        canceled_at: row.opt_int("canceled_at")?,
        canceled_by: row.opt_text("canceled_by")?,
        owner: row.opt_text("owner")?,
        lease_until: row.opt_int("lease_until")?,
    })
}

pub(crate) fn failures_json(failures: &[ScoringFailure]) -> Result<String> {
    serde_json::to_string(failures).map_err(|error| Error::Corrupt(error.to_string()))
}

/// A run's failures without those naming the erased session (by reference or identifier), or
/// None when none did.
pub(crate) fn failures_without(
    failures: &str,
    erasure: &crate::SessionErasure,
) -> Result<Option<String>> {
    let mut list: Vec<ScoringFailure> =
        serde_json::from_str(failures).map_err(|error| Error::Corrupt(error.to_string()))?;
    let before = list.len();
    list.retain(|failure| {
        !failure.session_id.eq_ignore_ascii_case(&erasure.reference)
            && !erasure
                .identifiers
                .iter()
                .any(|identifier| identifier == &failure.session_id)
    });
    if list.len() == before {
        return Ok(None);
    }
    failures_json(&list).map(Some)
}

pub(crate) const DELETION_COLUMNS: &str = "survey_id, reference, status, attempts, requested_at,
    updated_at, completed_at, error, next_attempt_at, owner, lease_until, waiting_on, wait_reason";

pub(crate) fn deletion(row: &impl Columns) -> Result<SessionDeletion> {
    let status = row.text("status")?;
    Ok(SessionDeletion {
        survey_id: SurveyId::from_stored(row.text("survey_id")?),
        reference: row.text("reference")?,
        status: DeletionStatus::parse(&status)
            .ok_or_else(|| Error::Corrupt(format!("deletion status {status:?}")))?,
        attempts: u32::try_from(row.count("attempts")?).unwrap_or(u32::MAX),
        requested_at: row.int("requested_at")?,
        updated_at: row.int("updated_at")?,
        completed_at: row.opt_int("completed_at")?,
        error: row.opt_text("error")?,
        next_attempt_at: row.int("next_attempt_at")?,
        owner: row.opt_text("owner")?,
        lease_until: row.opt_int("lease_until")?,
        waiting_on: row.opt_text("waiting_on")?,
        wait_reason: row.opt_text("wait_reason")?,
    })
}

pub(crate) fn session_identity(row: &impl Columns) -> Result<SessionIdentity> {
    Ok(SessionIdentity {
        identifier: row.text("identifier")?,
        reference: row.opt_text("reference")?,
        event_count: row.count("event_count")?,
        received: row
            .opt_int("first_received_at")?
            .zip(row.opt_int("last_received_at")?),
    })
}

pub(crate) fn scored_reference(row: &impl Columns) -> Result<ScoredReference> {
    Ok(ScoredReference {
        reference: row.text("reference")?,
        run_id: row.text("run_id")?,
    })
}

/// A `cohort_points` row's point (columns `modality`, `mask`, `cell`, `point`).
pub(crate) fn cohort_point(row: &impl Columns) -> Result<CohortPoint> {
    let corrupt = |column: &str| Error::Corrupt(format!("cohort point {column}"));
    Ok(CohortPoint {
        modality: u8::try_from(row.int("modality")?).map_err(|_| corrupt("modality"))?,
        mask: u32::try_from(row.int("mask")?).map_err(|_| corrupt("mask"))?,
        cell: row.int("cell")?,
        values: CohortPoint::decode_values(&row.bytes("point")?),
    })
}

/// Where a reference's places are kept (`reference_summaries.cohort_cells`): the primary key of
/// each of its `cohort_points` rows but the survey and the reference, as a JSON array of
/// `[modality, mask, cell]`; NULL when it has none. Its points are found, replaced and erased by
/// these keys (`cohort_points` has no index by reference).
pub(crate) fn cohort_cells_json(points: &[CohortPoint]) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let cells: Vec<(u8, u32, i64)> = points
        .iter()
        .map(|p| (p.modality, p.mask, p.cell))
        .collect();
    serde_json::to_string(&cells).ok()
}

/// The keys [`cohort_cells_json`] wrote.
pub(crate) fn cohort_cells(text: Option<&str>) -> Result<Vec<CohortCell>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let cells: Vec<(u8, u32, i64)> = serde_json::from_str(text)
        .map_err(|error| Error::Corrupt(format!("cohort cells of a reference: {error}")))?;
    Ok(cells
        .into_iter()
        .map(|(modality, mask, cell)| CohortCell {
            modality,
            mask,
            cell,
        })
        .collect())
}

/// A row's `reference` with each key of its `cohort_cells`.
pub(crate) fn reference_cells(row: &impl Columns) -> Result<Vec<(String, CohortCell)>> {
    let reference = row.text("reference")?;
    let cells = cohort_cells(row.opt_text("cohort_cells")?.as_deref())?;
    Ok(cells
        .into_iter()
        .map(|cell| (reference.clone(), cell))
        .collect())
}

/// Saturates rather than wraps: counts and sizes never come near `i64::MAX`.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `reference_summaries` row as the desk lists it (the columns of
/// `shared::desk::DESK_COLUMNS`).
pub(crate) fn desk_row(row: &impl Columns) -> Result<DeskRow> {
    let reasons = match row.opt_text("reasons")? {
        Some(text) => serde_json::from_str(&text)
            .map_err(|error| Error::Corrupt(format!("reasons of a desk row: {error}")))?,
        None => Vec::new(),
    };
    let cluster = match (
        row.opt_int("cluster_modality")?,
        row.opt_int("cohort_alike")?,
    ) {
        (Some(modality), alike) => Some((
            u8::try_from(modality)
                .map_err(|_| Error::Corrupt(format!("cluster modality {modality}")))?,
            u32::try_from(alike.unwrap_or(0).max(0)).unwrap_or(u32::MAX),
        )),
        (None, _) => None,
    };
    Ok(DeskRow {
        reference: row.text("reference")?,
        human_score_percent: row.float("human_score_percent")?,
        score_band: row.text("score_band")?,
        scored_at: row.int("scored_at")?,
        model_version: row.text("model_version")?,
        reasons,
        cluster,
        event_count: row.count("event_count")?,
        first_event_at: row.opt_int("first_event_at")?,
        last_event_at: row.opt_int("last_event_at")?,
    })
}

/// A score's reasons as `reference_summaries.reasons` keeps them: a JSON array of strings.
pub(crate) fn reasons_json(reasons: &[String]) -> String {
    serde_json::Value::from(reasons.to_vec()).to_string()
}

/// An `instances` row as an erasure or a backup sees it (columns `instance_id`, `epoch`, `live`,
/// `fenced`, `lake_fenced`, `purge_error`, `silent_ms`).
pub(crate) fn fleet_member(row: &impl Columns) -> Result<crate::FleetMember> {
    Ok(crate::FleetMember {
        instance: row.text("instance_id")?,
        epoch: row.int("epoch")?,
        live: row.flag("live")?,
        fenced: row.flag("fenced")?,
        lake_fenced: row.flag("lake_fenced")?,
        purge_error: row.opt_text("purge_error")?,
        silent_ms: row.int("silent_ms")?,
    })
}
