//! The writer thread: group commit (every request waiting, one write, one `fdatasync`), segment
//! rolls, and recovery after a failed write or sync.

use std::os::unix::fs::FileExt as _;
use std::time::{Duration, Instant};

use super::*;

/// Segments roll over past this size even when no consumer asks for it.
pub(super) const SEGMENT_TARGET_BYTES: u64 = 64 * 1024 * 1024;

/// A group commit writes at most this many records at once...
pub(super) const MAX_GROUP: usize = 4096;

/// ...and stops adding records past this many bytes, so one group's write and sync stay short.
pub(super) const MAX_GROUP_BYTES: usize = 16 * 1024 * 1024;

/// A group's write and sync taking this long is logged as a warning.
pub(super) const SLOW_SYNC: Duration = Duration::from_millis(50);

pub(super) fn writer_loop(
    receiver: mpsc::Receiver<Request>,
    mut segment: Segment,
    mut next_lsn: u64,
    shared: Arc<Shared>,
    sink: DurableSink,
) {
    let mut buffer = Vec::with_capacity(1024 * 1024);
    let mut group = Vec::with_capacity(MAX_GROUP);
    let mut roll_waiters = Vec::new();
    // Set by a failed write or sync: (bytes of the failed group, the error). The log then
    // accepts nothing until `recover` has cleared what that group may have left and moved to a
    // new segment (fail-stop: after a failed fsync the page cache may hold pages the disk never
    // got, and writing on in the same file would build on them).
    let mut failed: Option<(usize, String)> = None;
    let sync_seconds = series::WAL_SYNC_SECONDS.get();
    let group_records = series::WAL_GROUP_RECORDS.get();
    let write_errors = series::WAL_WRITE_ERRORS_TOTAL.get();
    while let Ok(first) = receiver.recv() {
        let mut group_bytes = first.body_len();
        group.push(first);
        while group.len() < MAX_GROUP && group_bytes < MAX_GROUP_BYTES {
            match receiver.try_recv() {
                Ok(request) => {
                    group_bytes += request.body_len();
                    group.push(request);
                }
                Err(_) => break,
            }
        }
        let taken = group
            .iter()
            .filter(|request| matches!(request, Request::Append { .. }))
            .count();
        shared.queue_depth.decrement(taken as f64);
        // Rolls happen before this group's write: each waiter's records are already durable in
        // the segment being closed.
        let mut appends = Vec::with_capacity(group.len());
        let mut fresh = false;
        for request in group.drain(..) {
            match request {
                Request::Append { append, done } => appends.push((append, done)),
                Request::Roll {
                    fresh: wants_fresh,
                    done,
                } => {
                    fresh |= wants_fresh;
                    roll_waiters.push(done);
                }
            }
        }
        if buffer.capacity() > 4 * MAX_GROUP_BYTES {
            buffer = Vec::with_capacity(1024 * 1024);
        }

        let roll = shared.roll_requested.swap(false, Ordering::AcqRel) || !roll_waiters.is_empty();
        let holds_old_bodies = segment.written > 0 || segment.recycled;
        let mut rolled = Ok(next_lsn);
        if (roll && segment.written > 0)
            || (fresh && holds_old_bodies)
            || segment.written >= SEGMENT_TARGET_BYTES
        {
            match roll_segment(&shared, next_lsn, fresh) {
                Ok(next) => segment = next,
                Err(error) => {
                    tracing::error!(%error, "could not roll the write-ahead log");
                    rolled = Err(Arc::new(error));
                }
            }
        }
        for done in roll_waiters.drain(..) {
            let _ = done.send(rolled.clone());
        }

        if let Some((failed_len, why)) = &failed {
            match recover(&shared, &mut segment, *failed_len, next_lsn) {
                Ok(()) => {
                    tracing::info!("write-ahead log recovered: writing to a new segment");
                    failed = None;
                }
                Err(error) => {
                    tracing::warn!(%error, "write-ahead log still cannot be written");
                    let refused = Arc::new(WalError::FailStopped(why.clone()));
                    for (_, done) in appends {
                        let _ = done.send(Err(Arc::clone(&refused)));
                    }
                    continue;
                }
            }
        }

        buffer.clear();
        let mut records = Vec::with_capacity(appends.len());
        let mut waiters = Vec::with_capacity(appends.len());
        for (append, done) in appends {
            let record = WalRecord {
                lsn: next_lsn,
                received_at: append.received_at,
                survey_id: append.survey_id,
                identifier: append.identifier,
                body: append.body,
            };
            match record.encode_into(&mut buffer) {
                Ok(()) => {
                    next_lsn += 1;
                    records.push(Arc::new(record));
                    waiters.push(done);
                }
                Err(error) => {
                    let _ = done.send(Err(Arc::new(error)));
                }
            }
        }
        if records.is_empty() {
            continue;
        }

        let started = Instant::now();
        let outcome = segment
            .file
            .write_all_at(&buffer, segment.written)
            .and_then(|()| segment.file.sync_data());
        shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        let elapsed = started.elapsed();
        sync_seconds.record(elapsed);
        group_records.record(records.len() as f64);
        if elapsed >= SLOW_SYNC {
            // Every request of the group waited this long: worth an operator's attention (a
            // disk shared with other writers, or a failing one).
            tracing::warn!(
                elapsed_ms = elapsed.as_millis() as u64,
                records = records.len(),
                bytes = buffer.len(),
                "slow write-ahead log sync"
            );
        }
        match outcome {
            Ok(()) => {
                segment.written += buffer.len() as u64;
                shared.last_lsn.store(next_lsn - 1, Ordering::Release);
                sink(&records);
                for (done, record) in waiters.into_iter().zip(records) {
                    let _ = done.send(Ok(record));
                }
            }
            Err(error) => {
                // Nothing of this group is acknowledged, and nothing more is until `recover`
                // has zeroed what this group may have left and moved to a new segment.
                tracing::error!(%error, "write-ahead log append failed; refusing writes until it recovers");
                write_errors.increment(1);
                failed = Some((buffer.len(), error.to_string()));
                let shared_error = Arc::new(WalError::Io(error));
                for done in waiters {
                    let _ = done.send(Err(Arc::clone(&shared_error)));
                }
            }
        }
    }
    // Channel closed: every sender dropped. The file is synced after each group already.
}

/// After a failed write or sync: overwrites the failed group's bytes with zeros (replay stops at
/// zeros, so none of its records, never acknowledged, can come back) and syncs that, then rolls
/// to a fresh segment. Any error leaves the log stopped; the next request tries again.
pub(super) fn recover(
    shared: &Arc<Shared>,
    segment: &mut Segment,
    failed_len: usize,
    next_lsn: u64,
) -> Result<(), WalError> {
    segment
        .file
        .write_all_at(&vec![0; failed_len], segment.written)?;
    segment.file.sync_data()?;
    *segment = roll_segment(shared, next_lsn, true)?;
    Ok(())
}
