//! The embedded default backend: one SQLite file in WAL journal mode.
//!
//! `synchronous = FULL` makes every commit durable before it returns: the log's consumers
//! truncate the write-ahead log only after their catalog commit, so a commit that a power loss
//! could roll back would lose acknowledged events.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, SqlitePool};

use crate::ids::{OrganizationId, RunId, SurveyId, TrackingKey};
use crate::keys::{IntegrationKeySecret, KeyPrefix, Scope};
use crate::model::*;
use crate::rows::{self, DELETION_COLUMNS, RUN_COLUMNS, SURVEY_COLUMNS, to_i64};
use crate::{Error, Result, now_millis};

mod cohort;
mod fleet;
mod summaries;
mod surveys;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// SQLite bounds the number of bound parameters per statement; lookups are at most 100
/// references, but batched writes are chunked below this.
const MAX_ROWS_PER_STATEMENT: usize = 500;
/// Rows a statement of a run's record writes (at most 11 parameters a row, within SQLite's
/// 32,766).
const RECORD_ROWS_PER_STATEMENT: usize = 2000;

#[derive(Debug, Clone)]
pub struct SqliteCatalog {
    pool: SqlitePool,
}

impl SqliteCatalog {
    /// Opens (creating if needed) the catalog file and applies pending migrations.
    pub async fn open(path: &Path) -> Result<Self> {
        let catalog = Self::connect(path, true).await?;
        crate::migrate(&MIGRATOR, &catalog.pool).await?;
        Ok(catalog)
    }

    /// Opens an existing catalog file to read, changing nothing (no migration, no file made):
    /// a restore reading the tombstones of the catalog a backup was taken from.
    pub async fn open_read_only(path: &Path) -> Result<Self> {
        Self::connect(path, false).await
    }

    async fn connect(path: &Path, write: bool) -> Result<Self> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(write)
            .read_only(!write)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            // A busy database answers within the outage policy's statement time, or the caller
            // is told it is unavailable.
            .busy_timeout(outage::CATALOG_STATEMENT_TIMEOUT)
            // Lookups on surveys of a million sessions touch a few B-tree pages per reference:
            // keep hot pages in a 64 MiB cache per connection (the default is 2 MiB) and read
            // the rest through a memory map rather than a `pread` per page.
            .pragma("cache_size", "-65536")
            .pragma("mmap_size", "1073741824")
            // Deleted content on the B-tree pages a transaction writes anyway is zeroed at no
            // extra I/O: an index entry a score or a statistics update moves or removes (a
            // reference leaving `reference_summaries_due` as it is scored, say) leaves no copy
            // of the reference in the page's free space, where an erasure could not reach it.
            // Freed pages are zeroed only by the erasure's own transaction (`ON`, see
            // `erase_session_rows`): on for every connection, those extra writes stalled the
            // collector's log syncs.
            .pragma("secure_delete", "FAST");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}

async fn set_watermark(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    instance: &str,
    consumer: WalConsumer,
    lsn: u64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO wal_watermarks (instance_id, consumer, lsn) VALUES ($1, $2, $3)
         ON CONFLICT (instance_id, consumer) DO UPDATE SET lsn = max(lsn, excluded.lsn)",
    )
    .bind(instance)
    .bind(consumer.as_str())
    .bind(to_i64(lsn))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// What the shared SQL asks of this backend (see `shared`).
impl SqliteCatalog {
    /// Row locks for claims: none, SQLite has one writer at a time.
    const SKIP_LOCKED: &str = "";

    /// The catalog's clock in Unix milliseconds (the fleet's leases are judged by it alone).
    const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

    /// A score's bin of the desk's histogram (5 points wide; 100 is in the last).
    const SCORE_BIN: &str = "min(CAST(human_score_percent / 5 AS INTEGER), 19)";
    /// Index hint for the desk's reads in score order.
    const BY_SCORE: &str = "INDEXED BY reference_summaries_by_score";

