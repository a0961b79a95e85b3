//! The log's tests: appends, group commit, rolls and recycling, purge, fail-stop, replay of
//! torn and damaged segments (property tests and time-bounded fuzzing).

use super::*;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt as _;
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
    let (wal, _) = open_log(dir.path());
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
    let (wal, _) = open_log(dir.path());
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
async fn the_log_names_its_format_and_refuses_a_newer_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let format_file = dir.path().join(FORMAT_FILE);
    {
        let (wal, _) = open_log(dir.path());
        wal.append(append("before", "{}")).await.expect("append");
    }
    assert_eq!(
        fs::read_to_string(&format_file).expect("FORMAT written"),
        format!("{FORMAT}\n")
    );

    // A log of a release before the file existed: format 1, replayed, and the file added.
    fs::remove_file(&format_file).expect("remove FORMAT");
    {
        let (_, recovered) = open_log(dir.path());
        assert_eq!(lsns_of(&recovered), vec![1]);
    }
    assert!(format_file.exists());

    // A newer release's log is refused before a segment is read, and left as it was.
    fs::write(&format_file, format!("{}\n", FORMAT + 1)).expect("write FORMAT");
    let segments = list_segments(dir.path()).expect("list");
    let (sink, _) = collecting_sink();
    match Wal::open(dir.path(), sink) {
        Err(error @ WalError::NewerFormat { .. }) => {
            let text = error.to_string();
            assert!(text.contains("newer release"), "{text}");
        }
        other => panic!("expected NewerFormat, got {:?}", other.map(|_| ())),
    }
    assert_eq!(list_segments(dir.path()).expect("list"), segments);
    fs::write(&format_file, "one\n").expect("write FORMAT");
    let (sink, _) = collecting_sink();
    assert!(matches!(
        Wal::open(dir.path(), sink),
        Err(WalError::UnknownFormat(text)) if text == "one"
    ));
}

#[tokio::test]
async fn a_backup_hold_keeps_every_segment_until_released() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open_log(dir.path());
    wal.append(append("a", "{}")).await.expect("append");
    wal.roll_now().await.expect("roll");
    wal.append(append("b", "{}")).await.expect("append");
    let held = list_segments(dir.path()).expect("list");
    let hold = hold_for_backup(dir.path()).expect("hold");
    assert_eq!(wal.truncate_through(wal.last_lsn()).expect("truncate"), 0);
    assert_eq!(list_segments(dir.path()).expect("list"), held);
    // The log's own part of a backup: every segment and the format, readable as a log.
    let copy = tempfile::tempdir().expect("tempdir");
    assert_eq!(
        hold.copy_segments_to(copy.path()).expect("copy"),
        held.len()
    );
    assert!(copy.path().join(FORMAT_FILE).exists());
    let copied = read_records(copy.path()).expect("read the copy");
    assert_eq!(copied.len(), 2);
    // No roll while held: a flush's request to roll would only leave another segment behind.
    wal.request_roll();
    wal.append(append("c", "{}")).await.expect("append");
    assert_eq!(list_segments(dir.path()).expect("list").len(), held.len());
    drop(hold);
    assert_eq!(wal.truncate_through(1).expect("truncate"), 1);
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
    let (wal, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
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
async fn a_torn_tail_is_ignored_and_earlier_records_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (wal, _) = open_log(dir.path());
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
    let (_, recovered) = open_log(dir.path());
    assert_eq!(recovered.records.len(), 2);
    assert!(recovered.ignored_bytes > 0);
}

#[tokio::test]
async fn truncation_removes_consumed_segments_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open_log(dir.path());
    wal.append(append("a", "{}")).await.expect("append");
    wal.append(append("b", "{}")).await.expect("append");
    wal.request_roll();
    wal.append(append("c", "{}")).await.expect("append");
    assert_eq!(wal.truncate_through(1).expect("truncate"), 0);
    assert_eq!(wal.truncate_through(2).expect("truncate"), 1);
    drop(wal);
    let (_, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
    assert_eq!(lsns, vec![3]);
}

