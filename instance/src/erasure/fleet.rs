//! What an erasure waits for in the fleet, and the fencing of instances gone silent.
//!
//! Every instance that has not purged its log since loading the session's tombstone holds the
//! erasure up while it is live (seen within its lease, by the catalog's clock): it may still
//! flush the session's batches. One that is not live is fenced off instead, in this order:
//!
//! 1. its epoch in the catalog (`Fleet::fence_instance`): from then on the catalog refuses its
//!    statistics, and a flush's guard, asked after reading the `events` table's newest version,
//!    refuses its commit;
//! 2. a fence commit to the `events` table (an application transaction
//!    `telltale-fence-<instance>` at the epoch), recorded in the catalog once it landed: any
//!    commit of the fenced instance is either before this one, so the rewrite after it sees and
//!    rewrites its file, or after it, so its guard read the fence of step 1 and refused.
//!
//! An instance that stopped cleanly fenced itself in both places as it left.

use catalog::SurveyId;

use super::{AttemptError, DeletionService, Wait, Waiting};

/// The application transaction of a fence of `instance` in the `events` table's log.
fn fence_app_id(instance: &str) -> String {
    format!("telltale-fence-{instance}")
}

impl DeletionService {
    /// `None` once no live instance but this one holds the session in its log, every other
    /// one that may having been fenced off; else what the erasure waits on.
    pub(super) async fn clear_the_fleet(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<Option<Wait>, AttemptError> {
        let lease_ms = i64::try_from(self.instance_lease.as_millis()).unwrap_or(i64::MAX);
        let blockers = self
            .catalog
            .fleet_blockers(survey, reference, lease_ms)
            .await?;
        for member in blockers {
            // This instance purged above (and reported at once); its own row may only lag.
            if member.instance == self.owner && self.purger.is_some() {
                continue;
            }
            if member.live && !member.fenced {
                let reason = match &member.purge_error {
                    Some(error) => {
                        format!("instance {} cannot purge its log: {error}", member.instance)
                    }
                    None => format!(
                        "instance {} has not purged its log of the session yet (last seen {} ms \
                         ago)",
                        member.instance, member.silent_ms
                    ),
                };
                tracing::debug!(instance = member.instance, reason, "erasure waits");
                return Ok(Some(Wait {
                    on: Waiting::Instance(member.instance),
                    reason,
                }));
            }
            if !member.fenced {
                if !self
                    .catalog
                    .fence_instance(&member.instance, member.epoch, lease_ms)
                    .await?
                {
                    // It reported in between: live after all.
                    return Ok(Some(Wait {
                        on: Waiting::Instance(member.instance.clone()),
                        reason: format!(
                            "instance {} reported again; it has not purged its log yet",
                            member.instance
                        ),
                    }));
                }
                series::FLEET_FENCES_TOTAL.get().increment(1);
                tracing::warn!(
                    instance = member.instance,
                    epoch = member.epoch,
                    silent_ms = member.silent_ms,
                    "fenced off an instance silent past its lease: nothing it writes under this \
                     epoch can land; an erasure goes ahead without it"
                );
            }
            if !member.lake_fenced {
                fence_in_lake(
                    &self.lake,
                    self.catalog.as_ref(),
                    &member.instance,
                    member.epoch,
                )
                .await?;
            }
        }
        Ok(None)
    }
}

/// Step 2 of the module docs: a commit to the `events` table after the catalog's fence.
pub(crate) async fn fence_in_lake(
    lake: &lake::Lake,
    catalog: &dyn catalog::Catalog,
    instance: &str,
    epoch: i64,
) -> Result<(), FenceError> {
    let publication = lake
        .table(lake::TableKind::Events)
        .publish(
            lake::Change::Append,
            Vec::new(),
            &[],
            Some((&fence_app_id(instance), epoch)),
        )
        .await?;
    match publication {
        lake::Publication::Published(_) | lake::Publication::AlreadyApplied => {}
        lake::Publication::Uncertain(error) => return Err(error.into()),
        lake::Publication::Conflict | lake::Publication::Refused(_) => {
            return Err(
                lake::LakeError::Refused("the lake refused a fence commit".to_owned()).into(),
            );
        }
    }
    catalog.mark_lake_fenced(instance, epoch).await?;
    Ok(())
}

/// Why a fence could not be committed to the lake or recorded.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
}

impl From<FenceError> for AttemptError {
    fn from(error: FenceError) -> Self {
        match error {
            FenceError::Lake(error) => AttemptError::Lake(error),
            FenceError::Catalog(error) => AttemptError::Catalog(error),
        }
    }
}

/// What `telltale forget-instance` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forgotten {
    /// The instance had left cleanly already: nothing to do.
    AlreadyLeft { epoch: i64 },
    /// Fenced off in the catalog and the lake, and recorded as gone at `epoch`.
    Fenced { epoch: i64, silent_ms: i64 },
}

/// Why an instance could not be forgotten.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    #[error("the catalog knows no instance {0}")]
    Unknown(String),
    #[error(
        "instance {instance} reported {silent_ms} ms ago, within its lease: it is running; stop \
         it (its final flush leaves the fleet) rather than forget it"
    )]
    Live { instance: String, silent_ms: i64 },
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
    #[error("fencing it off: {0}")]
    Fence(#[from] FenceError),
}

/// Records that `instance`, silent past `lease`, is gone with its log (its disk is lost): it is
/// fenced off in the catalog and the lake, as an erasure fences a silent instance, then marked
/// as having left. Runs stop deferring sessions for the events its log held (they are scored on
/// what the lake has), backups without a log stop waiting for it. If it comes back after all,
/// it joins under a new epoch and flushes its log as after any fence.
pub async fn forget_instance(
    catalog: &dyn catalog::Catalog,
    lake: &lake::Lake,
    instance: &str,
    lease: std::time::Duration,
) -> Result<Forgotten, ForgetError> {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let Some((member, left_cleanly)) = catalog
        .fleet_members(lease_ms)
        .await?
        .into_iter()
        .find(|(member, _)| member.instance == instance)
    else {
        return Err(ForgetError::Unknown(instance.to_owned()));
    };
    if left_cleanly {
        return Ok(Forgotten::AlreadyLeft {
            epoch: member.epoch,
        });
    }
    let live = || ForgetError::Live {
        instance: instance.to_owned(),
        silent_ms: member.silent_ms,
    };
    if member.live {
        return Err(live());
    }
    if !member.fenced
        && !catalog
            .fence_instance(instance, member.epoch, lease_ms)
            .await?
    {
        return Err(live());
    }
    if !member.lake_fenced {
        fence_in_lake(lake, catalog, instance, member.epoch).await?;
    }
    catalog.leave_fleet(instance, member.epoch).await?;
    series::FLEET_FENCES_TOTAL.get().increment(1);
    tracing::warn!(
        instance,
        epoch = member.epoch,
        silent_ms = member.silent_ms,
        "instance forgotten: whatever its log held and had not flushed is given up"
    );
    Ok(Forgotten::Fenced {
        epoch: member.epoch,
        silent_ms: member.silent_ms,
    })
}
