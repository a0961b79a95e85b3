//! The scale-out backend: PostgreSQL, shared by any number of `telltale serve` instances.
//!
//! The schema and the semantics are the SQLite backend's (one conformance suite holds for
//! both, `catalog/tests/conformance.rs`). What differs is concurrency: SQLite has one writer at
//! a time, PostgreSQL runs transactions side by side at READ COMMITTED, so the places where
//! that matters say how they stay correct:
//!
//! - one active scoring run per survey: the partial unique index, as in SQLite;
//! - fences (only a run's or deletion's current owner writes): the owner check locks the row
//!   (`FOR SHARE`/`FOR UPDATE`), so a claim cannot slip in between the check and the write;
//! - claims of runs and deletions skip rows another instance is claiming (`SKIP LOCKED`)
//!   instead of queueing behind it;
//! - tombstones and tombstoned identifiers are polled by id (`id > last seen`): their inserts
//!   take one advisory lock, so ids become visible in the order they were drawn and a poller
//!   never skips one that commits late;
//! - the integration API's per-key limit is counted here for the whole fleet
//!   ([`Organizations::admit_api_request`](crate::Organizations::admit_api_request)).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row};

use crate::ids::{OrganizationId, RunId, SurveyId, TrackingKey};
use crate::keys::{IntegrationKeySecret, KeyPrefix, Scope};
use crate::model::*;
use crate::rows::{
    self, AUTHENTICATED_KEY_COLUMNS, DELETION_COLUMNS, RUN_COLUMNS, SURVEY_COLUMNS, to_i64,
};
use crate::{Error, Result, now_millis};

mod cohort;
mod deletions;
mod fleet;
mod summaries;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Advisory lock classes (the first half of a two-key advisory lock); class 2 is the API
/// limit's, taken in `telltale_admit_api_request` (migration 0003).
const LOCK_TOMBSTONE_IDS: i32 = 1;

#[derive(Debug, Clone)]
pub struct PgCatalog {
    pool: PgPool,
}

type Tx<'c> = sqlx::Transaction<'c, Postgres>;

/// See [`PgCatalog::open`].
const ACQUIRE_TIMEOUT: Duration = outage::CATALOG_CONNECT_TIMEOUT;

impl PgCatalog {
    /// Connects to `url` (`postgres://...`) and applies pending migrations. Concurrent
    /// instances starting together are safe: sqlx's migrator holds an advisory lock.
    pub async fn open(url: &str) -> Result<Self> {
        let catalog = Self::connect(url).await?;
        crate::migrate(&MIGRATOR, &catalog.pool).await?;
        Ok(catalog)
    }

    /// Connects without migrating: to read a catalog another release may own (a restore's
    /// source of tombstones).
    pub async fn open_read_only(url: &str) -> Result<Self> {
        Self::connect(url).await
    }

