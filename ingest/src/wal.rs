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
//! all little-endian. Replay of a segment stops at the first record whose length or checksum
//! does not hold (a write torn by a crash) or whose sequence number does not grow (older
//! records of a recycled file, below). The writer never writes into a file replay has read: a
//! restart always starts a new segment.
//!
//! Consumed segments are recycled, as PostgreSQL recycles its WAL files: a segment every consumer
//! has committed past is renamed to `<first>.free`, and a helper thread later zeroes its first
//! record header and offers it as the next segment (`next.wal.spare`). The writer overwrites it
//! from offset 0, so its `fdatasync`s carry data blocks only; a new or appended-to file would also
//! carry a new size and new blocks through the file system's journal, which the lake's and the
//! catalog's fsyncs share. (`benches/ceiling.rs` measures the difference in open-loop p99,
//! `overwrite` against `durable`: see benches/README.md.) When no free file is ready, the helper
//! creates a new one, so a roll inside the writer is still a rename. Either way the helper fills
//! the spare with zeros to 40 MiB and syncs it first, so that a new segment, or a recycled one
//! longer than its predecessor, is written in place too.
//!
//! Recycled files hold old bodies past the write position. An erasure must leave none of them:
//! [`Wal::start_purge`] deletes the free files and a recycled spare, stops recycling while it
//! runs, and rolls into a fresh segment; [`Purge::finish`] deletes every closed segment.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
/// Consumed segments kept for reuse; more are deleted. One per roll is taken, one per
/// truncation returned, so a few suffice.
const MAX_FREE_FILES: usize = 3;
/// Size the helper fills every spare to, with zeros written and synced, before offering it. A
/// segment usually ends at the next flush (about `--flush-bytes`, 32 MiB by default, plus what
/// arrives while that flush commits), so the writer's records land in blocks the file already
/// has and its `fdatasync`s carry data only, never new blocks or a new size. A recycled file
/// shorter than this is extended once; zeros read as the end of a segment (an empty payload
/// does not decode).
const PREALLOCATED_BYTES: u64 = 40 * 1024 * 1024;

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
    /// A write or sync failed and the log has not recovered yet: nothing is accepted meanwhile.
    #[error("write-ahead log cannot be written since a failed write or sync ({0}); retrying")]
    FailStopped(String),
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
    /// logged so far out of the open segment, so that its file can be deleted. `fresh` asks for
    /// a new file even when the open segment holds no records but is a recycled file (its old
    /// bodies past the write position must go too). Answers the new segment's first sequence
    /// number.
    Roll {
        fresh: bool,
        done: oneshot::Sender<Result<u64, Arc<WalError>>>,
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
    /// Purges under way. While any runs, consumed segments are deleted rather than recycled and
    /// no recycled file becomes the spare or the open segment.
    purges: AtomicUsize,
    /// The spare and the free files. Held for renames, deletions and the recycling of one file
    /// (a header write and two syncs, on the helper thread); the writer only ever tries it, so
    /// a group commit never waits for it.
    files: parking_lot::Mutex<Files>,
    /// Appends sent to the writer and not yet taken into a group (`telltale_wal_queue_depth`).
    queue_depth: metrics::Gauge,
}

impl Shared {
    fn recycling(&self) -> bool {
        self.purges.load(Ordering::Acquire) == 0
    }
}

#[derive(Default)]
struct Files {
    /// The next segment, ready to be renamed into place by a roll.
    spare: Option<Spare>,
    /// Consumed segments waiting to become a spare (`<first>.free`).
    free: Vec<PathBuf>,
    /// A helper thread is preparing the spare.
    preparing: bool,
}

struct Spare {
    file: File,
    /// A consumed segment: it holds old records past the point the writer has reached.
    recycled: bool,
}

/// Name of the prepared next segment until a roll renames it to its first sequence number.
/// Replay adopts a spare that holds records (a roll whose rename a power loss took back).
const SPARE_NAME: &str = "next.wal.spare";
/// A new segment is created and synced under this name, then renamed into place.
const STAGING_NAME: &str = "next.wal.new";
const FREE_SUFFIX: &str = ".free";

