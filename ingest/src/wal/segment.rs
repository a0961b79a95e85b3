//! Segment files and their life: creation, the prepared spare, recycling of consumed segments,
//! the folder lock, listing and directory syncs.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::FileExt as _;

use super::*;

/// Size the helper fills every spare to, with zeros written and synced, before offering it. A
/// segment usually ends at the next flush (about `--flush-bytes`, 32 MiB by default, plus what
/// arrives while that flush commits), so the writer's records land in blocks the file already
/// has and its `fdatasync`s carry data only, never new blocks or a new size. A recycled file
/// shorter than this is extended once; zeros read as the end of a segment (an empty payload
/// does not decode).
pub(super) const PREALLOCATED_BYTES: u64 = 40 * 1024 * 1024;

#[derive(Default)]
pub(super) struct Files {
    /// The next segment, ready to be renamed into place by a roll.
    pub(super) spare: Option<Spare>,
    /// Consumed segments waiting to become a spare (`<first>.free`).
    pub(super) free: Vec<PathBuf>,
    /// A helper thread is preparing the spare.
    pub(super) preparing: bool,
}

pub(super) struct Spare {
    pub(super) file: File,
    /// A consumed segment: it holds old records past the point the writer has reached.
    pub(super) recycled: bool,
}

/// Name of the prepared next segment until a roll renames it to its first sequence number.
/// Replay adopts a spare that holds records (a roll whose rename a power loss took back).
pub(super) const SPARE_NAME: &str = "next.wal.spare";

/// A new segment is created and synced under this name, then renamed into place.
pub(super) const STAGING_NAME: &str = "next.wal.new";

pub(super) const FREE_SUFFIX: &str = ".free";

/// Deletes the free files and a recycled spare, then syncs the folder. The folder is listed,
/// not only the pool, so that a file whose recycling or deletion failed before is found again;
/// a file that cannot be deleted now stays listed for the next attempt.
pub(super) fn discard_recycled(shared: &Shared) -> Result<(), WalError> {
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
pub(super) fn files_in(dir: &Path, wanted: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
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

pub(super) fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// When the log is empty (a fresh start or everything truncated), numbering continues after the
/// highest segment name so sequence numbers never repeat.
pub(super) fn first_lsn_floor(dir: &Path) -> u64 {
    list_segments(dir)
        .ok()
        .and_then(|segments| segments.last().map(|(first, _)| *first))
        .unwrap_or(1)
        .max(1)
}

pub(super) fn segment_path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("{first_lsn:020}.wal"))
}

pub(super) struct Segment {
    pub(super) file: File,
    /// Where the next group is written. Everything before it is durable records.
    pub(super) written: u64,
    /// A reused file: bytes past `written` are older records.
    pub(super) recycled: bool,
}

impl Segment {
    /// A new empty file for the segment starting at `first_lsn`, synced with its folder. It
    /// replaces a file of that name, which can only be one without records (a segment left
    /// empty by a crash, or an empty recycled one a purge replaces).
    pub(super) fn create(dir: &Path, first_lsn: u64) -> Result<Segment, WalError> {
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
pub(super) fn roll_segment(
    shared: &Arc<Shared>,
    next_lsn: u64,
    fresh: bool,
) -> Result<Segment, WalError> {
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
pub(super) fn prepare_spare(shared: &Arc<Shared>) {
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
pub(super) fn make_spare(shared: &Shared) {
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
pub(super) fn recycle(free: &Path, spare_path: &Path, dir: &Path) -> io::Result<File> {
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
pub(super) fn fill_with_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
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
pub(super) fn adopt_spare(dir: &Path) -> Result<(), WalError> {
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
pub(super) fn remove_free_files(dir: &Path) -> Result<(), WalError> {
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

/// Takes the log folder's lock without waiting; the operating system releases it when the
/// file is closed, also when the process dies.
pub(super) fn lock_dir(dir: &Path) -> Result<File, WalError> {
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

pub(super) fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
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

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