    /// Index hints for the shared SQL of a run's plan: SQLite's planner, without statistics,
    /// would take a primary key's `survey_id` prefix and read the whole survey.
    const LIVE_REFERENCES: &str = "INDEXED BY reference_summaries_live";
    const DUE_REFERENCES: &str = "INDEXED BY reference_summaries_due";
    const SESSIONS_BY_REFERENCE: &str = "INDEXED BY sessions_by_reference";

    /// The joins of a run's plan (PostgreSQL's counterparts say why they are spelled out).
    const SESSIONS_OF_REFERENCE: &str = "JOIN sessions s INDEXED BY sessions_by_reference
            ON s.survey_id = r.survey_id AND s.reference = r.reference";
    const TOMBSTONED_LIVE: &str = "tombstones t JOIN reference_summaries r
            ON r.survey_id = t.survey_id AND r.reference = t.reference
        WHERE t.survey_id = $1 AND r.sessions > 0";
    const SCORED_BY_RUN: &str = "session_scores c JOIN reference_summaries r
            ON r.survey_id = c.survey_id AND r.reference = c.reference
        WHERE c.survey_id = $1 AND c.run_id = $2 AND r.sessions > 0";

    /// `IN` a list bound as parameter 2, as [`IN_LIST_3`] for parameter 3.
    const IN_LIST_2: &str = "IN (SELECT value FROM json_each($2))";

    /// `identifier IN` a list bound as parameter 3, for the shared SQL: a JSON array expanded with
    /// `json_each` (see [`bound_list`]).
    const IN_LIST_3: &str = "IN (SELECT value FROM json_each($3))";

    /// A list of strings as one bound parameter (see [`IN_LIST_3`]).
    fn bound_list(values: &[String]) -> String {
        serde_json_array(values)
    }

    /// No statement timeout to lift: SQLite's bound is its busy wait, which a read in WAL
    /// mode never meets (PostgreSQL's counterpart lifts `statement_timeout`).
    async fn allow_bulk_statements(_tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>) -> Result<()> {
        Ok(())
    }

    /// Tombstone ids need no lock here: SQLite commits one writer at a time, so ids become
    /// visible in the order they were drawn (PostgreSQL's counterpart takes an advisory lock).
    async fn lock_tombstone_ids(_tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>) -> Result<()> {
        Ok(())
    }

