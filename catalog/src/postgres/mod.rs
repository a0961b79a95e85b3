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
mod runs;
mod summaries;
mod surveys;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Advisory lock classes (the first half of a two-key advisory lock); class 2 is the API
/// limit's, taken in `telltale_admit_api_request` (migration 0003).
const LOCK_TOMBSTONE_IDS: i32 = 1;

#[derive(Debug, Clone)]
pub struct PgCatalog {
    pool: PgPool,
    /// Sessions this handle inserted since it last had the statistics' tables analyzed (see
    /// `apply_session_stats`).
    inserted_since_analyze: std::sync::Arc<std::sync::atomic::AtomicU64>,
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
        // (57014, an outage to callers) instead of holding the request that waits for it. Set
        // once connected, not as a startup parameter: a pooler in front of PostgreSQL
        // (PgBouncer) refuses every connection that sends one it does not know, which read as
        // an outage that never ends (docs/deploy.md, "Through PgBouncer").
        // Nor `extra_float_digits`, sqlx's other startup parameter (floats travel in binary).
        let options = PgConnectOptions::from_str(url)?
            .application_name("telltale")
            .extra_float_digits(None);
        let set_timeout = format!(
            "SET statement_timeout = {}",
            outage::CATALOG_STATEMENT_TIMEOUT.as_millis()
        );
        let pool = PgPoolOptions::new()
            .after_connect(move |connection, _| {
                let set_timeout = set_timeout.clone();
                Box::pin(async move {
                    use sqlx::Executor as _;
                    connection.execute(set_timeout.as_str()).await?;
                    Ok(())
                })
            })
            .max_connections(16)
            // How long a request waits for a connection, including sqlx's retries of a refused
            // one: while PostgreSQL restarts, an integrator gets a 503 with `Retry-After` within
            // this, as the readiness check (2 s) reports it, instead of a request held for long.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        Ok(Self {
            pool,
            inserted_since_analyze: Default::default(),
        })
    }
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
        // Back to the request bound `connect` set (a `RESET` would drop it to the server's).
        let back = format!(
            "SET statement_timeout = {}",
            outage::CATALOG_STATEMENT_TIMEOUT.as_millis()
        );
        let reset = connection.execute(back.as_str()).await;
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

crate::shared::impl_desk!(PgCatalog);

#[cfg(test)]
mod tests;
