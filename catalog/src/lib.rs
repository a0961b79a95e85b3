//! The catalog: Telltale's system of record.
//!
//! It records organizations, integration keys (as hashes), surveys, per-identifier session
//! statistics, write-ahead-log watermarks, scores for lookup, scoring runs,
//! deletions and tombstones. It knows nothing of Parquet or HTTP.
//!
//! Callers hold an `Arc<dyn Catalog>`; [`SqliteCatalog`] is the embedded default and
//! [`PgCatalog`] serves a fleet of instances sharing one PostgreSQL database.
//!
//! - [`ids`]: identifier newtypes and their formats.
//! - [`keys`]: integration key generation, parsing and hashing.
//! - [`model`]: the records the catalog stores and returns.
//! - [`sqlite`]: the SQLite backend and its migrations.
//! - [`postgres`]: the PostgreSQL backend (many instances, one catalog) and its migrations.
//! - `shared`: the methods whose SQL is the same in both dialects, written once.
//! - `rows`: reading records out of either backend's rows.

mod fleet;
pub mod ids;
pub mod keys;
pub mod model;
pub mod postgres;
mod rows;
mod shared;
pub mod sqlite;

use async_trait::async_trait;

/// What a gated write waits for before it commits (`Runs::record_scores_when`): true to commit.
pub type Ready<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>>;

pub use fleet::{Fleet, FleetMember, FlushRequest};
pub use ids::{OrganizationId, RunId, SurveyId, TrackingKey};
pub use keys::{IntegrationKeySecret, KeyPrefix, Scope};
pub use model::*;
pub use postgres::PgCatalog;
pub use sqlite::SqliteCatalog;