    async fn insert_tombstoned_identifiers(
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        survey: &SurveyId,
        hashes: &[String],
        now: i64,
    ) -> Result<()> {
        for hash in hashes {
            sqlx::query(
                "INSERT OR IGNORE INTO tombstoned_identifiers (survey_id, identifier_sha256, created_at)
                 VALUES ($1, $2, $3)",
            )
            .bind(survey.as_str())
            .bind(hash)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }
}

crate::shared::impl_organizations!(SqliteCatalog, {
    fn counts_api_requests(&self) -> bool {
        false
    }

    async fn admit_api_request(
        &self,
        key: &KeyPrefix,
        limit: u32,
        window_ms: i64,
    ) -> Result<ApiAdmission> {
        // SQLite has one writer at a time: the count and the insert cannot interleave with
        // another admission once the transaction holds the write lock (`BEGIN IMMEDIATE`
        // semantics come from the DELETE being its first statement).
        let now = now_millis();
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM api_requests WHERE key_prefix = $1 AND accepted_at <= $2")
            .bind(key.as_str())
            .bind(now - window_ms)
            .execute(&mut *tx)
            .await?;
        let (accepted, oldest): (i64, Option<i64>) = sqlx::query_as(
            "SELECT count(*), min(accepted_at) FROM api_requests WHERE key_prefix = $1",
        )
        .bind(key.as_str())
        .fetch_one(&mut *tx)
        .await?;
        let admission = if accepted < i64::from(limit) {
            sqlx::query("INSERT INTO api_requests (key_prefix, accepted_at) VALUES ($1, $2)")
                .bind(key.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            ApiAdmission::Accepted
        } else {
            ApiAdmission::Refused {
                wait_ms: (oldest.unwrap_or(now) + window_ms - now).max(0),
            }
        };
        tx.commit().await?;
        Ok(admission)
    }
});

crate::shared::impl_runs!(SqliteCatalog, {
    async fn record_scores_when(
        &self,
        survey: &SurveyId,
        run: &RunId,
        owner: &str,
        scores: &[NewScore],
        ready: crate::Ready<'_>,
    ) -> Result<bool> {
        // IMMEDIATE: the fence is read and the scores written under the write lock taken at
        // the start. A deferred transaction that reads first fails with SQLITE_BUSY_SNAPSHOT
        // (517, which the busy timeout does not wait out) when another writer commits between
        // its read and its first write; seen here once the flushes stopped writing to the
        // catalog and the statistics applier's commits came closer together.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // The fence: only the run's current owner may publish, so a worker that stalled past
        // its lease cannot overwrite what its successor wrote.
        let owned: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM scoring_runs WHERE id = $1 AND owner = $2 AND status = 'running'",
        )
        .bind(run.as_str())
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        if owned.is_none() {
            return Ok(false);
        }
        // A reference scored twice in one call keeps its last score. In reference order, so
        // that each B-tree (the tables' keys and `reference_summaries`' indexes) is written
        // front to back, in large statements: on a full run's 85,000 scores the record took
        // 4.4 s in the order the run scored them, 55 rows a statement, and 2.1 s so (the
        // statements replayed on this schema; lab notes in the commit).
        let mut last_of: HashMap<&str, &NewScore> = HashMap::with_capacity(scores.len());
        for score in scores {
            last_of.insert(score.reference.as_str(), score);
        }
        let mut scores: Vec<&NewScore> = last_of.into_values().collect();
        scores.sort_unstable_by(|a, b| a.reference.cmp(&b.reference));
        let references: Vec<String> = scores.iter().map(|s| s.reference.clone()).collect();
        let had = Self::stored_cells(&mut tx, survey.as_str(), &references).await?;
        for chunk in scores.chunks(RECORD_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::new(
                "INSERT INTO session_scores (survey_id, reference, human_score_percent, score_band,
                                             scored_at, model_version, run_id) ",
            );
            insert.push_values(chunk, |mut row, score| {
                row.push_bind(survey.as_str())
                    .push_bind(&score.reference)
                    .push_bind(score.human_score_percent)
                    .push_bind(&score.score_band)
                    .push_bind(score.scored_at)
                    .push_bind(&score.model_version)
                    .push_bind(score.run_id.as_str());
            });
            insert.push(
                " ON CONFLICT (survey_id, reference) DO UPDATE SET
                     human_score_percent = excluded.human_score_percent,
                     score_band = excluded.score_band,
                     scored_at = excluded.scored_at,
                     model_version = excluded.model_version,
                     run_id = excluded.run_id",
            );
            insert.build().execute(&mut *tx).await?;
            let mut summaries = QueryBuilder::new(
                "INSERT INTO reference_summaries (survey_id, reference, human_score_percent,
                                                  score_band, scored_at, model_version, reasons,
                                                  cluster_modality, cohort_alike, cohort_cells,
                                                  scored_events) ",
            );
            summaries.push_values(chunk, |mut row, score| {
                row.push_bind(survey.as_str())
                    .push_bind(&score.reference)
                    .push_bind(score.human_score_percent)
                    .push_bind(&score.score_band)
                    .push_bind(score.scored_at)
                    .push_bind(&score.model_version)
                    .push_bind(rows::reasons_json(&score.reasons))
                    .push_bind(score.cluster.map(|(modality, _)| i64::from(modality)))
                    .push_bind(score.cluster.map(|(_, alike)| i64::from(alike)))
                    .push_bind(rows::cohort_cells_json(&score.cohort))
                    .push_bind(to_i64(score.events));
            });
            summaries.push(
                " ON CONFLICT (survey_id, reference) DO UPDATE SET
                     human_score_percent = excluded.human_score_percent,
                     score_band = excluded.score_band,
                     scored_at = excluded.scored_at,
                     model_version = excluded.model_version,
                     reasons = excluded.reasons,
                     cluster_modality = excluded.cluster_modality,
                     cohort_alike = excluded.cohort_alike,
                     cohort_cells = excluded.cohort_cells,
                     scored_events = excluded.scored_events",
            );
            summaries.build().execute(&mut *tx).await?;
        }
        Self::replace_cohort_points(&mut tx, survey.as_str(), &scores, &had).await?;
        if !ready.await {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }
});

