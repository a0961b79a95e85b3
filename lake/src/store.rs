//! The lake's object store: a local folder or an S3-compatible bucket, and durable writes and
//! deletes on either.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake storage error: {0}")]
    Store(#[from] object_store::Error),
    #[error("unsupported lake url {0:?} (expected s3://bucket[/prefix], file:///path or a folder)")]
    UnsupportedUrl(String),
    #[error("lake i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// The lake's object store, plus what durability needs to know about it.
#[derive(Debug, Clone)]
pub struct Lake {
    store: Arc<dyn ObjectStore>,
    /// Set for a local folder, whose writes are not durable until fsync'd; `None` for S3.
    local_root: Option<PathBuf>,
}

impl Lake {
    /// Opens the lake a URL names. `file:///path` or a plain path is a local folder, created
    /// when missing. `s3://bucket[/prefix]` is an S3-compatible bucket; endpoint, region and
    /// credentials come from the usual AWS environment variables (`AWS_ENDPOINT`,
    /// `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`...).
    pub fn open(url: &str) -> Result<Lake, LakeError> {
        if let Some(rest) = url.strip_prefix("s3://") {
            return Lake::open_s3(url, rest);
        }
        let path = match url.strip_prefix("file://") {
            Some(path) => path,
            None if url.contains("://") => return Err(LakeError::UnsupportedUrl(url.to_owned())),
            None => url,
        };
        std::fs::create_dir_all(path)?;
        let root = std::fs::canonicalize(path)?;
        let store = LocalFileSystem::new_with_prefix(&root)?;
        Ok(Lake {
            store: Arc::new(store),
            local_root: Some(root),
        })
    }

    fn open_s3(url: &str, bucket_and_prefix: &str) -> Result<Lake, LakeError> {
        let (bucket, prefix) = bucket_and_prefix
            .split_once('/')
            .unwrap_or((bucket_and_prefix, ""));
        let prefix = prefix.trim_matches('/');
        if bucket.is_empty() || prefix.split('/').any(|part| part == "..") {
            return Err(LakeError::UnsupportedUrl(url.to_owned()));
        }
        let s3 = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()?;
        // A successful PUT is durable in S3: no local syncs are needed.
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::new(s3)
        } else {
            Arc::new(crate::bucket_prefix::BucketPrefix::new(s3, prefix))
        };
        Ok(Lake {
            store,
            local_root: None,
        })
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Writes an object so that it survives a power loss once this returns. The catalog commit
    /// that follows must never name a file the disk could still take back: object_store's local
    /// backend renames a staging file into place without syncing, so for a local folder the file
    /// and every directory up to the root are fsync'd here.
    pub async fn put_durable(&self, path: &str, bytes: Vec<u8>) -> Result<(), LakeError> {
        self.store
            .put(&ObjectPath::from(path), bytes.into())
            .await?;
        if let Some(root) = &self.local_root {
            let root = root.clone();
            let file = root.join(path);
            tokio::task::spawn_blocking(move || sync_file_and_parents(&root, &file))
                .await
                .map_err(|error| LakeError::Io(std::io::Error::other(error)))??;
        }
        Ok(())
    }

    /// Reads an object whole.
    pub async fn read(&self, path: &str) -> Result<bytes::Bytes, LakeError> {
        Ok(self
            .store
            .get(&ObjectPath::from(path))
            .await?
            .bytes()
            .await?)
    }

    /// Deletes an object; a missing object is not an error. In a local folder the deletion is
    /// durable once this returns (its directory is fsync'd): a replaced file that still held an
    /// erased session must not come back after a power cut.
    pub async fn delete(&self, path: &str) -> Result<(), LakeError> {
        match self.store.delete(&ObjectPath::from(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        if let Some(root) = &self.local_root {
            let parent = root.join(path).parent().map(Path::to_path_buf);
            if let Some(parent) = parent.filter(|dir| dir.exists()) {
                tokio::task::spawn_blocking(move || std::fs::File::open(parent)?.sync_all())
                    .await
                    .map_err(|error| LakeError::Io(std::io::Error::other(error)))??;
            }
        }
        Ok(())
    }
}

fn sync_file_and_parents(root: &Path, file: &Path) -> std::io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    let mut directory = file.parent();
    while let Some(dir) = directory {
        std::fs::File::open(dir)?.sync_all()?;
        if dir == root {
            break;
        }
        directory = dir.parent();
    }
    Ok(())
}
