//! Publishing: the one way a file enters or leaves a table. Every writer (a flush, a scoring
//! run's step, an erasure's or a compaction's rewrite, a scoring run taking back an earlier
//! attempt's files) goes through [`Table::publish`], in the manner of delta-rs's staged commit
//! (prepared actions, one commit, post-commit work):
//!
//! 1. **Prepare.** A change with an application transaction whose version the log already holds
//!    uploads nothing: its files may be live under the very names it would write.
//! 2. **Upload.** The new files are written whole and durably, side by side.
//! 3. **Commit.** One Delta commit of the adds, the removes and the transaction
//!    ([`Table::commit`], which retries the races it need not lose).
//! 4. **Undo or post-commit.** The undo rule lives here once: an upload no commit names is
//!    deleted as soon as the writer knows none will (a failed upload, a conflict, a commit that
//!    the log shows did not land); when the log cannot say, the uploads stay (the writer's next
//!    attempt or the vacuum decides) and the outcome is [`Publication::Uncertain`]. After an
//!    erasure's commit the files it replaced are deleted at once: they hold the erased rows.

use crate::{Change, Committed, LakeError, NewFile};

use super::{CommitGuard, Refusal, Table};

/// A file to publish: its bytes and its record in the log.
pub type Upload = (Vec<u8>, NewFile);

/// The outcome of [`Table::publish`]. An `Err` from it means nothing was committed (and the
/// uploads were taken back).
#[derive(Debug)]
pub enum Publication {
    /// Committed: as this version, or `None` when the commit's answer was lost but the log
    /// shows it landed.
    Published(Option<u64>),
    /// Nothing committed: a file to remove was no longer live (another rewrite was first). The
    /// uploads were deleted.
    Conflict,
    /// Nothing committed: the application transaction's version was already reached.
    AlreadyApplied,
    /// The commit failed and the log could not be read to tell whether it landed. The uploads
    /// are left: whoever tries again asks the log first.
    Uncertain(LakeError),
    /// Nothing committed: the writer's [`CommitGuard`] refused, after reading the newest
    /// version. The uploads were deleted.
    Refused(Refusal),
}

impl Table {
    /// Publishes `files` and the removal of `removed` (paths from the lake's root) as one commit
    /// of `change`, with the application transaction `transaction` if given (see the module
    /// docs for the steps and the undo rule).
    ///
    /// An `Err` after the commit landed is possible only for an erasure whose replaced files
    /// could not all be deleted: the erasure is then not done, and its retry sweeps them.
    pub async fn publish(
        &self,
        change: Change,
        files: Vec<Upload>,
        removed: &[String],
        transaction: Option<(&str, i64)>,
    ) -> Result<Publication, LakeError> {
        self.publish_guarded(change, files, removed, transaction, None)
            .await
    }

    /// [`Table::publish`] with a [`CommitGuard`] asked before each commit attempt, after the
    /// uploads: a writer whose right to write lapsed while its uploads hung commits nothing
    /// ([`Publication::Refused`]).
    pub async fn publish_guarded(
        &self,
        change: Change,
        files: Vec<Upload>,
        removed: &[String],
        transaction: Option<(&str, i64)>,
        guard: Option<&dyn CommitGuard>,
    ) -> Result<Publication, LakeError> {
        if let Some((app_id, version)) = transaction {
            let known = self.app_versions().get(app_id).copied();
            let done = match known {
                Some(done) => Some(done),
                None => self.app_version(app_id).await?,
            };
            if done.is_some_and(|done| done >= version) {
                return Ok(Publication::AlreadyApplied);
            }
        }
        let added: Vec<NewFile> = files.iter().map(|(_, file)| file.clone()).collect();
        let uploads = files
            .into_iter()
            .map(|(bytes, file)| async move { self.store.put_durable(&file.path, bytes).await });
        let uploaded = futures::future::join_all(uploads).await;
        if let Some(error) = uploaded.into_iter().find_map(Result::err) {
            self.take_back(&added).await;
            return Err(error);
        }
        crash_point(change, "uploaded").await;
        let committed = self
            .commit_guarded(change, &added, removed, transaction, guard)
            .await;
        let version = match committed {
            Ok(Ok(Committed::Version(version))) => Some(version),
            Ok(Err(refusal)) => {
                self.take_back(&added).await;
                return Ok(Publication::Refused(refusal));
            }
            Ok(Ok(Committed::Conflict)) => {
                self.take_back(&added).await;
                return Ok(Publication::Conflict);
            }
            Ok(Ok(Committed::AlreadyApplied)) => {
                // Another attempt of the same writer committed in between (one app id has one
                // writer, so this is a replay): its files may bear these names.
                return Ok(Publication::AlreadyApplied);
            }
            Err(error) => match self.landed(&added, removed, transaction).await {
                Ok(true) => {
                    tracing::warn!(table = self.kind.as_str(), %error, "a commit reported an error but landed");
                    None
                }
                Ok(false) => {
                    self.take_back(&added).await;
                    return Err(error);
                }
                Err(_) => return Ok(Publication::Uncertain(error)),
            },
        };
        crash_point(change, "swapped").await;
        if change == Change::Erase {
            for path in removed {
                self.store.delete(path).await?;
            }
        }
        Ok(Publication::Published(version))
    }

