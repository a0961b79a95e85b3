//! A consistent copy of one instance's deployment (catalog, lake, write-ahead log), taken while
//! it serves, and its restore into empty stores. Each crate copies its own part: the log its
//! segments under a hold (`ingest::wal`), the lake each table as of one version in bounded
//! memory (`lake::backup`), the catalog its own snapshot (`VACUUM INTO`, or `pg_dump`).
//!
//! The order is what makes the copy consistent (docs/backup.md):
//!
//! 1. The log is held: from here on no segment is retired.
//! 2. The `events` table, as of one version. Every record it lacks is still in the log.
//! 3. The catalog, as of one moment.
//! 4. The `features` and `scores` tables, each as of one version, after the catalog: a scoring
//!    run's files committed after the catalog's copy belong to a run the copy records as running,
//!    which the restored instance resumes and whose unrecorded files it takes back; no copied
//!    score is one the copied catalog cannot explain.
//! 5. The log's segments and the instance's files (its id, the review secret).
//!
//! A backup refuses to run without the log its data dir should hold, unless told the log is
//! empty on purpose (a drained instance): every batch acknowledged and not yet flushed lives only
//! there. A restore refuses to run without a source of the deletions requested since the
//! backup, unless told there is none: an erased session must never come back silently.

use std::path::{Path, PathBuf};

use lake::backup::TableCopy;
use lake::{Store, TableKind};
use serde::{Deserialize, Serialize};

use crate::data_dir::sync_dir;
use crate::{Settings, Stores};

mod tools;

use tools::{copy_durably, postgres_tool, run, sync_file};

/// The manifest a backup writes last: a folder without it is not a finished backup.
pub const MANIFEST: &str = "backup.json";
/// The manifest's format. 1: the untyped manifest of 0.1.0 (no `format` field), read as if it
/// held its log; 2: typed, with the log's state and the order of the copies; 3: with the
/// identity of the catalog it was taken from.
pub const FORMAT: u32 = 3;

/// The fleet value naming a catalog (`catalog::Fleet::fleet_value`).
const CATALOG_IDENTITY: &str = "catalog-identity";

/// How long a backup without a log waits for the running instances to flush.
const FLEET_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The catalog a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    /// `catalog.db`, a copy made by SQLite's `VACUUM INTO`.
    Sqlite,
    /// `catalog.dump`, `pg_dump --format=custom`.
    Postgres,
}

/// What the backup holds of the instance's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum LogCopy {
    /// Its segments, copied under the hold.
    #[default]
    Held,
    /// None: the operator said the log was empty (a drained instance).
    Omitted,
}

/// The backup's manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    #[serde(default = "format_one")]
    pub format: u32,
    pub telltale: String,
    pub commit: String,
    pub started_at: String,
    pub finished_at: String,
    pub catalog: CatalogKind,
    pub tables: Vec<TableCopy>,
    pub log_segments: usize,
    #[serde(default)]
    pub log: LogCopy,
    /// The identity of the catalog the backup was taken from (format 3): a restore checks its
    /// source of tombstones is that catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_identity: Option<String>,
}

fn format_one() -> u32 {
    1
}

/// Why a backup or a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0} is not empty: a backup goes into a new folder")]
    NotEmpty(PathBuf),
    #[error(
        "no write-ahead log at {0}: every batch acknowledged and not yet flushed lives only there, \
         so a backup without it would lose them; run the backup on the instance's data dir, or \
         say the log is empty on purpose (--without-log, after `telltale drain`)"
    )]
    NoLog(PathBuf),
    #[error("{0} has no {MANIFEST}: not a finished backup")]
    Unfinished(PathBuf),
    #[error(
        "the backup's manifest is in format {found}, written by a newer release of Telltale (this \
         release reads formats up to {FORMAT}): restore it with that release"
    )]
    NewerFormat { found: u32 },
    #[error("the backup's manifest does not read: {0}")]
    Manifest(#[source] serde_json::Error),
    #[error(
        "no source of the deletions requested since the backup: restore with --tombstones-from \
         (the catalog the backup was taken from), or say there is none (--without-tombstones)"
    )]
    NoTombstoneSource,
    #[error(
        "{url} is not the catalog this backup was taken from (its identity is {found}, the \
         backup's {expected}): its tombstones are another deployment's; name the catalog the \
         backup was taken from, or say there is none (--without-tombstones)"
    )]
    WrongTombstoneSource {
        url: String,
        expected: String,
        found: String,
    },
    #[error(
        "the identity of {url} does not read ({source}): nothing was restored; name the \
         catalog this backup was taken from once it answers"
    )]
    TombstoneSourceUnreadable {
        url: String,
        #[source]
        source: catalog::Error,
    },
    #[error(
        "a backup without a log needs every instance's log to be in the lake: {0}; back up on \
         the instance's data dir (its log is copied), or stop it and `telltale drain` it first"
    )]
    LogNotDrained(String),
    #[error("{0} already holds a write-ahead log: restore into a new data dir")]
    LogExists(PathBuf),
    #[error("the lake at {0} is not empty: restore into a new one")]
    LakeNotEmpty(String),
    #[error("{0} exists: restore into a new catalog")]
    CatalogExists(PathBuf),
    #[error(
        "the backup's catalog is {kind:?}; this deployment's is {url}: a backup restores into \
         the same kind of catalog"
    )]
    CatalogKindMismatch { kind: CatalogKind, url: String },
    #[error("{program} failed: {detail}")]
    Tool { program: String, detail: String },
    #[error(transparent)]
    Open(#[from] crate::OpenError),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error(transparent)]
    Wal(#[from] ingest::wal::WalError),
    #[error("i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("background task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_owned(),
        source,
    }
}

