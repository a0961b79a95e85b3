//! Copies of the lake for a backup, and their restore: each table as of one version (its log up
//! to that version and the files live at it) into another store, and a copy's every object back
//! into an empty lake.

use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::delta::AsOf;
use crate::{Lake, LakeError, Store, TableKind};

/// What a backup copied of one table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableCopy {
    pub table: String,
    /// The table's version the copy holds.
    pub version: u64,
    /// Live files copied.
    pub files: usize,
}

/// Times a table's copy starts over when a file live at its version was deleted before it was
/// read (an erasure deletes the files it replaced at once).
const ATTEMPTS: usize = 5;

impl Lake {
    /// Copies each table, as of its newest version, into `target`: the commit and checkpoint
    /// files of the table's log up to that version (not `_last_checkpoint`, a hint readers do
    /// without) and every file live at it, at the same paths. Safe beside running servers: the
    /// files a version names stay until a vacuum (after the retention) or an erasure deletes
    /// them; a copy that finds one gone starts over from the newest version.
    pub async fn copy_tables_to(&self, target: &Store) -> Result<Vec<TableCopy>, LakeError> {
        let mut copies = Vec::new();
        for kind in TableKind::ALL {
            copies.push(self.copy_table_to(kind, target).await?);
        }
        Ok(copies)
    }

    /// Copies one table, as of its newest version, into `target` (see
    /// [`Lake::copy_tables_to`]); objects stream through in bounded memory.
    pub async fn copy_table_to(
        &self,
        kind: TableKind,
        target: &Store,
    ) -> Result<TableCopy, LakeError> {
        let table = self.table(kind);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let newest = table.refresh().await?;
            let (version, files) = table.files_as_of(AsOf::Version(newest)).await?;
            let mut vanished = false;
            for file in &files {
                match target.copy_object_from(&self.store, &file.path).await {
                    Ok(_) => {}
                    Err(LakeError::Store(object_store::Error::NotFound { .. }))
                        if attempt < ATTEMPTS =>
                    {
                        vanished = true;
                        break;
                    }
                    Err(error) => return Err(error),
                }
            }
            if vanished {
                continue;
            }
            let log = ObjectPath::from(format!("{}/_delta_log", kind.as_str()));
            let entries: Vec<object_store::ObjectMeta> =
                self.store.store().list(Some(&log)).try_collect().await?;
            for entry in entries {
                let Some(name) = entry.location.filename() else {
                    continue;
                };
                let Some(entry_version) = name.get(..20).and_then(|v| v.parse::<u64>().ok()) else {
                    continue;
                };
                if entry_version <= version {
                    target
                        .copy_object_from(&self.store, entry.location.as_ref())
                        .await?;
                }
            }
            return Ok(TableCopy {
                table: kind.as_str().to_owned(),
                version,
                files: files.len(),
            });
        }
    }
}

impl Store {
    /// Whether the store holds no object at all (a restore writes only into an empty lake).
    pub async fn is_empty(&self) -> Result<bool, LakeError> {
        let mut listing = self.store().list(None);
        Ok(listing.try_next().await?.is_none())
    }

    /// Copies every object of `source` into this store at the same path, durably; returns how
    /// many. Data files first, logs last, so that a copy cut short names no missing file.
    pub async fn copy_all_from(&self, source: &Store) -> Result<usize, LakeError> {
        let mut paths: Vec<String> = source
            .store()
            .list(None)
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await?;
        paths.sort_by_key(|path| (path.contains("/_delta_log/"), path.clone()));
        for path in &paths {
            self.copy_object_from(source, path).await?;
        }
        Ok(paths.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_holds_each_table_at_its_version_and_restores_whole() {
        let source_dir = tempfile::tempdir().expect("tempdir");
        let lake = Lake::open(&source_dir.path().display().to_string(), &[], &[])
            .await
            .expect("open");
        let copy_dir = tempfile::tempdir().expect("tempdir");
        let copy = Store::open(&copy_dir.path().display().to_string(), &[]).expect("copy");
        assert!(copy.is_empty().await.expect("list"));
        let copies = lake.copy_tables_to(&copy).await.expect("copy");
        assert_eq!(copies.len(), 3);
        assert!(copies.iter().all(|copy| copy.files == 0), "{copies:?}");
        assert!(!copy.is_empty().await.expect("list"));

        let restored_dir = tempfile::tempdir().expect("tempdir");
        let restored = Store::open(&restored_dir.path().display().to_string(), &[]).expect("open");
        let copied = restored.copy_all_from(&copy).await.expect("restore");
        assert!(copied >= 3, "{copied}");
        let reopened = Lake::open(&restored_dir.path().display().to_string(), &[], &[])
            .await
            .expect("the restored lake opens");
        for kind in TableKind::ALL {
            assert_eq!(
                reopened.table(kind).refresh().await.expect("version"),
                lake.table(kind).refresh().await.expect("version")
            );
        }
    }
}
