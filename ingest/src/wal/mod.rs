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
//! The folder's `FORMAT` file names the version of this format ([`FORMAT`]); a log of a newer
//! version is refused on open, before any segment is read, and a folder without the file is
//! format 1 (written before the file existed).
//!
//! The parts: `record` (the format), `segment` (segment files, the spare and recycling, the
//! folder's lock and syncs), `writer` (the writer thread: group commit, rolls, recovery after a
//! failed sync), `replay` (reading the log back on open); this module is the handle, truncation
//! and purges.
//!
//! Recycled files hold old bodies past the write position. An erasure must leave none of them:
//! [`Wal::start_purge`] deletes the free files and a recycled spare, stops recycling while it
//! runs, and rolls into a fresh segment; [`Purge::finish`] deletes every closed segment.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;

use bytes::Bytes;
use catalog::SurveyId;
use tokio::sync::oneshot;

mod record;
mod replay;
mod segment;
mod writer;

use record::*;
pub use record::{FORMAT, WalRecord};
use replay::*;
use segment::*;
use writer::*;

/// Consumed segments kept for reuse; more are deleted. One per roll is taken, one per
/// truncation returned, so a few suffice.
const MAX_FREE_FILES: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("write-ahead log i/o error: {0}")]
    Io(#[from] io::Error),
    /// The log was written by a newer release: its records may not read as this one expects.
    #[error(
        "the write-ahead log is in format {found}, written by a newer release of Telltale (this \
         release reads formats up to {known}): run that release, or `telltale drain` with it \
         to move the log into the lake before downgrading (CHANGELOG.md)"
    )]
    NewerFormat { found: u32, known: u32 },
    #[error("the write-ahead log's FORMAT file says {0:?}, which is not a format number")]
    UnknownFormat(String),
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
        check_format(dir)?;
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
            queue_depth: series::WAL_QUEUE_DEPTH.get(),
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
    ///
    /// Not while a backup holds the log: nothing could be retired, and each roll would leave a
    /// segment of the spare's full length behind (the lab's recorder, which holds the log for a
    /// chunk of 45 minutes, once left 1,604 of them: 63 GB). The open segment still rolls when
    /// it is full.
    pub fn request_roll(&self) {
        if matches!(try_hold_shared(&self.shared.dir), Ok(None)) {
            return;
        }
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
        // A backup copying the log holds it: nothing is retired meanwhile (a purge then finds
        // its segments still there and is retried).
        let Some(_hold) = try_hold_shared(dir)? else {
            return Ok(0);
        };
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

/// Every record the log in `dir` holds, in order, read as replay reads them and without changing
/// the folder (`telltale log export`). Takes the folder's lock, so it fails while a server or a
/// drain holds the log.
pub fn read_records(dir: &Path) -> Result<Vec<WalRecord>, WalError> {
    if !dir.is_dir() {
        return Err(WalError::Io(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} holds no write-ahead log", dir.display()),
        )));
    }
    let _lock = lock_dir(dir)?;
    check_format_read_only(dir)?;
    Ok(replay(dir)?.records)
}

/// The file a backup locks, exclusively, while it copies the log's segments; truncation takes it
/// shared and without waiting, and retires nothing while a backup holds it. Between the backup's
/// copy of the lake and its copy of the log, no record the lake copy lacks can leave the log.
pub const HOLD_FILE: &str = "HOLD";

fn open_hold(dir: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(HOLD_FILE))
}

/// The shared hold truncation takes, or `None` while a backup holds the log.
fn try_hold_shared(dir: &Path) -> Result<Option<File>, WalError> {
    let file = open_hold(dir)?;
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(error)) => Err(error.into()),
    }
}

/// Holds the log in `dir` for a backup until the returned hold is dropped: waits for a
/// truncation under way to end, and stops every later one (of a running server, or of `telltale
/// drain`) from retiring a segment. Blocking; call it off the async runtime.
pub fn hold_for_backup(dir: &Path) -> Result<Hold, WalError> {
    let file = open_hold(dir)?;
    file.lock()?;
    Ok(Hold {
        _file: file,
        dir: dir.to_owned(),
    })
}

/// A log held for a backup ([`hold_for_backup`]): no segment is retired while it lives.
#[derive(Debug)]
pub struct Hold {
    _file: File,
    dir: PathBuf,
}

impl Hold {
    /// The log's own part of a backup: its segments and its `FORMAT` file copied into `to`
    /// (made if missing) and made durable. A segment retired before the hold and deleted
    /// meanwhile is skipped: its records are in the stores. Returns the segments copied.
    pub fn copy_segments_to(&self, to: &Path) -> Result<usize, WalError> {
        fs::create_dir_all(to)?;
        let mut names: Vec<String> = fs::read_dir(&self.dir)?
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| name.ends_with(".wal") || name == FORMAT_FILE)
            .collect();
        names.sort();
        let mut segments = 0;
        for name in &names {
            match fs::copy(self.dir.join(name), to.join(name)) {
                Ok(_) => {
                    File::open(to.join(name))?.sync_all()?;
                    segments += usize::from(name.ends_with(".wal"));
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
        sync_dir(to)?;
        Ok(segments)
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

#[cfg(test)]
mod tests;
