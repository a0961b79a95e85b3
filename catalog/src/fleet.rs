//! The fleet role: the instances sharing the catalog, how each joins and is fenced off, the
//! flushes a run asks of them, the work they split (compaction claims), and the backend's own
//! upkeep.
//!
//! **Epochs and fencing.** An instance joins the fleet at start ([`Fleet::join_fleet`]) and is
//! handed a new epoch; every write its log makes (statistics here, flushes in the lake) carries
//! it. An erasure that finds an instance not seen within its lease, by this catalog's clock,
//! fences that epoch ([`Fleet::fence_instance`]) instead of waiting for it: from then on the
//! catalog refuses the epoch's writes ([`crate::Error::Fenced`]) and the instance, should it
//! come back, joins again under a new epoch, after loading every tombstone. Leases are judged
//! by the catalog's clock alone, never an instance's.

use async_trait::async_trait;

use crate::Result;
use crate::ids::SurveyId;
use crate::model::CompactionClaim;

/// A member of the fleet that has not yet purged its log of a deleted session, as an erasure
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetMember {
    pub instance: String,
    /// Its current epoch.
    pub epoch: i64,
    /// Seen within the lease, by the catalog's clock.
    pub live: bool,
    /// Its current epoch is fenced off (it stopped, or an erasure fenced it).
    pub fenced: bool,
    /// The fence of its current epoch is committed to the lake too.
    pub lake_fenced: bool,
    /// Why its last purge failed, when it did.
    pub purge_error: Option<String>,
    /// Milliseconds since it last reported, by the catalog's clock.
    pub silent_ms: i64,
}

/// A flush a run asked of the fleet ([`Fleet::request_fleet_flush`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushRequest {
    /// The request's time on the catalog's clock: an instance that answered made everything it
    /// acknowledged before it visible.
    pub token: i64,
    /// The live instances asked (every live one but the requester).
    pub asked: Vec<String>,
}

/// The instances sharing the catalog, the work they split (compaction claims), and the
/// backend's own upkeep (readiness, scrubbing, checkpoints).
///
/// Every method is one transaction: callers never see a half-applied change.
#[async_trait]
pub trait Fleet: Send + Sync {
    /// One round trip to the database (`SELECT 1`), for readiness checks.
    async fn ping(&self) -> Result<()>;

    /// Joins `instance` to the fleet under a new epoch, above any it held or was fenced at, and
    /// records it as seen now; returns the epoch.
    async fn join_fleet(&self, instance: &str) -> Result<i64>;

    /// Records that `instance` is alive now (the catalog's clock), that it has purged its log
    /// after loading every tombstone up to id `purged_through` (never lowered), and why its last
    /// purge failed (`None`: it did not). [`crate::Error::Fenced`] when `epoch` is fenced off.
    async fn report_instance(
        &self,
        instance: &str,
        epoch: i64,
        purged_through: i64,
        purge_error: Option<&str>,
    ) -> Result<()>;

    /// `instance` stopped cleanly at `epoch` (its log flushed): it fences itself, so that no
    /// erasure waits out its lease or commits a fence for it.
    async fn leave_fleet(&self, instance: &str, epoch: i64) -> Result<()>;

    /// Ok while `instance`'s `epoch` is not fenced off; [`crate::Error::Fenced`] once it is. A
    /// flush asks this after reading the lake's newest version and before committing the next.
    async fn check_epoch(&self, instance: &str, epoch: i64) -> Result<()>;

    /// The instances that have not purged their log since loading the reference's tombstone,
    /// with what the erasure of that session needs to know of each (`lease_ms` decides which
    /// are live).
    async fn fleet_blockers(
        &self,
        survey: &SurveyId,
        reference: &str,
        lease_ms: i64,
    ) -> Result<Vec<FleetMember>>;

    /// Fences `instance`'s `epoch` off if it is still its epoch and the instance has still not
    /// been seen within `lease_ms`; returns whether the epoch is fenced now.
    async fn fence_instance(&self, instance: &str, epoch: i64, lease_ms: i64) -> Result<bool>;

    /// The fence of `instance`'s `epoch` is committed to the lake.
    async fn mark_lake_fenced(&self, instance: &str, epoch: i64) -> Result<()>;

    /// Asks every live instance but `requester` to make what it acknowledged visible.
    async fn request_fleet_flush(&self, requester: &str, lease_ms: i64) -> Result<FlushRequest>;

    /// Of the live instances, those that have not answered the request `token` yet.
    async fn fleet_flush_pending(&self, token: i64, lease_ms: i64) -> Result<Vec<String>>;

    /// The latest flush asked of `instance` (0 if none), and whether it has answered it.
    async fn flush_wanted(&self, instance: &str) -> Result<(i64, bool)>;

    /// `instance` made everything it acknowledged before `token` visible.
    async fn flush_answered(&self, instance: &str, epoch: i64, token: i64) -> Result<()>;

    /// The fleet's value `name`: the one stored, or `candidate`, stored now, when none was (the
    /// first instance to ask makes it; every other reads it).
    async fn fleet_value(&self, name: &str, candidate: &str) -> Result<String>;

    /// The fleet's value `name`, if one is stored; changes nothing (a catalog opened read-only).
    async fn stored_fleet_value(&self, name: &str) -> Result<Option<String>>;

    /// Replaces the fleet's value `name` (a restored catalog's new identity).
    async fn replace_fleet_value(&self, name: &str, value: &str) -> Result<()>;

    /// Every instance the catalog knows, as [`Fleet::fleet_blockers`] describes them, with
    /// whether each left cleanly at its current epoch (its log flushed).
    async fn fleet_members(&self, lease_ms: i64) -> Result<Vec<(FleetMember, bool)>>;

    /// Takes the compaction of one partition (a survey's events files of one date, `""` for
    /// none) for `owner` for `lease_ms`, unless another worker holds it. Instances sharing a
    /// catalog then split compaction work instead of racing for the same files (the file swap
    /// would let only one of them commit anyway).
    async fn claim_compaction(
        &self,
        survey: &SurveyId,
        partition: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<CompactionClaim>;

    /// Gives a partition's compaction claim back once `owner` is done with it (or for a worker
    /// known to be dead).
    async fn release_compaction(
        &self,
        survey: &SurveyId,
        partition: &str,
        owner: &str,
    ) -> Result<()>;

    /// Makes deleted rows unrecoverable from the catalog's own files (for SQLite: deleted
    /// content is zeroed on delete, and this empties its write-ahead log).
    async fn scrub(&self) -> Result<()>;

    /// Writes a consistent copy of the whole catalog, as of one moment, to a new file at `path`
    /// while it is in use, and answers true (SQLite: `VACUUM INTO`); a backend that another
    /// tool copies (PostgreSQL: `pg_dump`, which `telltale backup` runs) answers false.
    async fn copy_into(&self, path: &std::path::Path) -> Result<bool>;

    /// Folds the backend's own log into its main storage after a burst of writes, if nothing
    /// prevents it right now; returns whether it did (for SQLite: a `TRUNCATE` checkpoint, so
    /// reads stop going through the write-ahead log, see `SqliteCatalog::checkpoint`; for
    /// PostgreSQL: a vacuum of the tables a run writes, see `PgCatalog::checkpoint`).
    async fn checkpoint(&self) -> Result<bool>;
}
