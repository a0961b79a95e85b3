//! How the session's events reached the collector, against their own timestamps.
//!
//! The embed sends what it queued at least every 2 s, at most 200 events a request (and on
//! leaving the page at once), so each event arrives seconds after its timestamp whatever the
//! browser's clock says; only a collector that does not answer makes it hold events longer. A
//! recording posted after the fact arrives all at once: its first events minutes "late" by
//! their own clock. The clock's offset from the server's is unknown, so lateness is measured
//! against the session's most promptly delivered events.

use super::Features;
use super::stats::indicator;
use crate::trace::{NO_LAG, TraceEvent};

/// An event this much later than the session's promptest is late (the embed retries a
/// collector that does not answer with a back-off of up to 60 s; 30 s covers its ordinary
/// batching and a few failed tries).
const LATE_MS: i64 = 30_000;
/// The most events the embed puts in one request: a batch of 200 and its `dropped` count.
const EMBED_MAX_BATCH: usize = 201;

pub(super) fn transport(events: &[TraceEvent], f: &mut Features) {
    // Events without a timestamp of their own (not the embed's) say nothing of lateness.
    let lags = || {
        events
            .iter()
            .filter(|e| e.lag_ms != NO_LAG)
            .map(|e| i64::from(e.lag_ms))
    };
    let Some(promptest) = lags().min() else {
        return;
    };
    let late = lags().filter(|lag| lag - promptest > LATE_MS).count();
    f.late_event_fraction = late as f64 / lags().count() as f64;
    // The events of one request share their arrival time (one log record).
    let mut arrivals: Vec<i64> = events
        .iter()
        .filter(|e| e.lag_ms != NO_LAG)
        .map(|e| e.t.saturating_add(i64::from(e.lag_ms)))
        .collect();
    arrivals.sort_unstable();
    let largest = arrivals
        .chunk_by(|a, b| a == b)
        .map(<[i64]>::len)
        .max()
        .unwrap_or(0);
    f.oversized_batch = indicator(largest > EMBED_MAX_BATCH);
}
