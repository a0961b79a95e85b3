//! The write-ahead log: every accepted batch is appended and fsync'd before the collector
//! answers.
//!
//! One writer thread owns the open segment. Requests queue on a channel; the thread drains every
//! request waiting at that moment, writes them with one `write`, calls `fdatasync` once and then
//! wakes all of them (group commit), so concurrent requests share one disk flush.
//!
//! On disk the log is a directory of segments named by the first sequence number they may hold
//! (`00000000000000000001.wal`). A record is
//!
//! ```text
//! u32 payload length | u32 CRC-32 of payload | payload
//! payload = u64 lsn | i64 received_at (Unix ms) | u8 survey id length | survey id
//!         | u16 identifier length | identifier | body (the request body, as received)
//! ```
//!
//! all little-endian. Replay stops at the first record whose length or checksum does not hold
//! (a write torn by a crash) and cuts the segment there. Segments are deleted once every consumer
//! has committed past their last record.
//!
//! The next segment is created and synced ahead of time by a helper thread (`next.wal.spare`),
//! so rolling over inside the writer is a rename, not a file and a directory fsync that every
//! request waiting on the group would wait for.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use catalog::SurveyId;
use tokio::sync::oneshot;

const HEADER_LEN: usize = 8;
/// Segments roll over past this size even when no consumer asks for it.
const SEGMENT_TARGET_BYTES: u64 = 64 * 1024 * 1024;
/// A group commit writes at most this many records at once...
const MAX_GROUP: usize = 4096;
/// ...and stops adding records past this many bytes, so one group's write and sync stay short.
const MAX_GROUP_BYTES: usize = 16 * 1024 * 1024;
/// A group's write and sync taking this long is logged as a warning.
const SLOW_SYNC: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("write-ahead log i/o error: {0}")]
    Io(#[from] io::Error),
    #[error("write-ahead log is shut down")]
    Closed,
    #[error("write-ahead log record is too large")]
    RecordTooLarge,
    #[error("write-ahead log {0} is in use by another process (a running server or drain)")]
    Locked(PathBuf),
}

/// One accepted batch, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    pub lsn: u64,
    pub received_at: i64,
    pub survey_id: SurveyId,
    pub identifier: String,
    pub body: Bytes,
}

impl WalRecord {
    fn encoded_len(&self) -> usize {
        HEADER_LEN
            + 8
            + 8
            + 1
            + self.survey_id.as_str().len()
            + 2
            + self.identifier.len()
            + self.body.len()
    }

    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), WalError> {
        let survey = self.survey_id.as_str().as_bytes();
        let identifier = self.identifier.as_bytes();
        let survey_len = u8::try_from(survey.len()).map_err(|_| WalError::RecordTooLarge)?;
        let identifier_len =
            u16::try_from(identifier.len()).map_err(|_| WalError::RecordTooLarge)?;
        let payload_len = self.encoded_len() - HEADER_LEN;
        let payload_len = u32::try_from(payload_len).map_err(|_| WalError::RecordTooLarge)?;
        let start = out.len();
        out.extend_from_slice(&payload_len.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.lsn.to_le_bytes());
        out.extend_from_slice(&self.received_at.to_le_bytes());
        out.push(survey_len);
        out.extend_from_slice(survey);
        out.extend_from_slice(&identifier_len.to_le_bytes());
        out.extend_from_slice(identifier);
        out.extend_from_slice(&self.body);
        let crc = crc32fast::hash(&out[start + HEADER_LEN..]);
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }

    /// Decodes one payload; `None` when it is not a well-formed record.
    fn decode(payload: &[u8]) -> Option<Self> {
        let mut cursor = payload;
        let lsn = u64::from_le_bytes(take(&mut cursor, 8)?.try_into().ok()?);
        let received_at = i64::from_le_bytes(take(&mut cursor, 8)?.try_into().ok()?);
        let survey_len = *take(&mut cursor, 1)?.first()? as usize;
        let survey = std::str::from_utf8(take(&mut cursor, survey_len)?).ok()?;
        let identifier_len = u16::from_le_bytes(take(&mut cursor, 2)?.try_into().ok()?) as usize;
        let identifier = std::str::from_utf8(take(&mut cursor, identifier_len)?).ok()?;
        Some(WalRecord {
            lsn,
            received_at,
            survey_id: SurveyId::parse(survey)?,
            identifier: identifier.to_owned(),
            body: Bytes::copy_from_slice(cursor),
        })
    }
}