/// Errors raised by a catalog backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("catalog database error: {0}")]
    Database(#[from] sqlx::Error),

    #[error("catalog migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),

    /// The catalog holds a migration this release does not know: a newer release migrated it.
    /// CHANGELOG.md promises no downgrade over a migration, so the binary stops rather than
    /// read a schema it does not know.
    #[error(
        "the catalog was migrated by a newer release of Telltale (its migration {applied}; this \
         release knows migrations up to {known}): run that release, or restore the backup taken \
         before the upgrade (CHANGELOG.md)"
    )]
    NewerCatalog { applied: i64, known: i64 },

    #[error("organization {0} does not exist")]
    OrganizationNotFound(String),

    #[error("unsupported catalog url {0:?}")]
    UnsupportedUrl(String),

    #[error("corrupt catalog row: {0}")]
    Corrupt(String),

    /// A write of an instance's epoch the fleet has fenced off (an erasure went ahead without
    /// the instance): the instance must join again, under a new epoch, before it writes.
    #[error("instance {instance} was fenced off at epoch {epoch}: it joins the fleet again")]
    Fenced { instance: String, epoch: i64 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Applies `migrator`'s pending migrations to `pool`; a catalog that holds one it does not know
/// is [`Error::NewerCatalog`].
pub(crate) async fn migrate<'a, A>(migrator: &sqlx::migrate::Migrator, pool: A) -> Result<()>
where
    A: sqlx::Acquire<'a>,
    <A::Connection as std::ops::Deref>::Target: sqlx::migrate::Migrate,
{
    match migrator.run(pool).await {
        Ok(()) => Ok(()),
        Err(sqlx::migrate::MigrateError::VersionMissing(applied)) => Err(Error::NewerCatalog {
            applied,
            known: migrator
                .iter()
                .map(|migration| migration.version)
                .max()
                .unwrap_or(0),
        }),
        Err(error) => Err(Error::Migration(error)),
    }
}

/// Organizations, their integration keys (stored as hashes) and the per-key request limit.
///
/// Every method is one transaction: callers never see a half-applied change.
#[async_trait]
pub trait Organizations: Send + Sync {
    async fn create_organization(&self, name: &str) -> Result<Organization>;

    /// Soft-deletes an organization; its keys stop authorizing anything. Returns false when the
    /// organization does not exist or is already deleted.
    async fn delete_organization(&self, id: &OrganizationId) -> Result<bool>;

    async fn count_organizations(&self) -> Result<u64>;

    /// Organizations that are not deleted, oldest first.
    async fn list_organizations(&self) -> Result<Vec<Organization>>;

    /// Creates a key; the returned secret is the only time it is ever available.
    async fn create_key(
        &self,
        organization: &OrganizationId,
        label: &str,
        scopes: &[Scope],
    ) -> Result<CreatedKey>;

    async fn list_keys(&self, organization: &OrganizationId) -> Result<Vec<KeyInfo>>;

    /// The key of this prefix, revoked or not, and whether its organization was deleted: what a
    /// signed link made with the key checks each time it is opened.
    async fn key_standing(&self, prefix: &KeyPrefix) -> Result<Option<KeyStanding>>;

    /// Returns false when no unrevoked key has this prefix.
    async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool>;

    /// Whether the integration API's per-key limit is counted in this catalog, because any
    /// number of instances may share it (PostgreSQL). When false (SQLite: one machine), the
    /// server counts in process and never calls [`Organizations::admit_api_request`], sparing a
    /// durable write per request.
    fn counts_api_requests(&self) -> bool;

    /// Accepts one request of `key` if fewer than `limit` were accepted in the `window_ms`
    /// before it, counting every instance's requests; refused requests are not counted.
    async fn admit_api_request(
        &self,
        key: &KeyPrefix,
        limit: u32,
        window_ms: i64,
    ) -> Result<ApiAdmission>;

    /// Resolves a well-formed presented secret to its key and organization. `None` for an
    /// unknown or revoked key or a wrong secret.
    async fn authenticate(&self, secret: &IntegrationKeySecret)
    -> Result<Option<AuthenticatedKey>>;

    /// [`Organizations::authenticate`], then [`Organizations::admit_api_request`] for the key
    /// it resolves (a wrong secret or a revoked key is never counted). A backend that counts
    /// requests answers both in one round trip: every integration request pays for it.
    async fn authenticate_and_admit(
        &self,
        secret: &IntegrationKeySecret,
        limit: u32,
        window_ms: i64,
    ) -> Result<Option<(AuthenticatedKey, ApiAdmission)>> {
        let Some(key) = self.authenticate(secret).await? else {
            return Ok(None);
        };
        let admission = self
            .admit_api_request(&key.key.prefix, limit, window_ms)
            .await?;
        Ok(Some((key, admission)))
    }
}

/// Surveys, the sessions the collector saw in them (per-identifier statistics, the log
/// consumers' watermarks) and the reads by reference.
///
/// Every method is one transaction: callers never see a half-applied change.
#[async_trait]
pub trait Surveys: Send + Sync {
    /// Creates the survey or renames it; the survey id and tracking key never change.
    async fn provision_survey(
        &self,
        organization: &OrganizationId,
        external_survey_id: &str,
        name: &str,
    ) -> Result<Survey>;

    async fn survey(&self, organization: &OrganizationId, id: &SurveyId) -> Result<Option<Survey>>;

    /// A survey by id, whatever its organization (for the operator's command line).
    async fn survey_by_id(&self, id: &SurveyId) -> Result<Option<Survey>>;

    async fn survey_by_tracking_key(&self, tracking_key: &TrackingKey) -> Result<Option<SurveyId>>;

    /// The last log sequence number `consumer` of `instance` has durably applied (0 if none).
    async fn wal_watermark(&self, instance: &str, consumer: WalConsumer) -> Result<u64>;

    /// Applies session statistics and advances the `stats` watermark to `through_lsn`, atomically,
    /// unless the fleet fenced `instance`'s `epoch` off ([`Error::Fenced`], nothing written).
    async fn apply_session_stats(
        &self,
        instance: &str,
        epoch: i64,
        through_lsn: u64,
        deltas: &[SessionDelta],
    ) -> Result<()>;

    /// One summary per reference that has a captured session or a score (in no given order).
    async fn lookup_sessions(
        &self,
        survey: &SurveyId,
        references: &[String],
    ) -> Result<Vec<SessionSummary>>;

    /// The reference linked to each identifier, for identifiers that have one.
    async fn session_references(
        &self,
        survey: &SurveyId,
        identifiers: &[String],
    ) -> Result<Vec<(String, String)>>;

    /// Every identifier linked to the reference in the survey.
    async fn reference_identifiers(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<Vec<String>>;
}

/// Scoring runs: starting, claiming and fencing them, their progress, and the scores they record.
///
/// Every method is one transaction: callers never see a half-applied change.
#[async_trait]
pub trait Runs: Send + Sync {
    /// Starts a run unless one is active for the survey. Returns the new run and `true`, or the
    /// active run and `false`. The catalog enforces one active run per survey, so concurrent
    /// starts (on any number of instances) create one run.
    async fn start_scoring_run(&self, survey: &SurveyId, force: bool)
    -> Result<(ScoringRun, bool)>;

    async fn scoring_run(&self, survey: &SurveyId, id: &RunId) -> Result<Option<ScoringRun>>;

    /// Records a cancel request on a running run (the first request wins); a run that is no
    /// longer running is returned unchanged. `None` when the run does not exist for the survey.
    async fn request_run_cancel(
        &self,
        survey: &SurveyId,
        id: &RunId,
        requested_by: &str,
    ) -> Result<Option<ScoringRun>>;

    /// Running runs that `owner` may take: unowned, its own, or with an expired lease.
    async fn claimable_scoring_runs(&self, owner: &str) -> Result<Vec<ScoringRun>>;

    /// Takes a running run for `owner` for `lease_ms`, if it is claimable. A worker calls this
    /// before it starts working on a run.
    async fn claim_scoring_run(
        &self,
        id: &RunId,
        owner: &str,
        lease_ms: i64,
    ) -> Result<Option<ScoringRun>>;

    /// Stores a run's counters and renews the lease, fenced by `owner`.
    async fn report_run_progress(
        &self,
        id: &RunId,
        owner: &str,
        lease_ms: i64,
        progress: &RunProgress,
    ) -> Result<RunControl>;

    /// Ends a run with its final counters, fenced by `owner`. Returns false when the worker had
    /// lost the run (nothing is written then).
    async fn finish_scoring_run(
        &self,
        id: &RunId,
        owner: &str,
        progress: &RunProgress,
        outcome: &RunOutcome,
    ) -> Result<bool>;

    /// Every browser session of a survey, with the reference it is linked to.
    async fn survey_sessions(&self, survey: &SurveyId) -> Result<Vec<SessionIdentity>>;

    /// Every reference of the survey that has a score, with the run that wrote it.
    async fn scored_references(&self, survey: &SurveyId) -> Result<Vec<ScoredReference>>;

    /// What a run that is not forced plans from: the survey's counts and the browser sessions
    /// of the references without a score (tombstoned ones left out), read from an index of
    /// the unscored references rather than the whole survey.
    async fn unscored_sessions(&self, survey: &SurveyId, run: &RunId) -> Result<UnscoredSessions>;

    /// The browser sessions linked to `references` (a run scoring them again), tombstoned
    /// references left out.
    async fn reference_sessions(
        &self,
        survey: &SurveyId,
        references: &[String],
    ) -> Result<Vec<SessionIdentity>>;

    /// The references whose latest score `run` wrote.
    async fn run_references(&self, survey: &SurveyId, run: &RunId) -> Result<Vec<String>>;

    /// Records scores as the latest of their sessions, with their cohort points (replacing the
    /// ones they had, the survey's bins moved with them), in one transaction, fenced by the run's
    /// owner. Returns false (and writes nothing) when the worker had lost the run.
    async fn record_scores(
        &self,
        survey: &SurveyId,
        run: &RunId,
        owner: &str,
        scores: &[NewScore],
    ) -> Result<bool> {
        let ready: Ready<'_> = Box::pin(std::future::ready(true));
        self.record_scores_when(survey, run, owner, scores, ready)
            .await
    }

    /// `record_scores`, committed only once `ready` yields true: the rows are written in the
    /// transaction while the caller does what must land first (a scoring run's lake files), and
    /// the transaction is rolled back, returning false, when `ready` yields false. The
    /// transaction holds the catalog's write lock (SQLite) or the run's row (PostgreSQL) while it
    /// waits, so `ready` must not wait on the catalog.
    async fn record_scores_when(
        &self,
        survey: &SurveyId,
        run: &RunId,
        owner: &str,
        scores: &[NewScore],
        ready: Ready<'_>,
    ) -> Result<bool>;

    /// The survey's cohort spread: every non-empty bin of the places of its scored sessions
    /// (`record_scores` keeps them with the points).
    async fn cohort_bins(&self, survey: &SurveyId) -> Result<Vec<CohortBin>>;

    /// The survey's stored cohort points that `probes` find: those of the probe's modality
    /// and mask whose cell is in its range. One indexed range read a probe.
    async fn probe_cohort(
        &self,
        survey: &SurveyId,
        probes: &[CohortProbe],
    ) -> Result<Vec<StoredCohortPoint>>;

    /// The survey's active scoring run, if it has one.
    async fn active_scoring_run(&self, survey: &SurveyId) -> Result<Option<RunId>>;

    /// Counts a pause of `owner`'s run on a store that answered its probes (a read that timed
    /// out while the stores were up); returns the run's pauses so far, `None` when `owner` no
    /// longer holds it.
    async fn note_run_pause(&self, id: &RunId, owner: &str) -> Result<Option<u32>>;
}

/// Session deletions, their claims, and the tombstones that keep an erased session erased.
///
/// Every method is one transaction: callers never see a half-applied change.
#[async_trait]
pub trait Deletions: Send + Sync {
    /// Tombstones with an id above `after`, oldest first.
    async fn tombstones_after(&self, after: i64) -> Result<Vec<Tombstone>>;

    /// Sets every deletion, whatever its status, back to `pending` with its attempts reset, so
    /// that the erasure worker erases each session again; answers how many. A restored
    /// deployment does this: its lake and log were copied at other moments than its catalog, and
    /// may hold rows of a session its catalog says was erased.
    async fn redo_deletions(&self) -> Result<u64>;

    /// Tombstones the reference and records a pending deletion, in one transaction, or returns
    /// the deletion that exists. A `failed` deletion requested again starts over as `pending`
    /// with its attempts reset.
    async fn request_session_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<SessionDeletion>;

    async fn session_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<Option<SessionDeletion>>;

    /// Pending deletions due at `now` that `owner` may take: unowned, its own, or with an
    /// expired lease; oldest first.
    async fn claimable_deletions(&self, owner: &str, now: i64) -> Result<Vec<SessionDeletion>>;

    /// Takes a pending deletion for `owner` for `lease_ms`, if it is claimable.
    async fn claim_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<bool>;

    /// Ends an attempt that did not complete and releases the lease, fenced by `owner`.
    async fn set_back_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
        owner: &str,
        setback: &DeletionSetback,
    ) -> Result<Option<SessionDeletion>>;

    /// Marks the deletion completed (counting the attempt), fenced by `owner`.
    async fn complete_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
        owner: &str,
    ) -> Result<bool>;

    /// Adds identifiers to the tombstone (hashes, see [`TombstonedIdentifier`]).
    async fn tombstone_identifiers(&self, survey: &SurveyId, hashes: &[String]) -> Result<()>;

    /// Tombstoned identifiers with an id above `after`, oldest first.
    async fn tombstoned_identifiers_after(&self, after: i64) -> Result<Vec<TombstonedIdentifier>>;

    /// Deletes a session's rows (the statistics of its identifiers, its score) and adds its
    /// identifiers to the tombstone (as hashes), in one transaction. Repeatable.
    async fn erase_session_rows(&self, erasure: &SessionErasure) -> Result<()>;
}

