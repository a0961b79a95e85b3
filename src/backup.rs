//! `telltale backup` and `telltale restore`: a consistent copy of one instance's deployment
//! (catalog, lake, write-ahead log), taken while it serves, and its restore into empty stores.
//!
//! The copy's order is what makes it consistent (docs/backup.md): the log is held first (no
//! segment is retired until the end), then the lake's tables are copied each as of one version,
//! then the catalog (SQLite's `VACUUM INTO`, or `pg_dump`), then the log's segments. Every
//! record the lake copy lacks is still in the log when it is copied, so the restored instance's
//! replay brings the lake and the session statistics up to the log copy: nothing acknowledged
//! before the backup began is missing, and nothing is there twice (the lake's application
//! transactions and the catalog's watermarks skip what each already holds).
//!
//! A restore re-runs every deletion the copied catalog holds, and, from `--tombstones-from`,
//! requests the deletions made after the backup: tombstones are the record, and an erased
//! session is never brought back.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;

use crate::cli::StorageArgs;

/// The manifest a backup writes last: a folder without it is not a finished backup.
const MANIFEST: &str = "backup.json";

/// Files of the data dir a backup keeps besides the log: the instance's id (its log positions
/// in the lake's transactions are recorded under it) and the review links' secret.
const DATA_FILES: [&str; 2] = ["instance-id", "review-secret"];

/// `telltale backup --to FOLDER`.
pub async fn backup(storage: &StorageArgs, to: &Path, json: bool) -> anyhow::Result<()> {
    let to_text = to
        .to_str()
        .with_context(|| format!("{} is not a UTF-8 path", to.display()))?;
    if to.exists()
        && std::fs::read_dir(to)
            .with_context(|| format!("reading {to_text}"))?
            .next()
            .is_some()
    {
        bail!("{to_text} is not empty: a backup goes into a new folder");
    }
    std::fs::create_dir_all(to).with_context(|| format!("creating {to_text}"))?;
    let started = chrono::Utc::now();
    let (catalog, lake) = crate::analysis::open_storage(storage).await?;

    // 1. Hold the log: from here on, no segment is retired.
    let wal_dir = storage.data_dir.join("wal");
    let hold = if wal_dir.is_dir() {
        let dir = wal_dir.clone();
        Some(
            tokio::task::spawn_blocking(move || ingest::wal::hold_for_backup(&dir))
                .await?
                .context("holding the write-ahead log")?,
        )
    } else {
        None
    };

    // 2. The lake's tables, each as of one version.
    let target = lake::Store::open(&to.join("lake").display().to_string(), &[])?;
    let tables = lake
        .copy_tables_to(&target)
        .await
        .context("copying the lake's tables")?;

    // 3. The catalog, as of one moment.
    let catalog_file = to.join("catalog.db");
    let catalog_kind = if catalog
        .copy_into(&catalog_file)
        .await
        .context("copying the catalog")?
    {
        sync_file(&catalog_file)?;
        "sqlite"
    } else {
        let dump = to.join("catalog.dump");
        run(Command::new("pg_dump")
            .args(["--format=custom", "--no-owner", "--no-privileges", "--file"])
            .arg(&dump)
            .arg("--dbname")
            .arg(storage.catalog_url()))
        .context("pg_dump of the catalog (PostgreSQL's client tools must be installed)")?;
        sync_file(&dump)?;
        "postgres"
    };

    // 4. The log's segments and the instance's files.
    let mut segments = 0;
    if wal_dir.is_dir() {
        let copy = to.join("wal");
        std::fs::create_dir_all(&copy)?;
        let mut names: Vec<String> = std::fs::read_dir(&wal_dir)?
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| name.ends_with(".wal") || name == "FORMAT")
            .collect();
        names.sort();
        for name in &names {
            match copy_durably(&wal_dir.join(name), &copy.join(name)) {
                Ok(()) => segments += usize::from(name.ends_with(".wal")),
                // A segment the writer retired before the hold: its records are in the lake
                // and the catalog copied above.
                Err(error) if is_not_found(&error) => {}
                Err(error) => return Err(error),
            }
        }
        sync_dir(&copy)?;
    }
    for name in DATA_FILES {
        let source = storage.data_dir.join(name);
        if source.exists() {
            copy_durably(&source, &to.join(name))?;
        }
    }
    drop(hold);

    let manifest = json!({
        "telltale": env!("CARGO_PKG_VERSION"),
        "commit": env!("TELLTALE_COMMIT"),
        "startedAt": started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "finishedAt": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "catalog": catalog_kind,
        "tables": tables,
        "logSegments": segments,
    });
    let manifest_path = to.join(MANIFEST);
    std::fs::write(&manifest_path, format!("{manifest:#}\n"))?;
    sync_file(&manifest_path)?;
    sync_dir(to)?;
    if json {
        println!("{manifest}");
    } else {
        println!(
            "backup of {} written to {to_text}: catalog ({catalog_kind}), {} tables, {segments} log segments",
            storage.data_dir.display(),
            tables.len()
        );
    }
    Ok(())
}

