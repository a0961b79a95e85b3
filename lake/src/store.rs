//! The lake's object store: a local folder or an S3-compatible bucket, and durable writes and
//! deletes on either.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake storage error: {0}")]
    Store(#[from] object_store::Error),
    #[error("delta table error: {0}")]
    Delta(#[from] deltalake_core::DeltaTableError),
    #[error("the table's schema cannot be written as a Delta schema: {0}")]
    Schema(String),
    #[error("a commit lost {0} races in a row")]
    Contended(usize),
    /// A writer's commit guard refused the commit (see [`crate::delta::CommitGuard`]).
    #[error("the commit was refused: {0}")]
    Refused(String),
    #[error("the retention {0:?} is too long to count")]
    RetentionOutOfRange(std::time::Duration),
    #[error("the table's log has no commit time for version {0}")]
    NoCommitTime(u64),
    #[error("the commit time {0} ms of the table's log is out of range")]
    CommitTimeOutOfRange(i64),
    #[error(
        "the lake at {0} holds events folders without a Delta log: it was written by a version \
         before the lake's tables were Delta tables and needs a fresh start (docs/lake.md)"
    )]
    PreDelta(String),
    /// A table created by a newer release in a format this one does not know.
    #[error(
        "the lake's {table} table is in format {found}, created by a newer release of Telltale \
         (this release knows formats up to {known}): run that release (CHANGELOG.md)"
    )]
    NewerTableFormat {
        table: &'static str,
        found: u32,
        known: u32,
    },
    #[error("unsupported lake url {0:?} (expected s3://bucket[/prefix], file:///path or a folder)")]
    UnsupportedUrl(String),
    #[error("lake i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// The lake's object store, plus what durability needs to know about it.
#[derive(Debug, Clone)]
pub struct Store {
    store: Arc<dyn ObjectStore>,
    /// Set for a local folder, whose writes are not durable until fsync'd; `None` for S3.
    local_root: Option<PathBuf>,
    /// The lake's root as a URL (`file:///abs/path/` or `s3://bucket/prefix/`), ending in `/`.
    root_url: String,
    /// The store of the whole file system or bucket, and the lake's root within it: Delta Lake's
    /// kernel reads a table's log by its full URL path from such a store.
    container: Arc<dyn ObjectStore>,
    root_in_container: String,
}

impl Store {
    /// Opens the lake a URL names. `file:///path` or a plain path is a local folder, created
    /// when missing. `s3://bucket[/prefix]` is an S3-compatible bucket, set up by `s3`: pairs
    /// of object_store's S3 settings by name (`aws_endpoint`, `aws_region`,
    /// `aws_access_key_id`, `aws_allow_http`...; the binary passes its `AWS_*` environment
    /// variables, this crate reads no environment). Unknown names are ignored.
    pub fn open(url: &str, s3: &[(String, String)]) -> Result<Store, LakeError> {
        if let Some(rest) = url.strip_prefix("s3://") {
            return Store::open_s3(url, rest, s3);
        }
        let path = match url.strip_prefix("file://") {
            Some(path) => path,
            None if url.contains("://") => return Err(LakeError::UnsupportedUrl(url.to_owned())),
            None => url,
        };
        std::fs::create_dir_all(path)?;
        let root = std::fs::canonicalize(path)?;
        let store = LocalFileSystem::new_with_prefix(&root)?;
        let root_text = root.display().to_string();
        let root_url = format!("file://{}/", root_text.trim_end_matches('/'));
        Ok(Store {
            store: Arc::new(store),
            local_root: Some(root.clone()),
            root_url,
            container: Arc::new(LocalFileSystem::new()),
            root_in_container: root_text.trim_matches('/').to_owned(),
        })
    }