fn take<'a>(cursor: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    if cursor.len() < len {
        return None;
    }
    let (head, tail) = cursor.split_at(len);
    *cursor = tail;
    Some(head)
}

/// A batch to append; the log assigns its sequence number.
#[derive(Debug)]
pub struct Append {
    pub received_at: i64,
    pub survey_id: SurveyId,
    pub identifier: String,
    pub body: Bytes,
}

enum Request {
    Append {
        append: Append,
        done: oneshot::Sender<Result<Arc<WalRecord>, Arc<WalError>>>,
    },
    /// Start a new segment now, even when nothing else is written: erasure needs every record
    /// logged so far out of the open segment, so that its file can be deleted.
    Roll {
        done: oneshot::Sender<Result<(), Arc<WalError>>>,
    },
}

impl Request {
    fn body_len(&self) -> usize {
        match self {
            Request::Append { append, .. } => append.body.len(),
            Request::Roll { .. } => 0,
        }
    }
}

/// Called by the writer thread with each durable group, before the appenders are woken.
pub type DurableSink = Box<dyn Fn(&[Arc<WalRecord>]) + Send + 'static>;

/// Handle to the log. Cloning shares the writer thread.
#[derive(Clone)]
pub struct Wal {
    sender: mpsc::SyncSender<Request>,
    shared: Arc<Shared>,
    /// An exclusive lock on `LOCK` in the log's folder, held while this handle lives: two
    /// processes appending to, replaying or truncating one log would duplicate or lose records.
    /// Clones share it; it is released when the last one is dropped.
    _lock: Arc<File>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.shared.dir)
            .finish()
    }
}

struct Shared {
    dir: PathBuf,
    roll_requested: AtomicBool,
    last_lsn: AtomicU64,
    fsyncs: AtomicU64,
    /// The next segment, created and synced (with its directory) ahead of time by a helper
    /// thread, so a roll inside the writer is a rename rather than two fsyncs that every waiting
    /// request would wait for.
    spare: parking_lot::Mutex<Option<File>>,
}

/// Name of the pre-created next segment until a roll renames it to its first sequence number.
/// Replay adopts a spare that holds records (a roll whose rename a power loss took back).
const SPARE_NAME: &str = "next.wal.spare";

/// What was found in the log when it was opened.
#[derive(Debug, Default)]
pub struct Recovered {
    pub records: Vec<WalRecord>,
    /// Bytes cut from the end of the last segment (a torn write).
    pub truncated_bytes: u64,
}