#[tokio::test]
async fn rolls_use_the_spare_and_a_lost_rename_is_adopted_on_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (wal, _) = open_log(dir.path());
        wal.append(append("a", "{}")).await.expect("append");
        // Give the helper thread time to prepare the spare, then roll onto it.
        for _ in 0..100 {
            if wal.shared.files.lock().spare.is_some() {
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

    let (wal, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
    assert_eq!(lsns, vec![1, 2, 3]);
    assert!(
        rolled.exists(),
        "the spare with records became a segment again"
    );
    assert_eq!(wal.append(append("d", "{}")).await.expect("append").lsn, 4);
}
#[tokio::test]
async fn replay_skips_records_outside_their_segments_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (wal, _) = open_log(dir.path());
        for segment in 0..3 {
            for i in 0..2 {
                wal.append(append(&format!("s{segment}r{i}"), "{}"))
                    .await
                    .expect("append");
            }
            wal.roll_now().await.expect("roll");
        }
    }
    let segments = list_segments(dir.path()).expect("list");
    let firsts: Vec<u64> = segments.iter().map(|(first, _)| *first).collect();
    assert_eq!(firsts, vec![1, 3, 5, 7]);
    // A file under an older name holding newer records (a rename a power loss took back):
    // its records belong to no range of that name and must not cut the segments after it.
    fs::copy(&segments[2].1, &segments[0].1).expect("copy");
    let (_, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
    assert_eq!(lsns, vec![3, 4, 5, 6]);
}

fn lsns_of(recovered: &Recovered) -> Vec<u64> {
    recovered.records.iter().map(|record| record.lsn).collect()
}

proptest::proptest! {
    // Replay reads whatever a crash or a failing disk left: arbitrary bytes after the last
    // record, or a whole segment of them. It must never panic, and never lose or invent a
    // record before the damage. Failing cases are kept in `proptest-regressions/`.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn replay_keeps_every_record_before_arbitrary_bytes(
        bodies in proptest::collection::vec("[a-z0-9]{0,40}", 0..5),
        garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, _) = open_log(dir.path());
        let mut written = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let record = runtime
                .block_on(wal.append(append(&format!("id{i}"), body)))
                .expect("append");
            written.push(record);
        }
        let (_, segment) = open_segment(dir.path());
        drop(wal);
        let mut end = Vec::new();
        for record in &written {
            record.encode_into(&mut end).expect("encode");
        }
        let file = OpenOptions::new().write(true).open(&segment).expect("open segment");
        file.write_all_at(&garbage, end.len() as u64).expect("write garbage");
        drop(file);

        let (_, recovered) = open_log(dir.path());
        let replayed: Vec<(u64, Bytes)> = recovered
            .records
            .iter()
            .map(|record| (record.lsn, record.body.clone()))
            .collect();
        let expected: Vec<(u64, Bytes)> = written
            .iter()
            .map(|record| (record.lsn, record.body.clone()))
            .collect();
        proptest::prop_assert_eq!(replayed, expected);
    }

    #[test]
    fn replay_of_a_segment_of_arbitrary_bytes_never_panics(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4000),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(segment_path(dir.path(), 1), &bytes).expect("write segment");
        let (sink, _) = collecting_sink();
        // Ok with whatever valid records there are (none, but for a CRC collision), or an
        // error: never a panic.
        if let Ok((_, recovered)) = Wal::open(dir.path(), sink) {
            proptest::prop_assert!(recovered.records.len() <= 1);
        }
    }
}

use crate::fuzz_mutator as mutator;

fn fuzz_corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/corpus")
}