    /// Whether a commit whose answer was an error is in the log all the same, read afresh.
    async fn landed(
        &self,
        added: &[NewFile],
        removed: &[String],
        transaction: Option<(&str, i64)>,
    ) -> Result<bool, LakeError> {
        if let Some((app_id, version)) = transaction {
            return Ok(self
                .app_version(app_id)
                .await?
                .is_some_and(|done| done >= version));
        }
        let live = self.live_paths(None).await?;
        Ok(if added.is_empty() {
            // A removal only: done once none of its files is live, whoever removed them.
            removed.iter().all(|path| !live.contains(path))
        } else {
            added.iter().all(|file| live.contains(&file.path))
        })
    }

    /// Deletes uploads no commit names, as far as it can: one it cannot delete is left to the
    /// writer's next attempt or the vacuum.
    async fn take_back(&self, files: &[NewFile]) {
        for file in files {
            if let Err(error) = self.store.delete(&file.path).await {
                tracing::warn!(path = file.path, %error, "could not remove an uncommitted upload");
            }
        }
    }

    /// Deletes the objects of the folder `folder` (a path from the lake's root inside this
    /// table) that no live file names and that `uncommitted` picks by path: uploads of a
    /// writer that died before its commit. The table's log is never touched. Returns the
    /// paths deleted.
    pub async fn delete_uncommitted(
        &self,
        folder: &str,
        uncommitted: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>, LakeError> {
        use futures::TryStreamExt;
        let live = self.live_paths(None).await?;
        let objects: Vec<object_store::ObjectMeta> = self
            .store
            .store()
            .list(Some(&object_store::path::Path::from(folder)))
            .try_collect()
            .await?;
        let mut deleted = Vec::new();
        for object in objects {
            let path = object.location.to_string();
            if !path.ends_with(".parquet")
                || path.contains("/_delta_log/")
                || live.contains(&path)
                || !uncommitted(&path)
            {
                continue;
            }
            self.store.delete(&path).await?;
            deleted.push(path);
        }
        Ok(deleted)
    }
}

/// A place where a crash test stops a rewrite (an erasure's or a compaction's publication):
/// with the `failpoints` feature and the fail point `telltale-rewrite-<point>` set to `return`
/// (`FAILPOINTS`, read by the binary), it logs that it got there and waits a minute, long
/// enough for the test to kill the process. Without the feature this is nothing, and the binary
/// holds no pause point name.
#[cfg(feature = "failpoints")]
async fn crash_point(change: Change, point: &str) {
    if change != Change::Append
        && fail::eval(&format!("telltale-rewrite-{point}"), |_| ()).is_some()
    {
        tracing::warn!(point, "rewrite paused for a crash test");
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    }
}

#[cfg(not(feature = "failpoints"))]
async fn crash_point(_change: Change, _point: &str) {}

#[cfg(test)]
mod tests;