/// What was found in the log when it was opened.
#[derive(Debug, Default)]
pub struct Recovered {
    pub records: Vec<WalRecord>,
    /// Bytes after the last record of each segment: a write torn by a crash, or the older
    /// contents of a recycled file. Replay ignores them; they are never written after.
    pub ignored_bytes: u64,
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
        remove_free_files(dir)?;
        let recovered = replay(dir)?;
        // Continue after both the last record and the highest segment name: a segment created
        // after a failed write may be empty, and numbering must never go back below it (the
        // active segment must sort last, and sequence numbers must never repeat).
        let next_lsn = recovered
            .records
            .last()
            .map_or(1, |record| record.lsn + 1)
            .max(first_lsn_floor(dir));
        // Always a new file, never one replay read: writing into a torn segment could leave a
        // complete record of the unacknowledged write after the new ones, and replay would take
        // it for one of them.
        let segment = Segment::create(dir, next_lsn)?;
        let shared = Arc::new(Shared {
            dir: dir.to_owned(),
            roll_requested: AtomicBool::new(false),
            last_lsn: AtomicU64::new(next_lsn - 1),
            fsyncs: AtomicU64::new(0),
            purges: AtomicUsize::new(0),
            files: parking_lot::Mutex::new(Files::default()),
            queue_depth: metrics::gauge!("telltale_wal_queue_depth"),
        });
        prepare_spare(&shared);
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
        self.shared.queue_depth.increment(1.0);
        // `send` blocks only when the queue is full, which is backpressure we want to honour
        // without stalling a runtime worker.
        match sender.try_send(Request::Append { append, done }) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(request)) => {
                let sent = tokio::task::spawn_blocking(move || sender.send(request)).await;
                if !matches!(sent, Ok(Ok(()))) {
                    self.shared.queue_depth.decrement(1.0);
                    return Err(Arc::new(WalError::Closed));
                }
            }
            Err(mpsc::TrySendError::Disconnected(_)) => {
                self.shared.queue_depth.decrement(1.0);
                return Err(Arc::new(WalError::Closed));
            }
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
        self.roll(false).await.map(|_| ())
    }

    async fn roll(&self, fresh: bool) -> Result<u64, Arc<WalError>> {
        let (done, wait) = oneshot::channel();
        let sender = self.sender.clone();
        tokio::task::spawn_blocking(move || sender.send(Request::Roll { fresh, done }))
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

    /// Retires every segment all of whose records have `lsn <= through_lsn`: it becomes a free
    /// file for reuse, or is deleted when enough are free or a purge is under way. The segment
    /// being written is never touched. Returns how many segments were retired.
    pub fn truncate_through(&self, through_lsn: u64) -> Result<usize, WalError> {
        let dir = &self.shared.dir;
        let segments = list_segments(dir)?;
        let mut retired = 0;
        let mut failure = None;
        {
            let mut files = self.shared.files.lock();
            for pair in segments.windows(2) {
                let (first, path) = &pair[0];
                let (next_first, _) = pair[1];
                if next_first.saturating_sub(1) > through_lsn {
                    continue;
                }
                // Two consumers may truncate at once; a segment already gone is fine.
                let outcome = if self.shared.recycling() && files.free.len() < MAX_FREE_FILES {
                    let free = dir.join(format!("{first:020}{FREE_SUFFIX}"));
                    fs::rename(path, &free).map(|()| files.free.push(free))
                } else {
                    fs::remove_file(path)
                };
                match outcome {
                    Ok(()) => retired += 1,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => {
                        failure = Some(error);
                        break;
                    }
                }
            }
        }
        // Synced before an error is returned too: a free file may be recycled only once its
        // new name is on disk, or a power loss could bring it back under its segment name
        // holding newer records.
        if retired > 0 {
            sync_dir(dir)?;
        }
        match failure {
            Some(error) => Err(error.into()),
            None => Ok(retired),
        }
    }

    /// Whether a closed segment still holds a record numbered `lsn` or lower (truncation kept
    /// it because a consumer is behind). The open segment is not counted.
    pub fn retains_through(&self, lsn: u64) -> Result<bool, WalError> {
        let segments = list_segments(&self.shared.dir)?;
        let closed = &segments[..segments.len().saturating_sub(1)];
        Ok(closed.iter().any(|(first, _)| *first <= lsn))
    }

    /// Begins removing every byte logged before this call from the log's folder (an erasure):
    /// deletes the free files and a recycled spare, stops recycling until the returned guard is
    /// finished or dropped, and closes the open segment into a fresh, never recycled file. The
    /// caller then makes the consumers catch up and calls [`Purge::finish`].
    pub async fn start_purge(&self) -> Result<Purge, Arc<WalError>> {
        self.shared.purges.fetch_add(1, Ordering::AcqRel);
        let mut purge = Purge {
            wal: self.clone(),
            fresh_first: 0,
        };
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || discard_recycled(&shared))
            .await
            .map_err(|_| Arc::new(WalError::Closed))?
            .map_err(Arc::new)?;
        purge.fresh_first = self.roll(true).await?;
        Ok(purge)
    }

    /// Deletes the free files and a recycled spare (their old bodies), as a clean shutdown does
    /// so that a stopped or retired instance keeps only the segments it may still need.
    pub fn discard_recycled(&self) -> Result<(), WalError> {
        discard_recycled(&self.shared)
    }
}

