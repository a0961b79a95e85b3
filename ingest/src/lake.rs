//! The lake: where Parquet files live, and how their object paths are laid out.
//!
//! ```text
//! events/survey_id=<24hex>/date=<YYYY-MM-DD>/<instance>-<first lsn>-<last lsn>.parquet
//! ```

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake storage error: {0}")]
    Store(#[from] object_store::Error),
    #[error("unsupported lake url {0:?} (expected file:///path or a folder)")]
    UnsupportedUrl(String),
    #[error("lake i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the object store a lake URL names. `file:///path` or a plain path is a local folder,
/// created when missing.
pub fn open_lake(url: &str) -> Result<Arc<dyn ObjectStore>, LakeError> {
    let path = match url.strip_prefix("file://") {
        Some(path) => path,
        None if url.contains("://") => return Err(LakeError::UnsupportedUrl(url.to_owned())),
        None => url,
    };
    std::fs::create_dir_all(path)?;
    let store = LocalFileSystem::new_with_prefix(Path::new(path))?;
    Ok(Arc::new(store))
}

/// The object path of an events file.
///
/// ```
/// assert_eq!(
///     ingest::lake::events_file_path("00112233445566778899aabb", "2026-11-22", "inst", 7, 42),
///     "events/survey_id=00112233445566778899aabb/date=2026-11-22/inst-00000000000000000007-00000000000000000042.parquet"
/// );
/// ```
pub fn events_file_path(
    survey_id: &str,
    date: &str,
    instance: &str,
    first_lsn: u64,
    last_lsn: u64,
) -> String {
    format!(
        "events/survey_id={survey_id}/date={date}/{instance}-{first_lsn:020}-{last_lsn:020}.parquet"
    )
}

/// The instance that wrote an events file, read back from its path.
pub fn events_file_instance(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?.strip_suffix(".parquet")?;
    let mut parts = name.rsplitn(3, '-');
    let _last = parts.next()?;
    let _first = parts.next()?;
    parts.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_is_recovered_from_the_path() {
        let path = events_file_path("00112233445566778899aabb", "2026-11-22", "a1b2-c3", 1, 2);
        assert_eq!(events_file_instance(&path), Some("a1b2-c3"));
        assert_eq!(events_file_instance("events/x/y.parquet"), None);
    }
}