impl Wal {
    /// Opens the log in `dir`, replays what it holds and starts the writer thread. Replayed
    /// records are returned, not passed to `sink`; new appends go to `sink` once durable.
    pub fn open(dir: &Path, sink: DurableSink) -> Result<(Wal, Recovered), WalError> {
        if !dir.exists() {
            fs::create_dir_all(dir)?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let lock = lock_dir(dir)?;
        adopt_spare(dir)?;
        let recovered = replay(dir)?;
        // Continue after both the last record and the highest segment name: a segment created
        // after a failed write may be empty, and numbering must never go back below it (the
        // active segment must sort last, and sequence numbers must never repeat).
        let next_lsn = recovered
            .records
            .last()
            .map_or(1, |record| record.lsn + 1)
            .max(first_lsn_floor(dir));
        let segment = Segment::create(dir, next_lsn)?;
        let shared = Arc::new(Shared {
            dir: dir.to_owned(),
            roll_requested: AtomicBool::new(false),
            last_lsn: AtomicU64::new(next_lsn - 1),
            fsyncs: AtomicU64::new(0),
            spare: parking_lot::Mutex::new(None),
        });
        prepare_spare(Arc::clone(&shared));
        // Bounded: when the disk cannot keep up, requests wait here instead of piling up.
        let (sender, receiver) = mpsc::sync_channel::<Request>(16 * 1024);
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("wal-writer".to_owned())
            .spawn(move || writer_loop(receiver, segment, next_lsn, thread_shared, sink))?;
        Ok((
            Wal {
                sender,
                shared,
                _lock: Arc::new(lock),
            },
            recovered,
        ))
    }

    /// Appends a batch; resolves once it is on disk.
    pub async fn append(&self, append: Append) -> Result<Arc<WalRecord>, Arc<WalError>> {
        let (done, wait) = oneshot::channel();
        let sender = self.sender.clone();
        // `send` blocks only when the queue is full, which is backpressure we want to honour
        // without stalling a runtime worker.
        match sender.try_send(Request::Append { append, done }) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(request)) => {
                tokio::task::spawn_blocking(move || sender.send(request))
                    .await
                    .map_err(|_| Arc::new(WalError::Closed))?
                    .map_err(|_| Arc::new(WalError::Closed))?;
            }
            Err(mpsc::TrySendError::Disconnected(_)) => return Err(Arc::new(WalError::Closed)),
        }
        wait.await.map_err(|_| Arc::new(WalError::Closed))?
    }

    /// Asks the writer to start a new segment before its next write, so that consumed segments
    /// can be deleted.
    pub fn request_roll(&self) {
        self.shared.roll_requested.store(true, Ordering::Release);
    }

    /// Closes the open segment now (when it holds records) and starts a new one, so that every
    /// record logged before this call sits in a closed segment that truncation can delete.
    pub async fn roll_now(&self) -> Result<(), Arc<WalError>> {
        let (done, wait) = oneshot::channel();
        let sender = self.sender.clone();
        tokio::task::spawn_blocking(move || sender.send(Request::Roll { done }))
            .await
            .map_err(|_| Arc::new(WalError::Closed))?
            .map_err(|_| Arc::new(WalError::Closed))?;
        wait.await.map_err(|_| Arc::new(WalError::Closed))?
    }

    /// The highest sequence number handed out so far.
    pub fn last_lsn(&self) -> u64 {
        self.shared.last_lsn.load(Ordering::Acquire)
    }

    /// How many `fdatasync` calls the writer has made (for metrics and tests of group commit).
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }

    /// Deletes every segment all of whose records have `lsn <= through_lsn`. The segment being
    /// written is never deleted.
    pub fn truncate_through(&self, through_lsn: u64) -> Result<usize, WalError> {
        let segments = list_segments(&self.shared.dir)?;
        let mut deleted = 0;
        for pair in segments.windows(2) {
            let (_, path) = &pair[0];
            let (next_first, _) = pair[1];
            if next_first.saturating_sub(1) <= through_lsn {
                // Two consumers may truncate at once; a segment already gone is fine.
                match fs::remove_file(path) {
                    Ok(()) => deleted += 1,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        if deleted > 0 {
            sync_dir(&self.shared.dir)?;
        }
        Ok(deleted)
    }
}

impl Wal {
    /// Whether a closed segment still holds a record numbered `lsn` or lower (truncation kept
    /// it because a consumer is behind). The open segment is not counted.
    pub fn retains_through(&self, lsn: u64) -> Result<bool, WalError> {
        let segments = list_segments(&self.shared.dir)?;
        let closed = &segments[..segments.len().saturating_sub(1)];
        Ok(closed.iter().any(|(first, _)| *first <= lsn))
    }
}

/// When the log is empty (a fresh start or everything truncated), numbering continues after the
/// highest segment name so sequence numbers never repeat.
fn first_lsn_floor(dir: &Path) -> u64 {
    list_segments(dir)
        .ok()
        .and_then(|segments| segments.last().map(|(first, _)| *first))
        .unwrap_or(1)
        .max(1)
}

struct Segment {
    file: File,
    written: u64,
}

impl Segment {
    fn create(dir: &Path, first_lsn: u64) -> Result<Segment, WalError> {
        let path = dir.join(format!("{first_lsn:020}.wal"));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let written = file.metadata()?.len();
        file.sync_all()?;
        sync_dir(dir)?;
        Ok(Segment { file, written })
    }
}

/// Starts the segment for `next_lsn`: the spare when one is ready, else a new file synced here.
fn roll_segment(shared: &Arc<Shared>, next_lsn: u64) -> Result<Segment, WalError> {
    let spare = shared.spare.lock().take();
    let segment = match spare {
        Some(file) => {
            let target = shared.dir.join(format!("{next_lsn:020}.wal"));
            match fs::rename(shared.dir.join(SPARE_NAME), &target) {
                Ok(()) => Segment { file, written: 0 },
                Err(error) => {
                    tracing::warn!(%error, "could not use the spare write-ahead log segment");
                    let _ = fs::remove_file(shared.dir.join(SPARE_NAME));
                    Segment::create(&shared.dir, next_lsn)?
                }
            }
        }
        None => Segment::create(&shared.dir, next_lsn)?,
    };
    prepare_spare(Arc::clone(shared));
    Ok(segment)
}

/// Creates and syncs the next segment on a helper thread. Best effort: without a spare, a roll
/// creates its segment itself.
fn prepare_spare(shared: Arc<Shared>) {
    let spawned = std::thread::Builder::new()
        .name("wal-spare".to_owned())
        .spawn(move || {
            let path = shared.dir.join(SPARE_NAME);
            let created = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&path)
                .and_then(|file| {
                    file.sync_all()?;
                    sync_dir(&shared.dir)?;
                    Ok(file)
                });
            match created {
                Ok(file) => *shared.spare.lock() = Some(file),
                Err(error) => tracing::debug!(%error, "no spare write-ahead log segment"),
            }
        });
    if let Err(error) = spawned {
        tracing::debug!(%error, "could not start the spare segment thread");
    }
}

/// A spare left by an earlier run becomes a normal segment when a roll had written records into
/// it (its rename may not have reached the disk), and is removed when it is empty.
fn adopt_spare(dir: &Path) -> Result<(), WalError> {
    let path = dir.join(SPARE_NAME);
    let mut data = Vec::new();
    match File::open(&path) {
        Ok(mut file) => file.read_to_end(&mut data)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    match read_record(&data) {
        Some((first, _)) => fs::rename(&path, dir.join(format!("{:020}.wal", first.lsn)))?,
        None => fs::remove_file(&path)?,
    }
    sync_dir(dir)?;
    Ok(())
}

fn writer_loop(
    receiver: mpsc::Receiver<Request>,
    mut segment: Segment,
    mut next_lsn: u64,
    shared: Arc<Shared>,
    sink: DurableSink,
) {
    let mut buffer = Vec::with_capacity(1024 * 1024);
    let mut group = Vec::with_capacity(MAX_GROUP);
    // Set when a failed write could not be cut back: nothing may be appended after a torn
    // record (replay stops there), so appends fail until a fresh segment exists.
    let mut broken = false;
    let mut roll_waiters = Vec::new();
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
        // Rolls happen before this group's write: each waiter's records are already durable in
        // the segment being closed.
        let mut appends = Vec::with_capacity(group.len());
        for request in group.drain(..) {
            match request {
                Request::Append { append, done } => appends.push((append, done)),
                Request::Roll { done } => roll_waiters.push(done),
            }
        }
        if buffer.capacity() > 4 * MAX_GROUP_BYTES {
            buffer = Vec::with_capacity(1024 * 1024);
        }

        if broken {
            match Segment::create(&shared.dir, next_lsn) {
                Ok(fresh) => {
                    segment = fresh;
                    broken = false;
                }
                Err(error) => {
                    tracing::error!(%error, "write-ahead log unavailable");
                    let shared_error = Arc::new(error);
                    for (_, done) in appends.drain(..) {
                        let _ = done.send(Err(Arc::clone(&shared_error)));
                    }
                    for done in roll_waiters.drain(..) {
                        let _ = done.send(Err(Arc::clone(&shared_error)));
                    }
                    continue;
                }
            }
        }

        let roll = shared.roll_requested.swap(false, Ordering::AcqRel) || !roll_waiters.is_empty();
        let mut rolled = Ok(());
        if (roll && segment.written > 0) || segment.written >= SEGMENT_TARGET_BYTES {
            match roll_segment(&shared, next_lsn) {
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
            .write_all(&buffer)
            .and_then(|()| segment.file.sync_data());
        shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        let elapsed = started.elapsed();
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
                // Nothing of this group is acknowledged. The segment may end in a partial
                // record now: cut it back to what was durable before, so records appended later
                // stay readable. Sequence numbers are not reused: the failed records may be on
                // disk in full, and replaying an unacknowledged batch is allowed, a repeated
                // number is not.
                tracing::error!(%error, "write-ahead log append failed");
                let shared_error = Arc::new(WalError::Io(error));
                for done in waiters {
                    let _ = done.send(Err(Arc::clone(&shared_error)));
                }
                let cut = segment
                    .file
                    .set_len(segment.written)
                    .and_then(|()| segment.file.sync_all());
                if cut.is_err() {
                    broken = true;
                }
            }
        }
    }
    // Channel closed: every sender dropped. The file is synced after each group already.
}

/// Takes the log folder's lock without waiting; the operating system releases it when the
/// file is closed, also when the process dies.
fn lock_dir(dir: &Path) -> Result<File, WalError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(WalError::Locked(dir.to_owned())),
        Err(fs::TryLockError::Error(error)) => Err(error.into()),
    }
}

fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let first = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".wal"))
            .and_then(|stem| stem.parse::<u64>().ok());
        if let Some(first) = first {
            segments.push((first, path));
        }
    }
    segments.sort();
    Ok(segments)
}

fn replay(dir: &Path) -> Result<Recovered, WalError> {
    let mut recovered = Recovered::default();
    let segments = list_segments(dir)?;
    let last_index = segments.len().saturating_sub(1);
    for (index, (_, path)) in segments.iter().enumerate() {
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        let mut offset = 0usize;
        while offset < data.len() {
            let Some(record) = read_record(&data[offset..]) else {
                break;
            };
            let (record, len) = record;
            // Sequence numbers only grow; anything else is not a record we wrote.
            if recovered
                .records
                .last()
                .is_some_and(|last| last.lsn >= record.lsn)
            {
                break;
            }
            recovered.records.push(record);
            offset += len;
        }
        if offset < data.len() {
            let cut = (data.len() - offset) as u64;
            if index == last_index {
                tracing::warn!(segment = %path.display(), bytes = cut, "cutting a torn write from the write-ahead log");
            } else {
                tracing::error!(segment = %path.display(), bytes = cut, "unreadable bytes inside the write-ahead log");
            }
            let file = OpenOptions::new().write(true).open(path)?;
            file.set_len(offset as u64)?;
            file.sync_all()?;
            recovered.truncated_bytes += cut;
        }
    }
    Ok(recovered)
}