/// A purge of the log under way (see [`Wal::start_purge`]). Recycling resumes when it is
/// dropped.
#[must_use = "a purge removes nothing until it is finished"]
pub struct Purge {
    wal: Wal,
    /// The first sequence number of the fresh segment the purge rolled into: everything below
    /// it sits in closed segments.
    fresh_first: u64,
}

impl Purge {
    /// Deletes every closed segment both consumers are past (`through_lsn`) and answers whether
    /// any segment from before the purge is still there (a consumer is behind, or a file could
    /// not be deleted): then the purge has not removed everything and must be retried.
    pub fn finish(self, through_lsn: u64) -> Result<bool, WalError> {
        self.wal.truncate_through(through_lsn)?;
        discard_recycled(&self.wal.shared)?;
        self.wal.retains_through(self.fresh_first.saturating_sub(1))
    }
}

impl Drop for Purge {
    fn drop(&mut self) {
        self.wal.shared.purges.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Deletes the free files and a recycled spare, then syncs the folder. The folder is listed,
/// not only the pool, so that a file whose recycling or deletion failed before is found again;
/// a file that cannot be deleted now stays listed for the next attempt.
fn discard_recycled(shared: &Shared) -> Result<(), WalError> {
    let mut files = shared.files.lock();
    let mut failure = None;
    for path in files_in(&shared.dir, |name| name.ends_with(FREE_SUFFIX))? {
        if let Err(error) = remove_if_present(&path) {
            failure.get_or_insert(error);
        }
    }
    files.free.retain(|path| path.exists());
    if files.spare.as_ref().is_some_and(|spare| spare.recycled) {
        match remove_if_present(&shared.dir.join(SPARE_NAME)) {
            Ok(()) => files.spare = None,
            Err(error) => {
                failure.get_or_insert(error);
            }
        }
    }
    drop(files);
    sync_dir(&shared.dir)?;
    match failure {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

/// The files in `dir` whose names satisfy `wanted`.
fn files_in(dir: &Path, wanted: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(&wanted)
        {
            found.push(path);
        }
    }
    Ok(found)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
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

fn segment_path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("{first_lsn:020}.wal"))
}

struct Segment {
    file: File,
    /// Where the next group is written. Everything before it is durable records.
    written: u64,
    /// A reused file: bytes past `written` are older records.
    recycled: bool,
}

impl Segment {
    /// A new empty file for the segment starting at `first_lsn`, synced with its folder. It
    /// replaces a file of that name, which can only be one without records (a segment left
    /// empty by a crash, or an empty recycled one a purge replaces).
    fn create(dir: &Path, first_lsn: u64) -> Result<Segment, WalError> {
        let staging = dir.join(STAGING_NAME);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&staging)?;
        file.sync_all()?;
        fs::rename(&staging, segment_path(dir, first_lsn))?;
        sync_dir(dir)?;
        Ok(Segment {
            file,
            written: 0,
            recycled: false,
        })
    }
}

/// Starts the segment for `next_lsn`: the spare when one is ready (and, for a `fresh` roll or
/// during a purge, not recycled), else a new file synced here.
fn roll_segment(shared: &Arc<Shared>, next_lsn: u64, fresh: bool) -> Result<Segment, WalError> {
    // Not waited for: the helper holds the lock across a recycled file's syncs, and every
    // request queued behind this roll would wait with it. A busy lock means no spare is ready
    // yet (or a truncation is renaming files); a new file does as well.
    let spare = shared
        .files
        .try_lock()
        .and_then(|mut files| files.spare.take());
    let spare = match spare {
        Some(spare) if spare.recycled && (fresh || !shared.recycling()) => {
            drop(spare);
            remove_if_present(&shared.dir.join(SPARE_NAME))?;
            None
        }
        spare => spare,
    };
    let segment = match spare {
        Some(Spare { file, recycled }) => {
            match fs::rename(
                shared.dir.join(SPARE_NAME),
                segment_path(&shared.dir, next_lsn),
            ) {
                Ok(()) => Segment {
                    file,
                    written: 0,
                    recycled,
                },
                Err(error) => {
                    tracing::warn!(%error, "could not use the spare write-ahead log segment");
                    remove_if_present(&shared.dir.join(SPARE_NAME))?;
                    Segment::create(&shared.dir, next_lsn)?
                }
            }
        }
        None => Segment::create(&shared.dir, next_lsn)?,
    };
    prepare_spare(shared);
    Ok(segment)
}

/// Prepares the next segment on a helper thread, unless one is ready or being prepared. Best
/// effort: without a spare, a roll creates its segment itself.
fn prepare_spare(shared: &Arc<Shared>) {
    {
        // Called by the writer: a busy lock is left alone (see `roll_segment`); the next roll
        // asks again.
        let Some(mut files) = shared.files.try_lock() else {
            return;
        };
        if files.preparing || files.spare.is_some() {
            return;
        }
        files.preparing = true;
    }
    let helper_shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("wal-spare".to_owned())
        .spawn(move || make_spare(&helper_shared));
    if let Err(error) = spawned {
        shared.files.lock().preparing = false;
        tracing::debug!(%error, "could not start the spare segment thread");
    }
}

/// Makes a free file the spare when recycling is on, else creates and syncs a new one.
fn make_spare(shared: &Shared) {
    let spare_path = shared.dir.join(SPARE_NAME);
    {
        // Held from taking the free file to installing the spare, so that a purge finds every
        // old body either still free or already the spare, never in between.
        let mut files = shared.files.lock();
        while shared.recycling() {
            let Some(free) = files.free.pop() else { break };
            match recycle(&free, &spare_path, &shared.dir) {
                Ok(file) => {
                    files.spare = Some(Spare {
                        file,
                        recycled: true,
                    });
                    files.preparing = false;
                    return;
                }
                Err(error) => {
                    // Deleted if possible (under either name: the rename may have happened);
                    // if not, the next purge's folder listing finds a free file. No spare is
                    // installed, so nothing else owns the spare's name.
                    tracing::debug!(%error, file = %free.display(), "could not recycle a segment");
                    let _ = fs::remove_file(&free);
                    let _ = fs::remove_file(&spare_path);
                }
            }
        }
    }
    let created = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&spare_path)
        .and_then(|file| {
            fill_with_zeros(&file, 0, PREALLOCATED_BYTES)?;
            file.sync_all()?;
            sync_dir(&shared.dir)?;
            Ok(file)
        });
    let mut files = shared.files.lock();
    files.preparing = false;
    match created {
        Ok(file) => {
            files.spare = Some(Spare {
                file,
                recycled: false,
            })
        }
        Err(error) => tracing::debug!(%error, "no spare write-ahead log segment"),
    }
}