    async fn connect(url: &str) -> Result<Self> {
        // A hung or overloaded server cancels a statement after the outage policy's timeout
        // (57014, an outage to callers) instead of holding the request that waits for it.
        let statement_timeout = outage::CATALOG_STATEMENT_TIMEOUT.as_millis().to_string();
        let options = PgConnectOptions::from_str(url)?
            .application_name("telltale")
            .options([("statement_timeout", statement_timeout.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // How long a request waits for a connection, including sqlx's retries of a refused
            // one: while PostgreSQL restarts, an integrator gets a 503 with `Retry-After` within
            // this, as the readiness check (2 s) reports it, instead of a request held for long.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}

async fn set_watermark(
    tx: &mut Tx<'_>,
    instance: &str,
    consumer: WalConsumer,
    lsn: u64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO wal_watermarks (instance_id, consumer, lsn) VALUES ($1, $2, $3)
         ON CONFLICT (instance_id, consumer)
         DO UPDATE SET lsn = GREATEST(wal_watermarks.lsn, excluded.lsn)",
    )
    .bind(instance)
    .bind(consumer.as_str())
    .bind(to_i64(lsn))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sums deltas of the same identifier (one `INSERT ... ON CONFLICT DO UPDATE` may not touch a
/// row twice in PostgreSQL), in (survey, identifier) order: two instances applying overlapping
/// batches then lock the rows they share in the same order, where arrival order deadlocked them
/// (a 30-minute fleet soak logged a `deadlock detected` retry).
fn merge_deltas(deltas: &[SessionDelta]) -> Vec<SessionDelta> {
    let mut merged: Vec<SessionDelta> = Vec::with_capacity(deltas.len());
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(deltas.len());
    for delta in deltas {
        let key = (delta.survey_id.as_str(), delta.identifier.as_str());
        match index.get(&key) {
            None => {
                index.insert(key, merged.len());
                merged.push(delta.clone());
            }
            Some(&at) => {
                let existing = &mut merged[at];
                // The reference rule of the upsert, applied as if the deltas came one by one.
                if (delta.reference_explicit || existing.reference.is_none())
                    && delta.reference.is_some()
                {
                    existing.reference = delta.reference.clone();
                }
                existing.reference_explicit |= delta.reference_explicit;
                existing.event_count += delta.event_count;
                existing.first_event_at = existing.first_event_at.min(delta.first_event_at);
                existing.last_event_at = existing.last_event_at.max(delta.last_event_at);
                existing.first_received_at =
                    existing.first_received_at.min(delta.first_received_at);
                existing.last_received_at = existing.last_received_at.max(delta.last_received_at);
            }
        }
    }
    merged.sort_by(|a, b| {
        (a.survey_id.as_str(), a.identifier.as_str())
            .cmp(&(b.survey_id.as_str(), b.identifier.as_str()))
    });
    merged
}

/// What the shared SQL asks of this backend (see `shared`).
impl PgCatalog {
    /// Row locks for claims: a claim skips rows another instance is claiming
    /// instead of queueing behind it.
    const SKIP_LOCKED: &str = "FOR UPDATE SKIP LOCKED";

    /// The catalog's clock in Unix milliseconds, one value a statement (the fleet's leases are
    /// judged by it alone, never an instance's clock).
    const NOW_MS: &str = "(extract(epoch from statement_timestamp()) * 1000)::bigint";

    /// A score's bin of the desk's histogram (5 points wide; 100 is in the last).
    const SCORE_BIN: &str = "LEAST(floor(human_score_percent / 5)::bigint, 19)";
    /// Index hint for the desk's reads in score order.
    const BY_SCORE: &str = "";

    /// Index hints for the shared SQL of a run's plan: SQLite's planner, without statistics,
    /// would take a primary key's `survey_id` prefix and read the whole survey.
    const LIVE_REFERENCES: &str = "";
    const DUE_REFERENCES: &str = "";
    const SESSIONS_BY_REFERENCE: &str = "";

    /// The joins of a run's plan, each driven from its small side by a LATERAL probe that the
    /// planner cannot reorder (`OFFSET 0` keeps the subquery from being pulled up): a plan made
    /// on statistics from before a survey's million sessions arrived (autovacuum off, or just
    /// behind) otherwise took the new survey for a few rows and scanned the whole survey once
    /// per row, and a first run never finished its plan read. Each side's cost stays what the
    /// run reads: the unscored references, the tombstones, the run's own scores.
    const SESSIONS_OF_REFERENCE: &str = "CROSS JOIN LATERAL (
            SELECT s.identifier, s.reference, s.event_count, s.first_received_at,
                   s.last_received_at
            FROM sessions s WHERE s.survey_id = r.survey_id AND s.reference = r.reference
            OFFSET 0) s";
    const TOMBSTONED_LIVE: &str = "tombstones t CROSS JOIN LATERAL (
            SELECT r.scored_at FROM reference_summaries r
            WHERE r.survey_id = t.survey_id AND r.reference = t.reference AND r.sessions > 0
            OFFSET 0) r
        WHERE t.survey_id = $1";
    const SCORED_BY_RUN: &str = "session_scores c CROSS JOIN LATERAL (
            SELECT 1 FROM reference_summaries r
            WHERE r.survey_id = c.survey_id AND r.reference = c.reference AND r.sessions > 0
            OFFSET 0) r
        WHERE c.survey_id = $1 AND c.run_id = $2";

    /// `IN` a list bound as parameter 2, as [`IN_LIST_3`] for parameter 3.
    const IN_LIST_2: &str = "= ANY($2)";

    /// `identifier IN` a list bound as parameter 3, for the shared SQL (see [`bound_list`]).
    const IN_LIST_3: &str = "= ANY($3)";

    /// A list of strings as one bound parameter (see [`IN_LIST_3`]).
    fn bound_list(values: &[String]) -> &[String] {
        values
    }

    /// Lifts the statement timeout of `tx` from a request's bound to a bulk read's
    /// (`outage::CATALOG_BULK_STATEMENT_TIMEOUT`), until the transaction ends.
    async fn allow_bulk_statements(tx: &mut Tx<'_>) -> Result<()> {
        let timeout_ms = outage::CATALOG_BULK_STATEMENT_TIMEOUT.as_millis();
        sqlx::query(&format!("SET LOCAL statement_timeout = {timeout_ms}"))
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Runs a VACUUM (which cannot run in a transaction, so `SET LOCAL` cannot bound it) with
    /// the bulk statements' timeout on a connection of its own. A connection whose timeout
    /// could not be set back is closed rather than returned to the pool.
    async fn vacuum(&self, statement: &'static str) -> Result<()> {
        use sqlx::Executor as _;
        let mut connection = self.pool.acquire().await?;
        let lift = format!(
            "SET statement_timeout = {}",
            outage::CATALOG_BULK_STATEMENT_TIMEOUT.as_millis()
        );
        // Plain `&str`s: sent as simple queries, as a VACUUM must be.
        let mut vacuumed = connection.execute(lift.as_str()).await.map(|_| ());
        if vacuumed.is_ok() {
            vacuumed = connection.execute(statement).await.map(|_| ());
        }
        let reset = connection.execute("RESET statement_timeout").await;
        if reset.is_err() {
            drop(connection.detach());
        }
        vacuumed?;
        reset?;
        Ok(())
    }

    /// Serializes the inserts of tombstone rows (see the module docs) until the transaction ends.
    async fn lock_tombstone_ids(tx: &mut Tx<'_>) -> Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
            .bind(LOCK_TOMBSTONE_IDS)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn insert_tombstoned_identifiers(
        tx: &mut Tx<'_>,
        survey: &SurveyId,
        hashes: &[String],
        now: i64,
    ) -> Result<()> {
        if hashes.is_empty() {
            return Ok(());
        }
        Self::lock_tombstone_ids(tx).await?;
        sqlx::query(
            "INSERT INTO tombstoned_identifiers (survey_id, identifier_sha256, created_at)
             SELECT $1::text, h, $3::int8 FROM unnest($2::text[]) AS h
             ON CONFLICT (survey_id, identifier_sha256) DO NOTHING",
        )
        .bind(survey.as_str())
        .bind(hashes)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

crate::shared::impl_organizations!(PgCatalog, {
    fn counts_api_requests(&self) -> bool {
        true
    }

    async fn admit_api_request(
        &self,
        key: &KeyPrefix,
        limit: u32,
        window_ms: i64,
    ) -> Result<ApiAdmission> {
        // One round trip: the function (migration 0003) locks the key, prunes, counts and
        // records, without a disk flush of its own.
        let wait_ms: Option<i64> =
            sqlx::query_scalar("SELECT telltale_admit_api_request($1, $2, $3)")
                .bind(key.as_str())
                .bind(i32::try_from(limit).unwrap_or(i32::MAX))
                .bind(window_ms)
                .fetch_one(&self.pool)
                .await?;
        Ok(admission(wait_ms))
    }

    async fn authenticate_and_admit(
        &self,
        secret: &IntegrationKeySecret,
        limit: u32,
        window_ms: i64,
    ) -> Result<Option<(AuthenticatedKey, ApiAdmission)>> {
        // The key and its admission in one round trip. The secret and revocation are checked
        // in the statement too, so that only a request `rows::authenticated_key` accepts is
        // counted (a CASE calls its volatile function only for the branch it takes).
        let presented = secret.sha256_hex();
        let row = sqlx::query(&format!(
            "SELECT {AUTHENTICATED_KEY_COLUMNS},
                    CASE WHEN k.secret_sha256 = $2 AND k.revoked_at IS NULL
                         THEN telltale_admit_api_request(k.prefix, $3, $4) END AS wait_ms
             FROM integration_keys k JOIN organizations o ON o.id = k.organization_id
             WHERE k.prefix = $1"
        ))
        .bind(secret.prefix().as_str())
        .bind(&presented)
        .bind(i32::try_from(limit).unwrap_or(i32::MAX))
        .bind(window_ms)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let Some(key) = rows::authenticated_key(&row, &presented)? else {
            return Ok(None);
        };
        let wait_ms: Option<i64> = row.try_get("wait_ms")?;
        Ok(Some((key, admission(wait_ms))))
    }
});

/// `telltale_admit_api_request`'s answer: NULL when the request was accepted and counted.
fn admission(wait_ms: Option<i64>) -> ApiAdmission {
    match wait_ms {
        None => ApiAdmission::Accepted,
        Some(wait_ms) => ApiAdmission::Refused { wait_ms },
    }
}

crate::shared::impl_surveys!(PgCatalog, {
    async fn apply_session_stats(
        &self,
        instance: &str,
        epoch: i64,
        through_lsn: u64,
        deltas: &[SessionDelta],
    ) -> Result<()> {
        let deltas = merge_deltas(deltas);
        let mut tx = self.pool.begin().await?;
        // The fence: `FOR SHARE` holds the instance's row until commit, so an erasure cannot
        // fence the epoch between this check and the statistics landing.
        let fenced: Option<bool> = sqlx::query_scalar(
            "SELECT fenced_epoch >= $2 FROM instances WHERE instance_id = $1 FOR SHARE",
        )
        .bind(instance)
        .bind(epoch)
        .fetch_optional(&mut *tx)
        .await?;
        if fenced == Some(true) {
            return Err(Error::Fenced {
                instance: instance.to_owned(),
                epoch,
            });
        }
        // The references the sessions are linked to before the upsert (one may move away) and
        // after it: what a lookup answers of each is refreshed in the same transaction.
        let surveys: Vec<String> = deltas
            .iter()
            .map(|d| d.survey_id.as_str().to_owned())
            .collect();
        let identifiers: Vec<String> = deltas.iter().map(|d| d.identifier.clone()).collect();
        let mut touched = if deltas.is_empty() {
            Vec::new()
        } else {
            Self::references_of(&mut tx, &surveys, &identifiers).await?
        };
        if !deltas.is_empty() {
            // One statement whatever the batch size: the columns travel as nine arrays.
            sqlx::query(
                "INSERT INTO sessions (survey_id, identifier, reference, reference_explicit,
                                       event_count, first_event_at, last_event_at,
                                       first_received_at, last_received_at)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[],
                                      $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::int8[])
                 ON CONFLICT (survey_id, identifier) DO UPDATE SET
                     reference = CASE WHEN excluded.reference_explicit
                                      THEN excluded.reference
                                      ELSE coalesce(sessions.reference, excluded.reference) END,
                     reference_explicit = sessions.reference_explicit OR excluded.reference_explicit,
                     event_count = sessions.event_count + excluded.event_count,
                     first_event_at = LEAST(sessions.first_event_at, excluded.first_event_at),
                     last_event_at = GREATEST(sessions.last_event_at, excluded.last_event_at),
                     first_received_at = LEAST(sessions.first_received_at,
                                               excluded.first_received_at),
                     last_received_at = GREATEST(sessions.last_received_at,
                                                 excluded.last_received_at)",
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.survey_id.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.identifier.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.reference.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.reference_explicit)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| to_i64(d.event_count))
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.first_event_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.last_event_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.first_received_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.last_received_at)
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *tx)
            .await?;
            touched.extend(Self::references_of(&mut tx, &surveys, &identifiers).await?);
            Self::refresh_summaries(&mut tx, &touched).await?;
        }
        set_watermark(&mut tx, instance, WalConsumer::Stats, through_lsn).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn lookup_sessions(
        &self,
        survey: &SurveyId,
        references: &[String],
    ) -> Result<Vec<SessionSummary>> {
        if references.is_empty() {
            return Ok(Vec::new());
        }
        // One probe of `reference_summaries`' primary key a reference, whatever the survey's
        // size: the row holds the sessions' summed statistics and the latest score.
        let rows = sqlx::query(
            "SELECT r.reference, r.event_count, r.first_event_at, r.last_event_at,
                    r.human_score_percent, r.score_band, r.scored_at, r.model_version
             FROM (SELECT DISTINCT unnest($2::text[]) AS reference) w
             JOIN reference_summaries r ON r.survey_id = $1 AND r.reference = w.reference",
        )
        .bind(survey.as_str())
        .bind(references)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let percent: Option<f64> = row.try_get("human_score_percent")?;
                let band: Option<String> = row.try_get("score_band")?;
                let scored_at: Option<i64> = row.try_get("scored_at")?;
                let model: Option<String> = row.try_get("model_version")?;
                let score = match (percent, band, scored_at, model) {
                    (Some(human_score_percent), Some(score_band), Some(scored_at), Some(model)) => {
                        Some(SessionScore {
                            human_score_percent,
                            score_band,
                            scored_at,
                            model_version: model,
                        })
                    }
                    _ => None,
                };
                let event_count: Option<i64> = row.try_get("event_count")?;
                Ok(SessionSummary {
                    reference: row.try_get("reference")?,
                    event_count: event_count.unwrap_or(0).max(0) as u64,
                    first_event_at: row.try_get("first_event_at")?,
                    last_event_at: row.try_get("last_event_at")?,
                    score,
                })
            })
            .collect()
    }

    async fn session_references(
        &self,
        survey: &SurveyId,
        identifiers: &[String],
    ) -> Result<Vec<(String, String)>> {
        if identifiers.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT identifier, reference FROM sessions
             WHERE survey_id = $1 AND identifier = ANY($2) AND reference IS NOT NULL",
        )
        .bind(survey.as_str())
        .bind(identifiers)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("identifier")?, row.try_get("reference")?)))
            .collect()
    }

    async fn reference_identifiers(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT identifier FROM sessions WHERE survey_id = $1 AND reference = $2",
        )
        .bind(survey.as_str())
        .bind(reference)
        .fetch_all(&self.pool)
        .await?)
    }
});