crate::shared::impl_deletions!(SqliteCatalog, {
    async fn set_back_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
        owner: &str,
        setback: &DeletionSetback,
    ) -> Result<Option<SessionDeletion>> {
        let now = now_millis();
        let query = match setback {
            DeletionSetback::Failed {
                error,
                retry_at,
                max_attempts,
            } => sqlx::query(
                "UPDATE session_deletions SET
                     attempts = attempts + 1,
                     status = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE 'pending' END,
                     error = $2, next_attempt_at = $3, updated_at = $4,
                     owner = NULL, lease_until = NULL, waiting_on = NULL, wait_reason = NULL
                 WHERE survey_id = $5 AND reference = $6 AND status = 'pending' AND owner = $7",
            )
            .bind(i64::from(*max_attempts))
            .bind(error)
            .bind(retry_at)
            .bind(now)
            .bind(survey.as_str())
            .bind(reference)
            .bind(owner),
            DeletionSetback::Deferred {
                retry_at,
                waiting_on,
                reason,
            } => sqlx::query(
                "UPDATE session_deletions SET
                     next_attempt_at = $1, owner = NULL, lease_until = NULL,
                     waiting_on = $5, wait_reason = $6
                 WHERE survey_id = $2 AND reference = $3 AND status = 'pending' AND owner = $4",
            )
            .bind(retry_at)
            .bind(survey.as_str())
            .bind(reference)
            .bind(owner)
            .bind(waiting_on.as_deref())
            .bind(reason.as_str()),
        };
        let changed = query.execute(&self.pool).await?.rows_affected();
        if changed == 0 {
            return Ok(None);
        }
        self.session_deletion(survey, reference).await
    }

    async fn erase_session_rows(&self, erasure: &SessionErasure) -> Result<()> {
        let mut connection = self.pool.acquire().await?;
        // Deleted rows are overwritten with zeros, freed pages too, not left in free space.
        // Only on this connection and for this transaction (every other is `FAST`, which
        // leaves freed pages as they were): on for every connection, the extra writes of the
        // statistics commits made the collector's log syncs stall (benches/README.md,
        // `collector_load`, has the open-loop p99 it cost).
        sqlx::query("PRAGMA secure_delete = ON")
            .execute(&mut *connection)
            .await?;
        let erased = erase_on(&mut connection, erasure).await;
        let reset = sqlx::query("PRAGMA secure_delete = FAST")
            .execute(&mut *connection)
            .await;
        erased?;
        if let Err(error) = reset {
            // Harmless beyond extra writes; the pool will reuse the connection as it is.
            tracing::warn!(%error, "could not set secure_delete back to FAST");
        }
        Ok(())
    }
});

crate::shared::impl_desk!(SqliteCatalog);

/// [`Deletions::erase_session_rows`](crate::Deletions::erase_session_rows) on one connection, in one transaction.
async fn erase_on(connection: &mut sqlx::SqliteConnection, erasure: &SessionErasure) -> Result<()> {
    // IMMEDIATE: it reads the linked references before its first write (see
    // `apply_session_stats`).
    let mut tx = sqlx::Connection::begin_with(&mut *connection, "BEGIN IMMEDIATE").await?;
    crate::shared::erase_session_rows_in!(SqliteCatalog, tx, erasure);
    tx.commit().await?;
    Ok(())
}

/// A JSON array of strings, bound as one parameter and expanded with `json_each`, so a list of
/// any length is one statement with two parameters.
fn serde_json_array(values: &[String]) -> String {
    let mut out = String::with_capacity(values.len() * 40 + 2);
    out.push('[');
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push('"');
        for ch in value.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push(']');
    out
}
