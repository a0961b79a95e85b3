//! `telltale backup` and `telltale restore`: the command line's side of `instance::backup` (what
//! is copied, in which order, and why that order is consistent: docs/backup.md).

use std::path::Path;

use anyhow::bail;
use instance::backup::{LogMode, Tombstones};

use crate::cli::StorageArgs;

/// `telltale backup --to FOLDER [--without-log]`.
pub async fn backup(
    storage: &StorageArgs,
    to: &Path,
    without_log: bool,
    instance_lease: std::time::Duration,
    json: bool,
) -> anyhow::Result<()> {
    let log = if without_log {
        LogMode::Omit
    } else {
        LogMode::Required
    };
    let manifest = instance::backup::backup(&storage.settings(), to, log, instance_lease).await?;
    if json {
        println!("{}", serde_json::to_string(&manifest)?);
    } else {
        println!(
            "backup of {} written to {}: catalog ({}), {} tables, {} log segments{}",
            storage.data_dir.display(),
            to.display(),
            serde_json::to_value(manifest.catalog)?
                .as_str()
                .unwrap_or("?"),
            manifest.tables.len(),
            manifest.log_segments,
            if without_log {
                " (no log: every instance's log is in the lake)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// `telltale restore --from FOLDER (--tombstones-from CATALOG_URL | --without-tombstones)`.
pub async fn restore(
    storage: &StorageArgs,
    from: &Path,
    tombstones_from: Option<&str>,
    without_tombstones: bool,
    json: bool,
) -> anyhow::Result<()> {
    let tombstones = match (tombstones_from, without_tombstones) {
        (Some(_), true) => {
            bail!("--tombstones-from and --without-tombstones exclude each other")
        }
        (Some(url), false) => Some(Tombstones::From(url.to_owned())),
        (None, true) => Some(Tombstones::Without),
        (None, false) => None,
    };
    let report = instance::backup::restore(&storage.settings(), from, tombstones).await?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "restored {} into {}: {} lake objects, {} log files; {} deletions to redo, {} \
             requested since the backup; start `telltale serve` on it to replay the log and \
             erase them",
            from.display(),
            storage.data_dir.display(),
            report.lake_objects,
            report.log_files,
            report.deletions_redone,
            report.deletions_requested
        );
    }
    Ok(())
}
