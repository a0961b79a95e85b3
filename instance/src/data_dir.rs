//! An instance's data dir, its files by name: the one place a file name of the data dir is
//! written down, and the one durable small-file write.

use std::io;
use std::path::{Path, PathBuf};

/// An instance's folder: the embedded catalog and lake by default, the write-ahead log, the
/// instance's id and the review links' secret.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> DataDir {
        DataDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the folder when it is missing.
    pub fn create(&self) -> io::Result<()> {
        std::fs::create_dir_all(&self.root)
    }

    /// The embedded catalog's database (the default catalog).
    pub fn catalog_db(&self) -> PathBuf {
        self.root.join("catalog.db")
    }

    /// The embedded lake's folder (the default lake).
    pub fn lake(&self) -> PathBuf {
        self.root.join("lake")
    }

    /// The write-ahead log's folder.
    pub fn wal(&self) -> PathBuf {
        self.root.join("wal")
    }

    /// The instance's id: its log positions in the lake's transactions are recorded under it.
    pub fn instance_id(&self) -> PathBuf {
        self.root.join("instance-id")
    }

    /// The review links' secret, made at first start unless one is configured.
    pub fn review_secret(&self) -> PathBuf {
        self.root.join("review-secret")
    }

    /// The files a backup keeps besides the log: the id and the secret.
    pub fn kept_files(&self) -> [PathBuf; 2] {
        [self.instance_id(), self.review_secret()]
    }

    /// The instance's id, made (durably) on first use: a new id after a power loss would replay
    /// the whole log under fresh watermarks.
    pub fn instance_id_or_new(&self) -> io::Result<String> {
        let path = self.instance_id();
        match std::fs::read_to_string(&path) {
            Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
            _ => {
                let id = catalog::ids::random_hex24()[..12].to_owned();
                write_durably(&path, id.as_bytes())?;
                Ok(id)
            }
        }
    }
}

/// Writes a small file so that it is whole and on disk when this returns, or not there at all:
/// a temporary file synced, renamed over the name, and the folder synced. The one durable
/// small-file write of the data dir (the id, the review secret).
pub fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_file(path, bytes, false)
}

/// [`write_durably`], readable and writable by the owner only (a secret).
pub fn write_durably_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_file(path, bytes, true)
}

fn write_file(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    use std::io::Write;
    let staging = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(&staging)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&staging, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Makes a folder's entries (a rename, a new or deleted file) durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path());
        let first = data.instance_id_or_new().expect("make");
        assert_eq!(first.len(), 12);
        assert_eq!(data.instance_id_or_new().expect("read"), first);
        assert!(!data.instance_id().with_extension("tmp").exists());
    }
}