/// Zeroes a consumed segment's first record header, syncs that, renames the file to the
/// spare's name and syncs the folder. The zeroed header is durable before the rename, so
/// neither replay nor [`adopt_spare`] can take the file's old first record for a new one. The
/// folder sync matters: the writer's later `fdatasync`s of records written in place change no
/// size and so carry no name with them; were the rename lost, the file would come back as a
/// free file, which opening deletes, records and all. With the spare's name durable, a lost
/// roll rename brings the file back as the spare, which [`adopt_spare`] takes back.
fn recycle(free: &Path, spare_path: &Path, dir: &Path) -> io::Result<File> {
    let file = OpenOptions::new().write(true).open(free)?;
    file.write_all_at(&[0; HEADER_LEN], 0)?;
    let len = file.metadata()?.len();
    fill_with_zeros(&file, len, PREALLOCATED_BYTES)?;
    file.sync_data()?;
    fs::rename(free, spare_path)?;
    sync_dir(dir)?;
    Ok(file)
}

/// Writes zeros from `from` up to `to` (nothing when the file is already that long). Real
/// zeros, not `set_len` or `fallocate`: a hole or an unwritten extent would still need block
/// allocation or conversion, and so a metadata update, at the writer's first `fdatasync` there.
fn fill_with_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    const CHUNK: usize = 1024 * 1024;
    let zeros = vec![0u8; CHUNK];
    let mut offset = from;
    while offset < to {
        let len = (to - offset).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..len], offset)?;
        offset += len as u64;
    }
    Ok(())
}