/// How a backup treats the instance's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// The log must be there (the default).
    Required,
    /// The operator says the log is empty on purpose: the backup proceeds without it.
    Omit,
}

/// Takes a backup of the deployment `settings` names into `to` (new, or empty). Without a log
/// (`LogMode::Omit`), every instance's log must be in the lake: a running one (seen within
/// `instance_lease`) is asked to flush and must answer, and every other must have left the
/// fleet cleanly, its log flushed.
pub async fn backup(
    settings: &Settings,
    to: &Path,
    log: LogMode,
    instance_lease: std::time::Duration,
) -> Result<Manifest, BackupError> {
    if to.exists() && std::fs::read_dir(to).map_err(io(to))?.next().is_some() {
        return Err(BackupError::NotEmpty(to.to_owned()));
    }
    let wal_dir = settings.data_dir.wal();
    let held = match log {
        LogMode::Required if !wal_dir.is_dir() => return Err(BackupError::NoLog(wal_dir)),
        LogMode::Required => true,
        LogMode::Omit => false,
    };
    std::fs::create_dir_all(to).map_err(io(to))?;
    let started = chrono_now();
    let stores = Stores::open(settings).await?;
    if !held {
        logs_are_in_the_lake(&stores, instance_lease).await?;
    }
    let catalog_identity = stores
        .catalog
        .fleet_value(CATALOG_IDENTITY, &new_identity())
        .await?;

    // 1. Hold the log: from here on, no segment is retired.
    let hold = if held {
        let dir = wal_dir.clone();
        Some(tokio::task::spawn_blocking(move || ingest::wal::hold_for_backup(&dir)).await??)
    } else {
        None
    };

    // 2. The events table, as of one version.
    let target = Store::open(&to.join("lake").display().to_string(), &[])?;
    let mut tables = vec![
        stores
            .lake
            .copy_table_to(TableKind::Events, &target)
            .await?,
    ];

    // 3. The catalog, as of one moment.
    let catalog = copy_catalog(&stores, &settings.catalog_url, to).await?;
    // A pause point for the restore test, which requests an erasure here (`FAILPOINTS=
    // telltale-backup-after-catalog=sleep(MS)`; compiled in with `failpoints` only).
    fail::fail_point!("telltale-backup-after-catalog");

    // 4. The results tables, after the catalog.
    for kind in [TableKind::Features, TableKind::Scores] {
        tables.push(stores.lake.copy_table_to(kind, &target).await?);
    }

    // 5. The log's segments and the instance's files.
    let mut log_segments = 0;
    if let Some(hold) = &hold {
        let copy = to.join("wal");
        log_segments = hold.copy_segments_to(&copy)?;
    }
    for source in settings.data_dir.kept_files() {
        if let Some(name) = source.file_name()
            && source.exists()
        {
            copy_durably(&source, &to.join(name))?;
        }
    }
    drop(hold);

    let manifest = Manifest {
        format: FORMAT,
        telltale: env!("CARGO_PKG_VERSION").to_owned(),
        commit: option_env!("TELLTALE_COMMIT")
            .unwrap_or("unknown")
            .to_owned(),
        started_at: started,
        finished_at: chrono_now(),
        catalog,
        tables,
        log_segments,
        log: if held {
            LogCopy::Held
        } else {
            LogCopy::Omitted
        },
        catalog_identity: Some(catalog_identity),
    };
    let path = to.join(MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).map_err(BackupError::Manifest)?;
    crate::data_dir::write_durably(&path, format!("{text}\n").as_bytes()).map_err(io(&path))?;
    sync_dir(to).map_err(io(to))?;
    Ok(manifest)
}