/// A survey's review desk: its scored sessions counted, listed and grouped. Tombstoned
/// references are left out from the moment their deletion is requested.
#[async_trait]
pub trait Desk: Send + Sync {
    /// Scored references per band and per score bin, and captured references with no score.
    /// Reads the survey's entries of one index, not its rows.
    async fn desk_counts(&self, survey: &SurveyId) -> Result<DeskCounts>;

    /// One page of scored references in score order (ties by reference), after the query's
    /// keyset; at most `limit` (1 to 1000) rows.
    async fn desk_page(&self, survey: &SurveyId, query: &DeskQuery) -> Result<Vec<DeskRow>>;

    /// The places of the references a run found in a cluster, each in the modality it
    /// clustered in.
    async fn clustered_places(&self, survey: &SurveyId) -> Result<Vec<ClusteredPlace>>;

    /// The survey's most recently started scoring run.
    async fn latest_scoring_run(&self, survey: &SurveyId) -> Result<Option<ScoringRun>>;

    /// The survey's runs (started and ended) and erased references counted: whether anything a
    /// desk drew from has changed.
    async fn desk_version(&self, survey: &SurveyId) -> Result<DeskVersion>;
}

/// Everything the rest of Telltale asks of its system of record, one role trait at a time:
/// [`Organizations`], [`Surveys`], [`Runs`], [`Deletions`], [`Fleet`] and [`Desk`]. Both backends
/// implement every role. Callers hold an `Arc<dyn Catalog>`, on which every role's methods can
/// be called; code that names a backend brings the roles into scope with
/// `use catalog::prelude::*`.
pub trait Catalog:
    Organizations + Surveys + Runs + Deletions + Fleet + Desk + std::fmt::Debug + 'static
{
}

