//! A lake under a key prefix of a bucket (`s3://bucket/prefix`).
//!
//! object_store's `PrefixStore` (0.13.2) forgets to strip the prefix from the metadata that
//! `get_opts` returns, and `head` goes through `get_opts`: DataFusion then sees
//! `prefix/events/...` for a file it asked about as `events/...` and leaves the file out of its
//! scan. This wrapper delegates everything to `PrefixStore` and fixes that one answer.

use std::ops::Range;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

#[derive(Debug)]
pub(crate) struct BucketPrefix<T: ObjectStore> {
    prefix: Path,
    inner: PrefixStore<T>,
}

impl<T: ObjectStore> BucketPrefix<T> {
    pub(crate) fn new(store: T, prefix: &str) -> BucketPrefix<T> {
        BucketPrefix {
            prefix: Path::from(prefix),
            inner: PrefixStore::new(store, prefix),
        }
    }

    fn strip(&self, location: Path) -> Path {
        if let Some(suffix) = location.prefix_match(&self.prefix) {
            return suffix.collect();
        }
        location
    }
}

impl<T: ObjectStore> std::fmt::Display for BucketPrefix<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BucketPrefix({})", self.inner)
    }
}

#[async_trait::async_trait]
impl<T: ObjectStore> ObjectStore for BucketPrefix<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let mut result = self.inner.get_opts(location, options).await?;
        result.meta.location = self.strip(result.meta.location);
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn head_reports_the_path_it_was_asked_about() {
        let store = BucketPrefix::new(InMemory::new(), "tenant/lake");
        let path = Path::from("events/a.parquet");
        store
            .put(&path, Bytes::from_static(b"x").into())
            .await
            .expect("put");
        assert_eq!(store.head(&path).await.expect("head").location, path);
        let get = store.get(&path).await.expect("get");
        assert_eq!(get.meta.location, path);
    }
}