/// Replay's contract on a segment of any bytes: no panic, and the records it keeps have
/// rising positions. With `reopen` (the full open, which also starts the log's writer and
/// fills a 40 MiB spare, so only for some inputs): the log it recovers takes a new record,
/// which the next replay returns after the same records.
fn replay_recovers_a_usable_log(bytes: &[u8], reopen: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    fs::write(segment_path(dir.path(), 1), bytes).map_err(|error| error.to_string())?;
    let Ok(replayed) = replay(dir.path()) else {
        return Ok(());
    };
    let lsns = lsns_of(&replayed);
    if lsns.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(format!("replayed positions are not rising: {lsns:?}"));
    }
    if !reopen {
        return Ok(());
    }
    let (sink, _) = collecting_sink();
    let Ok((wal, recovered)) = Wal::open(dir.path(), sink) else {
        return Err("replay read the segment but opening the log failed".to_owned());
    };
    if lsns_of(&recovered) != lsns {
        return Err(format!(
            "open replayed {:?}, replay {lsns:?}",
            lsns_of(&recovered)
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let added = runtime
        .block_on(wal.append(append("after-damage", "{\"events\":[]}")))
        .map_err(|error| format!("the recovered log refused a record: {error}"))?;
    drop(wal);
    let (_, again) = open_log(dir.path());
    let mut expected: Vec<u64> = lsns;
    expected.push(added.lsn);
    let replayed = lsns_of(&again);
    if replayed != expected {
        return Err(format!("second replay {replayed:?}, expected {expected:?}"));
    }
    Ok(())
}

/// Time-bounded fuzzing of replay (`TELLTALE_FUZZ_SECS`, tests/fuzz/mutator.rs) from the
/// segments in `tests/fuzz/corpus/wal`; one input in 32 also through a full open.
#[test]
fn fuzz_replay_of_damaged_segments() {
    let mut checked = 0u64;
    let report = mutator::run("wal", &fuzz_corpus_root(), &[], |bytes| {
        checked += 1;
        replay_recovers_a_usable_log(bytes, checked % 32 == 1)
    });
    assert!(
        report.mutants > 0 || mutator::budget().is_zero(),
        "{report:?}"
    );
}

/// Writes the seed segments of the replay fuzzing (run once with `--ignored`; the files are
/// kept in the repository): what the real writer writes, trimmed of the zero fill.
#[test]
#[ignore]
fn write_the_wal_fuzz_seeds() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bodies: [&[&str]; 3] = [
        &["{\"events\":[]}"],
        &[
            "{\"events\":[{\"type\":\"pointermove\",\"timestamp\":1,\"data\":{\"x\":1,\"y\":2}}]}",
            "{\"events\":[{\"type\":\"focus\",\"timestamp\":2,\"data\":{}}]}",
            "{\"events\":[{\"type\":\"session\",\"timestamp\":3,\"data\":{\"interviewId\":\"1b4e28ba-2fa1-11d2-883f-0016d3cca427\"}}]}",
        ],
        &["x", "", "\u{0}\u{ff}", "{\"events\":[1,2,3]}"],
    ];
    for (index, bodies) in bodies.iter().enumerate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, _) = open_log(dir.path());
        let mut end = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let record = runtime
                .block_on(wal.append(append(&format!("browser-{i}"), body)))
                .expect("append");
            record.encode_into(&mut end).expect("encode");
        }
        drop(wal);
        let target = fuzz_corpus_root()
            .join("wal")
            .join(format!("segment-{index}"));
        fs::write(target, &end).expect("write a seed");
    }
}

/// Opens the log in `dir` with a sink nobody reads.
fn open_log(dir: &Path) -> (Wal, Recovered) {
    let (sink, _) = collecting_sink();
    Wal::open(dir, sink).expect("open")
}

/// The open segment: the last one, with its first sequence number.
fn open_segment(dir: &Path) -> (u64, PathBuf) {
    list_segments(dir)
        .expect("list")
        .pop()
        .expect("open segment")
}