impl<T> Catalog for T where
    T: Organizations + Surveys + Runs + Deletions + Fleet + Desk + std::fmt::Debug + 'static
{
}

/// The catalog trait and its roles, for callers of its methods.
pub mod prelude {
    pub use crate::{Catalog, Deletions, Desk, Fleet, Organizations, Runs, Surveys};
}

/// Opens the catalog a URL names: `sqlite://PATH` (created when missing) or
/// `postgres://...`/`postgresql://...` (the database must exist; its tables are created).
pub async fn open(url: &str) -> Result<std::sync::Arc<dyn Catalog>> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let catalog = SqliteCatalog::open(std::path::Path::new(path)).await?;
        return Ok(std::sync::Arc::new(catalog));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(std::sync::Arc::new(PgCatalog::open(url).await?));
    }
    Err(Error::UnsupportedUrl(url.to_owned()))
}

/// Opens the catalog at `url` to read it, changing nothing: no migration, no database made.
pub async fn open_read_only(url: &str) -> Result<std::sync::Arc<dyn Catalog>> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let catalog = SqliteCatalog::open_read_only(std::path::Path::new(path)).await?;
        return Ok(std::sync::Arc::new(catalog));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(std::sync::Arc::new(PgCatalog::open_read_only(url).await?));
    }
    Err(Error::UnsupportedUrl(url.to_owned()))
}

/// Milliseconds since the Unix epoch, the catalog's time unit.
pub fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
