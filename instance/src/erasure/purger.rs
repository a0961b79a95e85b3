//! A serving instance's side of fleet-wide erasure: it purges its write-ahead log whenever it
//! has loaded tombstones newer than its last purge, and reports to the catalog that it is alive,
//! which tombstones its last purge covered, and why its last purge failed if it did.

use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog::Catalog;
use ingest::{IngestError, Ingestor};

/// A serving instance reports itself alive at least this many times a lease, and at once when
/// its `purged_through` (or its purge's failure) changes. Not every check: on SQLite each write
/// makes every pooled connection drop its page cache and its map of the file at its next read,
/// and a report a second kept lookups on a million-session survey cold (benches/README.md).
pub(super) const REPORTS_PER_LEASE: u32 = 4;

/// See the module docs. A deletion's erasure waits until every instance seen within the
/// instance lease has covered its tombstone, or fences off the ones that were not seen.
pub struct LogPurger {
    pub(super) catalog: Arc<dyn Catalog>,
    pub(super) ingestor: Ingestor,
    pub(super) instance: String,
    /// The longest time between two reports (a fraction of the instance lease).
    pub(super) refresh: Duration,
    pub(super) purge: tokio::sync::Mutex<PurgeState>,
}

#[derive(Default)]
pub(super) struct PurgeState {
    /// The newest tombstone id loaded before the last completed purge.
    purged_through: i64,
    /// Why the last purge failed, if it did.
    error: Option<String>,
    /// The last report that reached the catalog: when, and what it said.
    reported: Option<Report>,
}

/// What a report said, and when it reached the catalog.
#[derive(Clone, PartialEq)]
struct Report {
    at: Instant,
    purged_through: i64,
    error: Option<String>,
}

impl LogPurger {
    /// Loads new tombstones; purges the log if any arrived since the last purge; reports.
    /// Returns the tombstone id the log is now purged through.
    pub async fn purge_if_behind(&self) -> Result<i64, IngestError> {
        let mut state = self.purge.lock().await;
        self.ingestor.refresh_tombstones().await?;
        let loaded = self.ingestor.loaded_tombstone_id();
        let result = if loaded > state.purged_through {
            purge_fails_for_a_test()
                .and(self.ingestor.purge_log().await)
                .map(|()| {
                    state.purged_through = loaded;
                })
        } else {
            Ok(())
        };
        state.error = result.as_ref().err().map(ToString::to_string);
        // Reported even when the purge failed: the instance is alive, erasures must keep
        // waiting for it rather than fence it off, and they show why they wait.
        if report_due(
            state.reported.as_ref(),
            state.purged_through,
            state.error.as_deref(),
            self.refresh,
        ) {
            let epoch = self.ingestor.epoch();
            match self
                .catalog
                .report_instance(
                    &self.instance,
                    epoch,
                    state.purged_through,
                    state.error.as_deref(),
                )
                .await
            {
                Ok(()) => {
                    state.reported = Some(Report {
                        at: Instant::now(),
                        purged_through: state.purged_through,
                        error: state.error.clone(),
                    });
                }
                Err(error @ catalog::Error::Fenced { .. }) => {
                    // Fenced off while it could not report (stalled): erasures went ahead
                    // without this log. Join again (loading their tombstones, which the next
                    // check purges the log of) and report under the new epoch.
                    self.ingestor.rejoin(epoch).await?;
                    state.reported = None;
                    return Err(error.into());
                }
                Err(error) => return Err(error.into()),
            }
        }
        result.map(|()| state.purged_through)
    }
}

/// With the `failpoints` feature, `FAILPOINTS=telltale-purge=return` makes every purge fail as
/// a log whose consumers cannot catch up would (tests/it/fleet_guarantees.rs).
fn purge_fails_for_a_test() -> Result<(), IngestError> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("telltale-purge", |_| Err(IngestError::LogNotPurged));
    Ok(())
}

/// Whether a report is owed: none reached the catalog yet, the purge moved or its failure
/// changed since the last, or the last is `refresh` old.
fn report_due(
    reported: Option<&Report>,
    purged_through: i64,
    error: Option<&str>,
    refresh: Duration,
) -> bool {
    match reported {
        None => true,
        Some(last) => {
            last.purged_through != purged_through
                || last.error.as_deref() != error
                || last.at.elapsed() >= refresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_reports_when_its_purge_moves_or_fails_and_a_quarter_lease_after_the_last() {
        let refresh = Duration::from_secs(30) / REPORTS_PER_LEASE;
        let report = |at: Instant, purged_through: i64, error: Option<&str>| Report {
            at,
            purged_through,
            error: error.map(str::to_owned),
        };
        let now = Instant::now();
        assert!(report_due(None, 0, None, refresh), "the first report");
        let last = report(now, 7, None);
        assert!(!report_due(Some(&last), 7, None, refresh), "nothing new");
        assert!(report_due(Some(&last), 8, None, refresh), "a purge moved");
        assert!(
            report_due(Some(&last), 7, Some("disk full"), refresh),
            "a purge failed"
        );
        let failing = report(now, 7, Some("disk full"));
        assert!(
            !report_due(Some(&failing), 7, Some("disk full"), refresh),
            "same failure"
        );
        let earlier = now
            .checked_sub(refresh)
            .expect("a monotonic clock this old");
        assert!(
            report_due(Some(&report(earlier, 7, None)), 7, None, refresh),
            "the refresh"
        );
    }
}