crate::shared::impl_runs!(PgCatalog, {
    async fn record_scores_when(
        &self,
        survey: &SurveyId,
        run: &RunId,
        owner: &str,
        scores: &[NewScore],
        ready: crate::Ready<'_>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        // The fence: only the run's current owner may publish. `FOR SHARE` holds the run row
        // until commit, so a claim by another instance waits and cannot interleave.
        let owned: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM scoring_runs WHERE id = $1 AND owner = $2 AND status = 'running'
             FOR SHARE",
        )
        .bind(run.as_str())
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        if owned.is_none() {
            return Ok(false);
        }
        // A reference scored twice in one call keeps its last score, as sequential upserts
        // would (one statement may not update a row twice).
        let mut last_of: HashMap<&str, &NewScore> = HashMap::with_capacity(scores.len());
        for score in scores {
            last_of.insert(score.reference.as_str(), score);
        }
        let mut scores: Vec<&NewScore> = last_of.into_values().collect();
        // In reference order: the indexes are written front to back, and rows are locked in
        // one order whoever writes them.
        scores.sort_unstable_by(|a, b| a.reference.cmp(&b.reference));
        let references: Vec<String> = scores.iter().map(|s| s.reference.clone()).collect();
        let had = Self::stored_cells(&mut tx, survey.as_str(), &references).await?;
        if !scores.is_empty() {
            // The scores, and what a lookup answers of each (`reference_summaries`), in one
            // statement.
            sqlx::query(
                "WITH scored AS (
                     INSERT INTO session_scores (survey_id, reference, human_score_percent,
                                                 score_band, scored_at, model_version, run_id)
                     SELECT $1::text, * FROM unnest($2::text[], $3::float8[], $4::text[],
                                                    $5::int8[], $6::text[], $7::text[])
                     ON CONFLICT (survey_id, reference) DO UPDATE SET
                         human_score_percent = excluded.human_score_percent,
                         score_band = excluded.score_band,
                         scored_at = excluded.scored_at,
                         model_version = excluded.model_version,
                         run_id = excluded.run_id
                     RETURNING survey_id, reference, human_score_percent, score_band, scored_at,
                               model_version),
                 desk (reference, reasons, cluster_modality, cohort_alike, cohort_cells,
                       scored_events) AS (
                     SELECT * FROM unnest($2::text[], $8::text[], $9::int8[], $10::int8[],
                                          $11::text[], $12::int8[]))
                 INSERT INTO reference_summaries (survey_id, reference, human_score_percent,
                                                  score_band, scored_at, model_version, reasons,
                                                  cluster_modality, cohort_alike, cohort_cells,
                                                  scored_events)
                 SELECT s.survey_id, s.reference, s.human_score_percent, s.score_band,
                        s.scored_at, s.model_version, d.reasons, d.cluster_modality,
                        d.cohort_alike, d.cohort_cells, d.scored_events
                 FROM scored s JOIN desk d ON d.reference = s.reference
                 ON CONFLICT (survey_id, reference) DO UPDATE SET
                     human_score_percent = excluded.human_score_percent,
                     score_band = excluded.score_band,
                     scored_at = excluded.scored_at,
                     model_version = excluded.model_version,
                     reasons = excluded.reasons,
                     cluster_modality = excluded.cluster_modality,
                     cohort_alike = excluded.cohort_alike,
                     cohort_cells = excluded.cohort_cells,
                     scored_events = excluded.scored_events",
            )
            .bind(survey.as_str())
            .bind(
                scores
                    .iter()
                    .map(|s| s.reference.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.human_score_percent)
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.score_band.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(scores.iter().map(|s| s.scored_at).collect::<Vec<_>>())
            .bind(
                scores
                    .iter()
                    .map(|s| s.model_version.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.run_id.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| rows::reasons_json(&s.reasons))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.cluster.map(|(modality, _)| i64::from(modality)))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.cluster.map(|(_, alike)| i64::from(alike)))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| rows::cohort_cells_json(&s.cohort))
                    .collect::<Vec<_>>(),
            )
            .bind(scores.iter().map(|s| to_i64(s.events)).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            Self::replace_cohort_points(&mut tx, survey.as_str(), &scores, &had).await?;
        }
        if !ready.await {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }
});

crate::shared::impl_desk!(PgCatalog);

#[cfg(test)]
mod tests;