/// Waits until the helper thread has a spare ready; `recycled` asks for a reused file.
fn wait_for_spare(wal: &Wal, recycled: bool) {
    for _ in 0..500 {
        let ready = wal
            .shared
            .files
            .lock()
            .spare
            .as_ref()
            .is_some_and(|spare| spare.recycled == recycled);
        if ready {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no spare (recycled: {recycled}) within 5 s");
}

fn files_named(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// Brings the log to the state recycling produces: the open segment is a reused file whose
/// older records lie past the new ones, and the next spare is a reused file too. Every body
/// is `body`, so old records sit at the same offsets as new ones.
async fn write_into_a_recycled_segment(wal: &Wal, body: &str) {
    for i in 0..10 {
        wal.append(append(&format!("old{i}"), body))
            .await
            .expect("append");
    }
    wal.roll_now().await.expect("roll");
    // No segment was free at that roll: the spare made after it is a new file.
    wait_for_spare(wal, false);
    wal.truncate_through(wal.last_lsn()).expect("truncate");
    assert_eq!(files_named(&wal.shared.dir, FREE_SUFFIX).len(), 1);
    wal.append(append("mid", body)).await.expect("append");
    wal.roll_now().await.expect("roll");
    wait_for_spare(wal, true);
    wal.append(append("mid", body)).await.expect("append");
    wal.roll_now().await.expect("roll");
    // No segment is free now, so the helper creates the next spare; waited for, or it could
    // take one of the files the truncation below frees and leave the pool one short.
    wait_for_spare(wal, false);
    wal.truncate_through(wal.last_lsn()).expect("truncate");
    for i in 0..2 {
        wal.append(append(&format!("new{i}"), body))
            .await
            .expect("append");
    }
}

#[tokio::test]
async fn recycled_segments_replay_only_their_new_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = "x".repeat(1000);
    {
        let (wal, _) = open_log(dir.path());
        write_into_a_recycled_segment(&wal, &body).await;
        let (first, open) = open_segment(dir.path());
        assert_eq!(first, 13);
        assert!(
            fs::metadata(&open).expect("meta").len() >= 10 * 1000,
            "the open segment is the reused first segment, older records and all"
        );
        // The next spare is reused too: its first header is zeroed, its older records stay.
        wal.append(append("last", &body)).await.expect("append");
        wal.roll_now().await.expect("roll");
        wait_for_spare(&wal, true);
        // Stopped like a crash: nothing is discarded.
    }
    let (wal, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
    // Old record 4 of the reused file follows record 15 at a record boundary, checksum
    // intact: replay stops there because its number goes back, below the segment's name.
    assert_eq!(lsns, vec![13, 14, 15]);
    assert!(recovered.ignored_bytes >= 7 * 1000);
    let firsts: Vec<u64> = list_segments(dir.path())
        .expect("list")
        .into_iter()
        .map(|(first, _)| first)
        .collect();
    assert_eq!(firsts, vec![13, 16], "the reused spare was not adopted");
    assert!(
        files_named(dir.path(), FREE_SUFFIX).is_empty(),
        "free files of an earlier run are deleted"
    );
    assert_eq!(
        wal.append(append("after", "{}")).await.expect("append").lsn,
        16
    );
    drop(wal);
    let (_, recovered) = open_log(dir.path());
    let lsns = lsns_of(&recovered);
    assert_eq!(lsns, vec![13, 14, 15, 16]);
}

#[tokio::test]
async fn a_purge_leaves_no_old_body_in_any_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "SECRET-BODY-".repeat(80);
    let (wal, _) = open_log(dir.path());
    write_into_a_recycled_segment(&wal, &secret).await;
    // Old bodies everywhere: two closed segments about to be free files, an open segment
    // that is a reused file, and a reused spare.
    for _ in 0..2 {
        wal.append(append("more", &secret)).await.expect("append");
        wal.roll_now().await.expect("roll");
        wait_for_spare(&wal, true);
    }
    assert!(wal.shared.files.lock().free.is_empty());
    wal.truncate_through(wal.last_lsn()).expect("truncate");
    assert_eq!(files_named(dir.path(), FREE_SUFFIX).len(), 2);

    let purge = wal.start_purge().await.expect("start purge");
    wal.append(append("later", "{\"events\":[]}"))
        .await
        .expect("append during the purge");
    assert!(
        !purge.finish(wal.last_lsn()).expect("finish"),
        "no segment from before the purge is left"
    );
    for entry in fs::read_dir(dir.path()).expect("read dir") {
        let path = entry.expect("entry").path();
        let data = fs::read(&path).expect("read");
        assert!(
            !data.windows(12).any(|window| window == b"SECRET-BODY-"),
            "{} still holds an old body",
            path.display()
        );
    }
    // Recycling resumes after the purge, with files holding only later records.
    wal.roll_now().await.expect("roll");
    wal.truncate_through(wal.last_lsn()).expect("truncate");
    assert_eq!(files_named(dir.path(), FREE_SUFFIX).len(), 1);
    drop(wal);
    let (_, recovered) = open_log(dir.path());
    assert!(recovered.records.is_empty());
}

#[tokio::test]
async fn spares_are_filled_with_zeros_where_replay_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (wal, _) = open_log(dir.path());
        wal.append(append("a", "{}")).await.expect("append");
        wait_for_spare(&wal, false);
        wal.roll_now().await.expect("roll");
        wal.append(append("b", "{}")).await.expect("append");
        let (first, open) = open_segment(dir.path());
        assert_eq!(first, 2);
        assert_eq!(
            fs::metadata(&open).expect("meta").len(),
            PREALLOCATED_BYTES,
            "the record was written in place, not appended"
        );
        // Segment 1 holds one short record: recycled, it is extended to the same size.
        wait_for_spare(&wal, false);
        wal.truncate_through(1).expect("truncate");
        wal.roll_now().await.expect("roll");
        wait_for_spare(&wal, true);
        let spare = dir.path().join(SPARE_NAME);
        assert_eq!(
            fs::metadata(&spare).expect("meta").len(),
            PREALLOCATED_BYTES
        );
        wal.append(append("c", "{}")).await.expect("append");
    }
    let (_, recovered) = open_log(dir.path());
    assert_eq!(lsns_of(&recovered), vec![2, 3]);
    assert!(recovered.ignored_bytes >= 2 * (PREALLOCATED_BYTES - 1024));
}

#[tokio::test]
async fn a_purge_is_refused_while_a_consumer_is_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open_log(dir.path());
    wal.append(append("a", "{}")).await.expect("append");
    let purge = wal.start_purge().await.expect("start purge");
    assert!(purge.finish(0).expect("finish"), "record 1 is not consumed");
    assert!(wal.shared.recycling(), "recycling resumes after a purge");
}