/// A spare left by an earlier run becomes a normal segment when a roll had written records into
/// it (its rename may not have reached the disk), and is removed when it holds none.
fn adopt_spare(dir: &Path) -> Result<(), WalError> {
    let path = dir.join(SPARE_NAME);
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    let mut header = [0; HEADER_LEN];
    let mut data = Vec::new();
    if file.read_exact(&mut header).is_ok() {
        let payload_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        data.extend_from_slice(&header);
        file.take(u64::from(payload_len)).read_to_end(&mut data)?;
    }
    match read_record(&data) {
        Some((first, _)) => fs::rename(&path, segment_path(dir, first.lsn))?,
        None => fs::remove_file(&path)?,
    }
    sync_dir(dir)?;
    Ok(())
}

/// Free files of an earlier run are not reused: their names are not remembered, and an erasure
/// may have happened since they were retired.
fn remove_free_files(dir: &Path) -> Result<(), WalError> {
    let leftovers = files_in(dir, |name| {
        name.ends_with(FREE_SUFFIX) || name == STAGING_NAME
    })?;
    for path in &leftovers {
        fs::remove_file(path)?;
    }
    if !leftovers.is_empty() {
        sync_dir(dir)?;
    }
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
    let mut roll_waiters = Vec::new();
    // Set by a failed write or sync: (bytes of the failed group, the error). The log then
    // accepts nothing until `recover` has cleared what that group may have left and moved to a
    // new segment (fail-stop: after a failed fsync the page cache may hold pages the disk never
    // got, and writing on in the same file would build on them).
    let mut failed: Option<(usize, String)> = None;
    let sync_seconds = metrics::histogram!("telltale_wal_sync_seconds");
    let group_records = metrics::histogram!("telltale_wal_group_records");
    let write_errors = metrics::counter!("telltale_wal_write_errors_total");
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
fn recover(
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

/// Reads every segment in order. A segment ends at its first unreadable record, at a record
/// whose sequence number does not grow, or at one outside the segment's range (from its name up
/// to the next segment's name); the rest of the file is ignored, not cut: it is a torn write or
/// a recycled file's older records, and nothing is written after it.
///
/// A client cannot plant a record for replay to find in old bytes: a body is validated JSON,
/// whose smallest byte is a tab (0x09), so a length field made of body bytes is at least
/// 0x0909_0909 (151 MiB), more than a segment holds. A header straddling a body's end takes
/// its other bytes from the log's next header, and must then also sit exactly where the new
/// records end after a crash and carry a sequence number in the segment's range.
fn replay(dir: &Path) -> Result<Recovered, WalError> {
    let mut recovered = Recovered::default();
    let segments = list_segments(dir)?;
    for (index, (first, path)) in segments.iter().enumerate() {
        let end = segments.get(index + 1).map_or(u64::MAX, |(next, _)| *next);
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        let mut offset = 0usize;
        while let Some((record, len)) = read_record(&data[offset..]) {
            let out_of_order = recovered
                .records
                .last()
                .is_some_and(|last| last.lsn >= record.lsn);
            if out_of_order || record.lsn < *first || record.lsn >= end {
                break;
            }
            recovered.records.push(record);
            offset += len;
        }
        let ignored = (data.len() - offset) as u64;
        if ignored > 0 {
            tracing::debug!(segment = %path.display(), bytes = ignored, "write-ahead log segment ends before its file");
            recovered.ignored_bytes += ignored;
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
mod tests;