    fn open_s3(
        url: &str,
        bucket_and_prefix: &str,
        settings: &[(String, String)],
    ) -> Result<Store, LakeError> {
        let (bucket, prefix) = bucket_and_prefix
            .split_once('/')
            .unwrap_or((bucket_and_prefix, ""));
        let prefix = prefix.trim_matches('/');
        if bucket.is_empty() || prefix.split('/').any(|part| part == "..") {
            return Err(LakeError::UnsupportedUrl(url.to_owned()));
        }
        // Delta commits rely on `PutMode::Create` (`If-None-Match: *`) being honoured, which
        // is object_store's default for S3 and is said here so that it stays so.
        let mut builder = AmazonS3Builder::new();
        for (name, value) in settings {
            if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value);
            }
        }
        let s3: Arc<dyn ObjectStore> = Arc::new(
            builder
                .with_bucket_name(bucket)
                .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
                .build()?,
        );
        // A successful PUT is durable in S3: no local syncs are needed.
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::clone(&s3)
        } else {
            Arc::new(crate::bucket_prefix::BucketPrefix::new(
                Arc::clone(&s3),
                prefix,
            ))
        };
        let root_url = if prefix.is_empty() {
            format!("s3://{bucket}/")
        } else {
            format!("s3://{bucket}/{prefix}/")
        };
        Ok(Store {
            store,
            local_root: None,
            root_url,
            container: s3,
            root_in_container: prefix.to_owned(),
        })
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The stores a Delta table under the lake's root is opened with: one rooted at the table's
    /// folder, and the file system's or bucket's own.
    pub(crate) fn table_stores(&self, table: &str) -> (Arc<dyn ObjectStore>, Arc<dyn ObjectStore>) {
        let folder = if self.root_in_container.is_empty() {
            table.to_owned()
        } else {
            format!("{}/{table}", self.root_in_container)
        };
        let prefixed: Arc<dyn ObjectStore> = Arc::new(crate::bucket_prefix::BucketPrefix::new(
            Arc::clone(&self.container),
            &folder,
        ));
        (prefixed, Arc::clone(&self.container))
    }

    /// The URL of a table folder under the lake's root.
    pub fn table_url(&self, table: &str) -> Result<url::Url, LakeError> {
        url::Url::parse(&format!("{}{table}/", self.root_url))
            .map_err(|_| LakeError::UnsupportedUrl(self.root_url.clone()))
    }

    /// Fails when the `events` folder holds partitions but no Delta log (see
    /// [`LakeError::PreDelta`]).
    pub async fn refuse_pre_delta_layout(&self) -> Result<(), LakeError> {
        let listing = self
            .store
            .list_with_delimiter(Some(&ObjectPath::from("events")))
            .await?;
        let names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|prefix| prefix.filename().map(str::to_owned))
            .collect();
        let partitions = names.iter().any(|name| name.starts_with("survey_id="));
        if partitions && !names.iter().any(|name| name == "_delta_log") {
            return Err(LakeError::PreDelta(self.root_url.clone()));
        }
        Ok(())
    }

    /// Creates a folder under a local lake's root (nothing to do in a bucket).
    pub async fn create_folder(&self, folder: &str) -> Result<(), LakeError> {
        if let Some(root) = &self.local_root {
            tokio::fs::create_dir_all(root.join(folder)).await?;
        }
        Ok(())
    }

    /// Makes a table's commit file of `version` durable, with the folders up to the lake's
    /// root (a local folder only: in S3 a successful PUT is durable).
    pub async fn sync_delta_log(&self, table: &str, version: u64) -> Result<(), LakeError> {
        self.sync_files(table, vec![format!("{version:020}.json")])
            .await
    }

    /// Makes the checkpoint of `version` and `_last_checkpoint` durable (a local folder only).
    pub async fn sync_delta_checkpoint(&self, table: &str, version: u64) -> Result<(), LakeError> {
        self.sync_files(
            table,
            vec![
                format!("{version:020}.checkpoint.parquet"),
                "_last_checkpoint".to_owned(),
            ],
        )
        .await
    }

    async fn sync_files(&self, table: &str, names: Vec<String>) -> Result<(), LakeError> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        let root = root.clone();
        let log = root.join(table).join("_delta_log");
        tokio::task::spawn_blocking(move || {
            for name in names {
                sync_file_and_parents(&root, &log.join(name))?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await
        .map_err(|error| LakeError::Io(std::io::Error::other(error)))??;
        Ok(())
    }

    /// Writes an object so that it survives a power loss once this returns. The catalog commit
    /// that follows must never name a file the disk could still take back: object_store's local
    /// backend renames a staging file into place without syncing, so for a local folder the file
    /// and every directory up to the root are fsync'd here.
    pub async fn put_durable(&self, path: &str, bytes: Vec<u8>) -> Result<(), LakeError> {
        let started = std::time::Instant::now();
        let length = bytes.len() as u64;
        let result = self.put_and_sync(path, bytes).await;
        if result.is_ok() {
            series::LAKE_UPLOAD_SECONDS.get().record(started.elapsed());
            series::LAKE_UPLOAD_BYTES_TOTAL.get().increment(length);
        } else {
            series::LAKE_UPLOAD_ERRORS_TOTAL.get().increment(1);
        }
        result
    }

    async fn put_and_sync(&self, path: &str, bytes: Vec<u8>) -> Result<(), LakeError> {
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

    /// Copies the object at `path` of `source` to the same path here, durably (as
    /// [`Store::put_durable`]), in bounded memory: it streams, and an object larger than one
    /// part goes up as a multipart upload of [`COPY_PART_BYTES`] parts (S3 takes at most 5 GiB
    /// in one PUT). Returns the bytes copied.
    pub async fn copy_object_from(&self, source: &Store, path: &str) -> Result<u64, LakeError> {
        let location = ObjectPath::from(path);
        let got = source.store.get(&location).await?;
        let size = got.meta.size;
        if size <= COPY_PART_BYTES as u64 {
            let bytes = got.bytes().await?;
            self.put_durable(path, bytes.to_vec()).await?;
            return Ok(size);
        }
        let mut upload = self.store.put_multipart(&location).await?;
        let copied = match upload_parts(upload.as_mut(), got.into_stream()).await {
            Ok(copied) => copied,
            Err(error) => {
                // Whatever failed (a read of the source, a part, the completion), the upload is
                // aborted: the bucket keeps none of its parts (S3 bills and keeps the parts of an
                // upload never completed nor aborted).
                if let Err(abort) = upload.abort().await {
                    tracing::warn!(path, error = %abort, "could not abort a failed multipart upload");
                }
                return Err(error);
            }
        };
        if let Some(root) = &self.local_root {
            let root = root.clone();
            let file = root.join(path);
            tokio::task::spawn_blocking(move || sync_file_and_parents(&root, &file))
                .await
                .map_err(|error| LakeError::Io(std::io::Error::other(error)))??;
        }
        series::LAKE_UPLOAD_BYTES_TOTAL.get().increment(copied);
        Ok(copied)
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

/// Streams `source` into `upload` in parts of [`COPY_PART_BYTES`], at most
/// [`COPY_PARTS_IN_FLIGHT`] of them in flight, and completes it; the bytes copied. The caller
/// aborts the upload on an error.
async fn upload_parts(
    upload: &mut dyn object_store::MultipartUpload,
    mut source: futures::stream::BoxStream<'static, object_store::Result<bytes::Bytes>>,
) -> Result<u64, LakeError> {
    use futures::StreamExt;
    use futures::stream::FuturesUnordered;
    let mut in_flight = FuturesUnordered::new();
    let mut part: Vec<u8> = Vec::with_capacity(COPY_PART_BYTES);
    let mut copied = 0u64;
    while let Some(chunk) = source.next().await {
        let chunk = chunk?;
        copied += chunk.len() as u64;
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let take = (COPY_PART_BYTES - part.len()).min(rest.len());
            part.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if part.len() == COPY_PART_BYTES {
                // Memory stays bounded however large the object.
                while in_flight.len() >= COPY_PARTS_IN_FLIGHT {
                    if let Some(done) = in_flight.next().await {
                        done?;
                    }
                }
                let full = std::mem::replace(&mut part, Vec::with_capacity(COPY_PART_BYTES));
                in_flight.push(upload.put_part(full.into()));
            }
        }
    }
    if !part.is_empty() {
        in_flight.push(upload.put_part(part.into()));
    }
    while let Some(done) = in_flight.next().await {
        done?;
    }
    upload.complete().await?;
    Ok(copied)
}

/// The part size of a streamed copy ([`Store::copy_object_from`]); objects up to it are copied
/// in one request.
pub const COPY_PART_BYTES: usize = 16 * 1024 * 1024;
/// Parts of a streamed copy in flight at once.
const COPY_PARTS_IN_FLIGHT: usize = 2;

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

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::client::{HttpError, HttpErrorKind};

    fn http_error(kind: HttpErrorKind, cause: std::io::ErrorKind) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(kind, std::io::Error::from(cause))),
        }
    }

    fn refused(kind: HttpErrorKind) -> object_store::Error {
        http_error(kind, std::io::ErrorKind::ConnectionRefused)
    }

    #[test]
    fn a_store_that_does_not_answer_is_told_from_a_failed_request() {
        // Through the Delta kernel, whose error hides its cause from `source()`.
        let through_kernel = LakeError::Delta(deltalake_core::DeltaTableError::KernelError(
            buoyant_kernel::Error::ObjectStore(refused(HttpErrorKind::Connect)),
        ));
        assert!(outage::is_store_down(&through_kernel));
        assert!(outage::is_store_down(&LakeError::Store(refused(
            HttpErrorKind::Timeout
        ))));
        let missing = LakeError::Store(object_store::Error::NotFound {
            path: "events/x.parquet".to_owned(),
            source: "no such file".into(),
        });
        assert!(!outage::is_store_down(&missing));
        assert!(!outage::is_store_down(&LakeError::Store(http_error(
            HttpErrorKind::Decode,
            std::io::ErrorKind::InvalidData
        ))));
    }

    /// An in-memory store whose multipart uploads fail their second part, counting aborts: a
    /// fault injector for the copy's clean-up, around object_store's own `InMemory`.
    #[derive(Debug, Default)]
    struct FailingParts {
        inner: object_store::memory::InMemory,
        aborted: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl std::fmt::Display for FailingParts {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("FailingParts")
        }
    }

    #[derive(Debug)]
    struct FailingUpload {
        inner: Box<dyn object_store::MultipartUpload>,
        parts: usize,
        aborted: Arc<std::sync::atomic::AtomicUsize>,
    }

    #[async_trait::async_trait]
    impl object_store::MultipartUpload for FailingUpload {
        fn put_part(&mut self, data: object_store::PutPayload) -> object_store::UploadPart {
            self.parts += 1;
            if self.parts == 2 {
                return Box::pin(async {
                    Err(object_store::Error::Generic {
                        store: "FailingParts",
                        source: "the second part failed".into(),
                    })
                });
            }
            self.inner.put_part(data)
        }

        async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
            self.inner.complete().await
        }

        async fn abort(&mut self) -> object_store::Result<()> {
            self.aborted
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.inner.abort().await
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for FailingParts {
        async fn put_opts(
            &self,
            location: &ObjectPath,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &ObjectPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            Ok(Box::new(FailingUpload {
                inner: self.inner.put_multipart_opts(location, opts).await?,
                parts: 0,
                aborted: Arc::clone(&self.aborted),
            }))
        }

        async fn get_opts(
            &self,
            location: &ObjectPath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<ObjectPath>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectPath>> {
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &ObjectPath,
            to: &ObjectPath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_copy_whose_part_fails_aborts_its_multipart_upload() {
        let in_memory = |store: Arc<dyn ObjectStore>| Store {
            store: Arc::clone(&store),
            local_root: None,
            root_url: "memory:///".to_owned(),
            container: store,
            root_in_container: String::new(),
        };
        let source = in_memory(Arc::new(object_store::memory::InMemory::new()));
        let big = vec![7u8; COPY_PART_BYTES * 2 + 5];
        source
            .store
            .put(&ObjectPath::from("events/big.parquet"), big.into())
            .await
            .expect("put");
        let failing = Arc::new(FailingParts::default());
        let target = in_memory(failing.clone());
        let copied = target.copy_object_from(&source, "events/big.parquet").await;
        assert!(copied.is_err(), "the second part failed: {copied:?}");
        assert_eq!(
            failing.aborted.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the upload was aborted"
        );
        assert!(
            target
                .store
                .head(&ObjectPath::from("events/big.parquet"))
                .await
                .is_err(),
            "no object was left"
        );
    }
}