/// `telltale restore --from FOLDER [--tombstones-from CATALOG_URL]`.
pub async fn restore(
    storage: &StorageArgs,
    from: &Path,
    tombstones_from: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(from.join(MANIFEST)).with_context(|| {
            format!(
                "{} has no {MANIFEST}: not a finished backup",
                from.display()
            )
        })?,
    )
    .context("reading the backup's manifest")?;
    let kind = manifest["catalog"].as_str().unwrap_or_default();

    // Only into empty stores: a restore never overwrites a deployment.
    let wal_dir = storage.data_dir.join("wal");
    if wal_dir.exists() {
        bail!(
            "{} already holds a write-ahead log: restore into a new data dir",
            storage.data_dir.display()
        );
    }
    let catalog_url = storage.catalog_url();
    let lake_store = lake::Store::open(&storage.lake_url(), &storage.s3_settings())?;
    if !lake_store.is_empty().await? {
        bail!(
            "the lake at {} is not empty: restore into a new one",
            storage.lake_url()
        );
    }
    std::fs::create_dir_all(&storage.data_dir)?;

    // The catalog.
    match (kind, catalog_url.strip_prefix("sqlite://")) {
        ("sqlite", Some(path)) => {
            let path = Path::new(path);
            if path.exists() {
                bail!("{} exists: restore into a new catalog", path.display());
            }
            copy_durably(&from.join("catalog.db"), path)?;
        }
        ("postgres", None) => {
            run(Command::new("pg_restore")
                .args([
                    "--no-owner",
                    "--no-privileges",
                    "--exit-on-error",
                    "--dbname",
                ])
                .arg(&catalog_url)
                .arg(from.join("catalog.dump")))
            .context(
                "pg_restore of the catalog into an empty database (PostgreSQL's client tools \
                 must be installed)",
            )?;
        }
        (kind, _) => bail!(
            "the backup's catalog is {kind:?}; this deployment's is {catalog_url}: a backup \
             restores into the same kind of catalog"
        ),
    }

    // The lake, then the log and the instance's files.
    let copy = lake::Store::open(&from.join("lake").display().to_string(), &[])?;
    let objects = lake_store
        .copy_all_from(&copy)
        .await
        .context("copying the lake")?;
    let mut segments = 0;
    std::fs::create_dir_all(&wal_dir)?;
    if from.join("wal").is_dir() {
        for entry in std::fs::read_dir(from.join("wal"))? {
            let entry = entry?;
            copy_durably(&entry.path(), &wal_dir.join(entry.file_name()))?;
            segments += 1;
        }
    }
    sync_dir(&wal_dir)?;
    for name in DATA_FILES {
        let source = from.join(name);
        if source.exists() {
            copy_durably(&source, &storage.data_dir.join(name))?;
        }
    }
    sync_dir(&storage.data_dir)?;

    // Deletions: every one the copy holds is done again, and those requested after the backup
    // (in the catalog the backup was taken from) are requested here.
    let catalog = catalog::open(&catalog_url)
        .await
        .with_context(|| format!("opening the restored catalog {catalog_url}"))?;
    let redone = catalog.redo_deletions().await?;
    let mut requested = 0;
    let mut unknown_surveys = 0;
    match tombstones_from {
        Some(url) => {
            let source = catalog::open(url)
                .await
                .with_context(|| format!("opening {url} for its tombstones"))?;
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
                    unknown_surveys += 1;
                    continue;
                }
                catalog
                    .request_session_deletion(&tombstone.survey_id, &tombstone.reference)
                    .await?;
                requested += 1;
            }
        }
        None => eprintln!(
            "warning: no --tombstones-from: deletions requested after the backup are not known \
             here; request them again, or restore with the catalog that has them"
        ),
    }
    let report = json!({
        "catalog": kind,
        "lakeObjects": objects,
        "logFiles": segments,
        "deletionsRedone": redone,
        "deletionsRequested": requested,
        "tombstonesOfUnknownSurveys": unknown_surveys,
    });
    if json {
        println!("{report}");
    } else {
        println!(
            "restored {} into {}: {objects} lake objects, {segments} log files; {redone} \
             deletions to redo, {requested} requested since the backup; start `telltale serve` \
             on it to replay the log and erase them",
            from.display(),
            storage.data_dir.display()
        );
    }
    Ok(())
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let output = command.output()?;
    if !output.status.success() {
        bail!(
            "{} exited with {}: {}",
            command.get_program().to_string_lossy(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn is_not_found(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|error| error.kind() == std::io::ErrorKind::NotFound)
}

/// Copies a file and makes the copy durable.
fn copy_durably(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)?;
    sync_file(to)
}

fn sync_file(path: &Path) -> anyhow::Result<()> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("syncing {}", path.display()))
}

fn sync_dir(path: &Path) -> anyhow::Result<()> {
    sync_file(&PathBuf::from(path))
}
