//! The ingestor as a member of the fleet: its epoch (joined at start, joined again after the
//! fleet fenced it off), the guard every flush commit passes, and the answers to the flushes a
//! scoring run on another instance asks for.
//!
//! Why a flush commit is guarded: an instance whose uploads hang (a stalled network path to the
//! lake) stops reporting, and once its lease lapses an erasure fences its epoch off and goes
//! ahead without it. When the uploads land, the commit they were for must not: the guard, asked
//! after the flush read the table's newest version, finds the epoch fenced (`catalog::Fleet`'s
//! docs give the order that makes this sound). And since an instance may have joined again in
//! between, the guard also loads the newest tombstones: a flush built before one of its surveys
//! gained a tombstone is built again rather than committed.

use std::collections::BTreeSet;

use super::event_files::Written;
use super::*;

/// How often an instance looks for a flush asked of it by a run elsewhere in the fleet.
pub(super) const FLUSH_REQUEST_POLL: Duration = Duration::from_millis(100);

/// Why a flush's guard refused its commit.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    #[error("this instance's epoch {0} was fenced off while the flush was in flight")]
    Fenced(i64),
    #[error("a session of the flush was deleted while it was in flight")]
    Stale,
    #[error("checking the flush's fence failed: {0}")]
    Catalog(#[source] catalog::Error),
}

/// Checks a flush at commit time: its epoch still unfenced, and none of the sessions it writes
/// deleted since it was built.
pub(super) struct FlushGuard<'a> {
    pub(super) ingestor: &'a Ingestor,
    pub(super) epoch: i64,
    pub(super) surveys: BTreeSet<SurveyId>,
    /// [`Ingestor::tombstone_generation`] of `surveys` when the flush was built.
    pub(super) generation: usize,
    /// The sessions its files hold.
    pub(super) written: Written,
}

#[async_trait::async_trait]
impl lake::CommitGuard for FlushGuard<'_> {
    async fn admit(&self) -> Result<(), lake::Refusal> {
        let inner = &self.ingestor.inner;
        match inner
            .catalog
            .check_epoch(&inner.config.instance_id, self.epoch)
            .await
        {
            Ok(()) => {}
            Err(catalog::Error::Fenced { epoch, .. }) => {
                return Err(Box::new(Refused::Fenced(epoch)));
            }
            Err(error) => return Err(Box::new(Refused::Catalog(error))),
        }
        match self.ingestor.refresh_tombstones().await {
            Ok(()) => {}
            Err(IngestError::Catalog(error)) => return Err(Box::new(Refused::Catalog(error))),
            // Tombstones not loaded: the flush cannot know what it may write.
            Err(other) => return Err(Box::new(other)),
        }
        // Only when one of its surveys gained a tombstone does the flush look at its sessions:
        // a survey whose deletions keep coming must not starve its flushes.
        if self.ingestor.tombstone_generation(self.surveys.iter()) != self.generation {
            let tombstones = self.ingestor.inner.tombstones.read();
            if self.written.iter().any(|(survey, identifier, reference)| {
                tombstones.erases(survey, identifier, reference.as_deref())
            }) {
                return Err(Box::new(Refused::Stale));
            }
        }
        Ok(())
    }
}

impl Ingestor {
    /// The epoch this instance writes under.
    pub fn epoch(&self) -> i64 {
        self.inner.epoch.load(Ordering::Acquire)
    }

    /// After a write of epoch `refused` was refused as fenced off: loads the tombstones an
    /// erasure went ahead with, then joins the fleet again under a new epoch (once, however
    /// many writers were refused). Returns the epoch to write under.
    pub async fn rejoin(&self, refused: i64) -> Result<i64, IngestError> {
        let _guard = self.inner.rejoin_lock.lock().await;
        let current = self.epoch();
        if current != refused {
            return Ok(current);
        }
        let epoch = self
            .inner
            .catalog
            .join_fleet(&self.inner.config.instance_id)
            .await?;
        // Joined after the fence, which came after every tombstone the erasure acted on: what
        // this loads now covers them, before anything is written under the new epoch.
        self.refresh_tombstones().await?;
        self.inner.epoch.store(epoch, Ordering::Release);
        series::FLEET_REJOINS_TOTAL.get().increment(1);
        tracing::warn!(
            refused,
            epoch,
            "this instance was fenced off by the fleet (an erasure went ahead without it); \
             joined again"
        );
        Ok(epoch)
    }

    /// A catalog error of a write under `epoch`: when it says the epoch was fenced off, joins
    /// again (so the caller's retry writes under the new epoch).
    pub(super) async fn rejoin_if_fenced(&self, error: &catalog::Error) {
        if let catalog::Error::Fenced { epoch, .. } = error
            && let Err(rejoin) = self.rejoin(*epoch).await
        {
            tracing::warn!(error = %rejoin, "could not join the fleet again; will retry");
        }
    }

    /// A count that changes whenever one of `surveys` gains a tombstone (of a reference or of
    /// an identifier): a flush built at one count is stale at another.
    pub(super) fn tombstone_generation<'a>(
        &self,
        surveys: impl Iterator<Item = &'a SurveyId>,
    ) -> usize {
        let tombstones = self.inner.tombstones.read();
        surveys
            .map(|survey| {
                tombstones.references.get(survey).map_or(0, HashSet::len)
                    + tombstones.identifiers.get(survey).map_or(0, HashSet::len)
            })
            .sum()
    }

    /// Answers a flush a run elsewhere asked of this instance, if one waits: makes everything
    /// acknowledged so far visible, then says so. A no-op on an instance nobody asks.
    pub(super) async fn answer_flush_request(&self) -> Result<(), IngestError> {
        let instance = &self.inner.config.instance_id;
        let (token, answered) = self.inner.catalog.flush_wanted(instance).await?;
        if answered {
            return Ok(());
        }
        self.make_visible().await?;
        self.inner
            .catalog
            .flush_answered(instance, self.epoch(), token)
            .await?;
        Ok(())
    }

    /// Stopped cleanly with everything flushed: the instance fences itself, so no erasure
    /// waits out its lease.
    pub(super) async fn leave_fleet(&self) {
        let instance = &self.inner.config.instance_id;
        if let Err(error) = self.inner.catalog.leave_fleet(instance, self.epoch()).await {
            tracing::warn!(%error, "could not record that this instance left the fleet; erasures wait out its lease");
        }
    }
}