async fn copy_catalog(stores: &Stores, url: &str, to: &Path) -> Result<CatalogKind, BackupError> {
    let file = to.join("catalog.db");
    if stores.catalog.copy_into(&file).await? {
        sync_file(&file)?;
        return Ok(CatalogKind::Sqlite);
    }
    let dump = to.join("catalog.dump");
    run(postgres_tool("pg_dump", url)
        .args(["--format=custom", "--no-owner", "--no-privileges", "--file"])
        .arg(&dump))?;
    sync_file(&dump)?;
    Ok(CatalogKind::Postgres)
}

/// Reads a backup's manifest, refusing a newer format.
pub fn read_manifest(from: &Path) -> Result<Manifest, BackupError> {
    let text = std::fs::read_to_string(from.join(MANIFEST))
        .map_err(|_| BackupError::Unfinished(from.to_owned()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(BackupError::Manifest)?;
    let found = value
        .get("format")
        .and_then(serde_json::Value::as_u64)
        .map_or(1, |format| u32::try_from(format).unwrap_or(u32::MAX));
    if found > FORMAT {
        return Err(BackupError::NewerFormat { found });
    }
    serde_json::from_value(value).map_err(BackupError::Manifest)
}

/// Where a restore learns of the deletions requested after the backup.
#[derive(Debug, Clone)]
pub enum Tombstones {
    /// The catalog the backup was taken from, read without changing it.
    From(String),
    /// None: the operator says none were requested (or requests them again).
    Without,
}

/// What a restore did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    pub catalog: CatalogKind,
    /// Whether the source of tombstones was checked to be the backup's own catalog (a backup
    /// of format 2 or older names none, and is restored unchecked).
    pub tombstone_source_checked: bool,
    pub lake_objects: usize,
    pub log_files: usize,
    pub deletions_redone: u64,
    pub deletions_requested: usize,
    pub tombstones_of_unknown_surveys: usize,
}

/// Restores the backup in `from` into the empty stores `settings` names.
pub async fn restore(
    settings: &Settings,
    from: &Path,
    tombstones: Option<Tombstones>,
) -> Result<RestoreReport, BackupError> {
    let manifest = read_manifest(from)?;
    let tombstones = tombstones.ok_or(BackupError::NoTombstoneSource)?;
    // The source of tombstones first, before anything is written: another deployment's
    // catalog would request none of this one's erasures, silently.
    let mut tombstone_source_checked = false;
    if let (Tombstones::From(url), Some(expected)) = (&tombstones, &manifest.catalog_identity) {
        let source = crate::open_catalog_read_only(url).await?;
        // A catalog that does not answer is not taken for another deployment's (nor for
        // this one's): the restore stops and says which.
        let found = source
            .stored_fleet_value(CATALOG_IDENTITY)
            .await
            .map_err(|source| BackupError::TombstoneSourceUnreadable {
                url: url.clone(),
                source,
            })?
            .unwrap_or_else(|| "none".to_owned());
        if &found != expected {
            return Err(BackupError::WrongTombstoneSource {
                url: url.clone(),
                expected: expected.clone(),
                found,
            });
        }
        tombstone_source_checked = true;
    }

    // Only into empty stores: a restore never overwrites a deployment.
    let wal_dir = settings.data_dir.wal();
    if wal_dir.exists() {
        return Err(BackupError::LogExists(wal_dir));
    }
    let lake_store = Store::open(&settings.lake_url, &settings.s3)?;
    if !lake_store.is_empty().await? {
        return Err(BackupError::LakeNotEmpty(settings.lake_url.clone()));
    }
    settings
        .data_dir
        .create()
        .map_err(io(settings.data_dir.root()))?;

    // The catalog.
    match (
        manifest.catalog,
        settings.catalog_url.strip_prefix("sqlite://"),
    ) {
        (CatalogKind::Sqlite, Some(path)) => {
            let path = Path::new(path);
            if path.exists() {
                return Err(BackupError::CatalogExists(path.to_owned()));
            }
            copy_durably(&from.join("catalog.db"), path)?;
        }
        (CatalogKind::Postgres, None) => run(postgres_tool("pg_restore", &settings.catalog_url)
            .args(["--no-owner", "--no-privileges", "--exit-on-error"])
            .arg(from.join("catalog.dump")))?,
        (kind, _) => {
            return Err(BackupError::CatalogKindMismatch {
                kind,
                url: settings.catalog_url.clone(),
            });
        }
    }

    // The lake, then the log and the instance's files.
    let copy = Store::open(&from.join("lake").display().to_string(), &[])?;
    let lake_objects = lake_store.copy_all_from(&copy).await?;
    let mut log_files = 0;
    std::fs::create_dir_all(&wal_dir).map_err(io(&wal_dir))?;
    let copied_log = from.join("wal");
    if copied_log.is_dir() {
        for entry in std::fs::read_dir(&copied_log).map_err(io(&copied_log))? {
            let entry = entry.map_err(io(&copied_log))?;
            copy_durably(&entry.path(), &wal_dir.join(entry.file_name()))?;
            log_files += 1;
        }
    }
    sync_dir(&wal_dir).map_err(io(&wal_dir))?;
    for kept in settings.data_dir.kept_files() {
        if let Some(name) = kept.file_name()
            && from.join(name).exists()
        {
            copy_durably(&from.join(name), &kept)?;
        }
    }
    sync_dir(settings.data_dir.root()).map_err(io(settings.data_dir.root()))?;

    // Deletions: every one the copy holds is done again, and those requested after the backup
    // (in the catalog the backup was taken from) are requested here.
    let catalog = crate::open_catalog(&settings.catalog_url).await?;
    // A deployment of its own from here on: its backups name it, not the catalog it came from.
    catalog
        .replace_fleet_value(CATALOG_IDENTITY, &new_identity())
        .await?;
    let deletions_redone = catalog.redo_deletions().await?;
    let mut deletions_requested = 0;
    let mut tombstones_of_unknown_surveys = 0;
    if let Tombstones::From(url) = tombstones {
        let source = crate::open_catalog_read_only(&url).await?;
        for tombstone in source.tombstones_after(0).await? {
            if catalog
                .session_deletion(&tombstone.survey_id, &tombstone.reference)
                .await?
                .is_some()
            {
                continue;
            }
            if catalog.survey_by_id(&tombstone.survey_id).await?.is_none() {
                // Provisioned after the backup: nothing of it was copied.
                tombstones_of_unknown_surveys += 1;
                continue;
            }
            catalog
                .request_session_deletion(&tombstone.survey_id, &tombstone.reference)
                .await?;
            deletions_requested += 1;
        }
    }
    Ok(RestoreReport {
        catalog: manifest.catalog,
        tombstone_source_checked,
        lake_objects,
        log_files,
        deletions_redone,
        deletions_requested,
        tombstones_of_unknown_surveys,
    })
}

/// A new catalog identity.
fn new_identity() -> String {
    format!(
        "{}{}",
        catalog::ids::random_hex24(),
        catalog::ids::random_hex24()
    )
}

/// Whether every instance's log is in the lake, for a backup that copies none: a running
/// instance is asked to flush (the fleet's flush request, as a scoring run asks) and must answer
/// within [`FLEET_FLUSH_WAIT`]; any other must have left the fleet cleanly.
async fn logs_are_in_the_lake(
    stores: &Stores,
    instance_lease: std::time::Duration,
) -> Result<(), BackupError> {
    let lease_ms = i64::try_from(instance_lease.as_millis()).unwrap_or(i64::MAX);
    let members = stores.catalog.fleet_members(lease_ms).await?;
    let stopped: Vec<String> = members
        .iter()
        .filter(|(member, left)| !member.live && !left)
        .map(|(member, _)| {
            format!(
                "instance {} stopped without draining its log",
                member.instance
            )
        })
        .collect();
    if !stopped.is_empty() {
        return Err(BackupError::LogNotDrained(stopped.join(", ")));
    }
    if members.iter().all(|(member, _)| !member.live) {
        return Ok(());
    }
    let requester = format!("backup-{}", &catalog::ids::random_hex24()[..12]);
    let request = stores
        .catalog
        .request_fleet_flush(&requester, lease_ms)
        .await?;
    let deadline = std::time::Instant::now() + FLEET_FLUSH_WAIT;
    loop {
        let pending = stores
            .catalog
            .fleet_flush_pending(request.token, lease_ms)
            .await?;
        if pending.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(BackupError::LogNotDrained(format!(
                "running instances did not flush within {} s: {}",
                FLEET_FLUSH_WAIT.as_secs(),
                pending.join(", ")
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn chrono_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