fn read_record(data: &[u8]) -> Option<(WalRecord, usize)> {
    if data.len() < HEADER_LEN {
        return None;
    }
    let payload_len = u32::from_le_bytes(data[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(data[4..8].try_into().ok()?);
    let payload = data.get(HEADER_LEN..HEADER_LEN + payload_len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    Some((WalRecord::decode(payload)?, HEADER_LEN + payload_len))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn append(identifier: &str, body: &str) -> Append {
        Append {
            received_at: 1_700_000_000_000,
            survey_id: SurveyId::parse("00112233445566778899aabb").expect("id"),
            identifier: identifier.to_owned(),
            body: Bytes::from(body.to_owned()),
        }
    }

    fn collecting_sink() -> (DurableSink, Arc<Mutex<Vec<u64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink_seen = Arc::clone(&seen);
        let sink: DurableSink = Box::new(move |records| {
            sink_seen
                .lock()
                .expect("lock")
                .extend(records.iter().map(|r| r.lsn));
        });
        (sink, seen)
    }

    #[tokio::test]
    async fn a_closed_segment_is_retained_until_truncation_passes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (sink, _) = collecting_sink();
        let (wal, _) = Wal::open(dir.path(), sink).expect("open");
        for i in 0..3 {
            wal.append(append(&format!("id{i}"), "{\"events\":[]}"))
                .await
                .expect("append");
        }
        let rolled_at = wal.last_lsn();
        assert!(
            !wal.retains_through(rolled_at).expect("list"),
            "open segment only"
        );
        wal.roll_now().await.expect("roll");
        wal.append(append("after", "{\"events\":[]}"))
            .await
            .expect("append");
        assert!(wal.retains_through(rolled_at).expect("list"));
        wal.truncate_through(rolled_at - 1).expect("truncate");
        assert!(
            wal.retains_through(rolled_at).expect("list"),
            "a consumer is behind"
        );
        wal.truncate_through(rolled_at).expect("truncate");
        assert!(!wal.retains_through(rolled_at).expect("list"));
    }

    #[tokio::test]
    async fn one_process_at_a_time_opens_a_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (sink, _) = collecting_sink();
        let (wal, _) = Wal::open(dir.path(), sink).expect("open");
        let (sink, _) = collecting_sink();
        match Wal::open(dir.path(), sink) {
            Err(WalError::Locked(path)) => assert_eq!(path, dir.path()),
            other => panic!(
                "a second open must fail as locked, got {:?}",
                other.map(|_| ())
            ),
        }
        drop(wal);
        let (sink, _) = collecting_sink();
        Wal::open(dir.path(), sink).expect("open again once the first handle is gone");
    }

    #[tokio::test]
    async fn appended_records_replay_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (sink, seen) = collecting_sink();
            let (wal, recovered) = Wal::open(dir.path(), sink).expect("open");
            assert!(recovered.records.is_empty());
            for i in 0..10 {
                let record = wal
                    .append(append(&format!("id{i}"), "{\"events\":[]}"))
                    .await
                    .expect("append");
                assert_eq!(record.lsn, i + 1);
            }
            assert_eq!(seen.lock().expect("lock").len(), 10);
        }
        let (sink, _) = collecting_sink();
        let (wal, recovered) = Wal::open(dir.path(), sink).expect("reopen");
        let lsns: Vec<u64> = recovered.records.iter().map(|r| r.lsn).collect();
        assert_eq!(lsns, (1..=10).collect::<Vec<_>>());
        assert_eq!(recovered.records[3].identifier, "id3");
        let next = wal.append(append("after", "{}")).await.expect("append");
        assert_eq!(next.lsn, 11);
    }

    #[tokio::test]
    async fn concurrent_appends_share_fsyncs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (sink, seen) = collecting_sink();
        let (wal, _) = Wal::open(dir.path(), sink).expect("open");
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let wal = wal.clone();
                tokio::spawn(async move { wal.append(append(&format!("s{i}"), "{}")).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("join").expect("append");
        }
        assert_eq!(seen.lock().expect("lock").len(), 200);
        assert!(wal.fsync_count() <= 200);
    }

    #[tokio::test]
    async fn a_torn_tail_is_cut_and_earlier_records_survive() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (sink, _) = collecting_sink();
            let (wal, _) = Wal::open(dir.path(), sink).expect("open");
            for i in 0..3 {
                wal.append(append(&format!("id{i}"), "{\"events\":[1]}"))
                    .await
                    .expect("append");
            }
        }
        let (_, path) = list_segments(dir.path())
            .expect("list")
            .pop()
            .expect("segment");
        let segments = list_segments(dir.path()).expect("list");
        let written = segments
            .iter()
            .map(|(_, p)| fs::metadata(p).expect("meta").len())
            .max()
            .expect("some");
        let target = segments
            .iter()
            .find(|(_, p)| fs::metadata(p).expect("meta").len() == written)
            .map(|(_, p)| p.clone())
            .unwrap_or(path);
        let file = OpenOptions::new().write(true).open(&target).expect("open");
        file.set_len(written - 5).expect("tear");
        let (sink, _) = collecting_sink();
        let (_, recovered) = Wal::open(dir.path(), sink).expect("reopen");
        assert_eq!(recovered.records.len(), 2);
        assert!(recovered.truncated_bytes > 0);
    }

    #[tokio::test]
    async fn truncation_removes_consumed_segments_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (sink, _) = collecting_sink();
        let (wal, _) = Wal::open(dir.path(), sink).expect("open");
        wal.append(append("a", "{}")).await.expect("append");
        wal.append(append("b", "{}")).await.expect("append");
        wal.request_roll();
        wal.append(append("c", "{}")).await.expect("append");
        assert_eq!(wal.truncate_through(1).expect("truncate"), 0);
        assert_eq!(wal.truncate_through(2).expect("truncate"), 1);
        drop(wal);
        let (sink, _) = collecting_sink();
        let (_, recovered) = Wal::open(dir.path(), sink).expect("reopen");
        let lsns: Vec<u64> = recovered.records.iter().map(|r| r.lsn).collect();
        assert_eq!(lsns, vec![3]);
    }

    #[tokio::test]
    async fn rolls_use_the_spare_and_a_lost_rename_is_adopted_on_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (sink, _) = collecting_sink();
            let (wal, _) = Wal::open(dir.path(), sink).expect("open");
            wal.append(append("a", "{}")).await.expect("append");
            // Give the helper thread time to prepare the spare, then roll onto it.
            for _ in 0..100 {
                if wal.shared.spare.lock().is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            wal.request_roll();
            wal.append(append("b", "{}")).await.expect("append");
            wal.append(append("c", "{}")).await.expect("append");
        }
        // A power loss could leave the rolled segment under the spare's name.
        let rolled = dir.path().join(format!("{:020}.wal", 2));
        assert!(
            rolled.exists(),
            "the roll renamed the spare to the first sequence number"
        );
        let _ = fs::remove_file(dir.path().join(SPARE_NAME));
        fs::rename(&rolled, dir.path().join(SPARE_NAME)).expect("undo rename");

        let (sink, _) = collecting_sink();
        let (wal, recovered) = Wal::open(dir.path(), sink).expect("reopen");
        let lsns: Vec<u64> = recovered.records.iter().map(|r| r.lsn).collect();
        assert_eq!(lsns, vec![1, 2, 3]);
        assert!(
            rolled.exists(),
            "the spare with records became a segment again"
        );
        assert_eq!(wal.append(append("d", "{}")).await.expect("append").lsn, 4);
    }
}
