//! The object store as the lake lends it out ([`Lake::store`](crate::Lake::store)): reads and
//! listings pass through, every write, copy, rename and delete is refused. Files enter and leave
//! the lake only by [`Table::publish`](crate::Table::publish), so readers (the scorer's scan,
//! `telltale sql`) cannot bypass its undo rule by mistake.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

#[derive(Debug)]
pub(crate) struct ReadOnly {
    inner: Arc<dyn ObjectStore>,
}

impl ReadOnly {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> ReadOnly {
        ReadOnly { inner }
    }
}

fn refused(operation: &str) -> object_store::Error {
    object_store::Error::NotSupported {
        source: format!("{operation}: the lake's files change only through Table::publish").into(),
    }
}

impl std::fmt::Display for ReadOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadOnly({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for ReadOnly {
    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> Result<PutResult> {
        Err(refused("put"))
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(refused("put_multipart"))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        locations.map(|_| Err(refused("delete"))).boxed()
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

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> Result<()> {
        Err(refused("copy"))
    }

    async fn rename_opts(&self, _: &Path, _: &Path, _: RenameOptions) -> Result<()> {
        Err(refused("rename"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn reads_pass_and_writes_are_refused() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("events/a.parquet");
        inner
            .put(&path, Bytes::from_static(b"x").into())
            .await
            .expect("put");
        let store = ReadOnly::new(Arc::clone(&inner));
        let bytes = store.get(&path).await.expect("get").bytes().await;
        assert_eq!(bytes.expect("bytes"), Bytes::from_static(b"x"));
        let put = store.put(&path, Bytes::from_static(b"y").into()).await;
        assert!(matches!(put, Err(object_store::Error::NotSupported { .. })));
        let delete = store.delete(&path).await;
        assert!(matches!(
            delete,
            Err(object_store::Error::NotSupported { .. })
        ));
        assert!(inner.head(&path).await.is_ok(), "the object is still there");
    }
}
