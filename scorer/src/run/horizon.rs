//! The fleet's flush horizon: a run scores a session only on all the events the fleet
//! acknowledged for it.
//!
//! A session's batches may sit in the log of any instance of a fleet (its statistics reach the
//! catalog within 200 ms, its events the lake only at that instance's next flush). So before it
//! plans, a run asks every other live instance to make what it acknowledged visible and waits
//! for their answers, bounded by [`ScoringSettings::fleet_flush_wait`]. Whatever still misses
//! then (an instance that did not answer in time: stalled, partitioned, slow to flush) is caught
//! per session: a session whose scan finds fewer events than the catalog counted for it is not
//! scored but deferred, and counted so on the run. The next run that is not forced scores it
//! (it has no score, or a score computed from fewer events than it has now).
//!
//! Deferral is bounded by who could still deliver: an instance that did not answer the flush,
//! or one that stopped without leaving cleanly (its log is replayed when it starts again). When
//! there is none, the missing events can never arrive, and a session is scored on what the lake
//! holds, with a warning, rather than deferred by every run forever.
//!
//! [`ScoringSettings::fleet_flush_wait`]: super::ScoringSettings::fleet_flush_wait

use std::time::{Duration, Instant};

use super::{Scorer, Stop};

/// How often a run looks for the fleet's answers while it waits.
const POLL: Duration = Duration::from_millis(50);

impl Scorer {
    /// Asks the fleet's other live instances to flush and waits for them, bounded. Returns
    /// the instances that had not answered when the wait ended.
    pub(super) async fn flush_fleet(&self) -> Result<Vec<String>, Stop> {
        let lease_ms = i64::try_from(self.settings.instance_lease.as_millis()).unwrap_or(i64::MAX);
        let request = self
            .catalog
            .request_fleet_flush(&self.owner, lease_ms)
            .await?;
        if request.asked.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + self.settings.fleet_flush_wait;
        loop {
            let pending = self
                .catalog
                .fleet_flush_pending(request.token, lease_ms)
                .await?;
            if pending.is_empty() {
                return Ok(pending);
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    ?pending,
                    wait_ms = self.settings.fleet_flush_wait.as_millis() as u64,
                    "instances did not flush for a scoring run in time: sessions whose events \
                     they hold are deferred"
                );
                return Ok(pending);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Scorer {
    /// The instances whose logs may still hold events the fleet acknowledged: `silent` (they
    /// did not answer this run's flush) and those that stopped without leaving cleanly. Empty:
    /// what the lake holds now is all any session will ever have.
    pub(super) async fn may_still_deliver(&self, silent: &[String]) -> Result<Vec<String>, Stop> {
        let lease_ms = i64::try_from(self.settings.instance_lease.as_millis()).unwrap_or(i64::MAX);
        let mut instances = silent.to_vec();
        for (member, left_cleanly) in self.catalog.fleet_members(lease_ms).await? {
            if !member.live && !left_cleanly && member.instance != self.owner {
                instances.push(member.instance);
            }
        }
        instances.sort();
        instances.dedup();
        Ok(instances)
    }
}

/// Why a run deferred `count` sessions, for its record; `silent` are the instances that may
/// still deliver their events (they did not answer its flush, or stopped without leaving).
pub(super) fn deferred_reason(count: u64, silent: &[String]) -> String {
    let sessions = if count == 1 {
        "1 session has".to_owned()
    } else {
        format!("{count} sessions have")
    };
    let mut reason = format!(
        "{sessions} acknowledged events that were not in the lake yet (another instance's log \
         holds them); a later run scores them on all their events"
    );
    if !silent.is_empty() {
        reason.push_str(&format!(
            "; instances that have not flushed them: {}",
            silent.join(", ")
        ));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferral_says_how_many_and_who_did_not_answer() {
        assert_eq!(
            deferred_reason(1, &[]),
            "1 session has acknowledged events that were not in the lake yet (another \
             instance's log holds them); a later run scores them on all their events"
        );
        assert!(deferred_reason(3, &["b".to_owned()]).starts_with("3 sessions have"));
        assert!(
            deferred_reason(3, &["b".to_owned(), "c".to_owned()])
                .ends_with("instances that have not flushed them: b, c")
        );
    }
}
