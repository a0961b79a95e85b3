//! The lake is a public contract: an outside reader (DuckDB) finds Hive-partitioned Parquet
//! with the documented columns, one row per event, and the raw JSON wherever the typed columns
//! do not hold an event losslessly.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{TestServer, batch, duckdb_query, new_uuid, now_millis, session_event};

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).expect("read a lake folder") {
            let path = entry.expect("lake entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("under the lake");
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn duckdb_reads_the_events_lake_with_hive_partitioning() {
    let mut server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "lake", "Lake").await;
    let other_survey = server.provision_ok(&key, "lake-other", "Other").await;
    let tracking = survey.tracking_key.clone();
    let before = now_millis();

    let typed_session = new_uuid();
    let t = before - 5_000;
    let pointer = format!(
        r#"{{"type":"pointermove","timestamp":{t},"data":{{"x":10,"y":20,"pointerType":"mouse","trusted":true}}}}"#
    );
    let click = format!(
        r#"{{"type":"click","timestamp":{},"data":{{"x":11,"y":21,"button":0,"target":"choice","trusted":true}}}}"#,
        t + 100
    );
    let keydown = format!(
        r#"{{"type":"keydown","timestamp":{},"data":{{"keyClass":"char","trusted":true,"repeat":false}}}}"#,
        t + 200
    );
    let number = "42".to_owned();
    let extra_fields = format!(
        r#"{{"type":"pointermove","timestamp":{},"data":{{"x":12,"y":22,"pointerType":"pen","trusted":true}},"frame":7}}"#,
        t + 300
    );
    let extra_data = format!(
        r#"{{"type":"pointermove","timestamp":{},"data":{{"x":13,"y":23,"pressure":0.5}}}}"#,
        t + 350
    );
    server
        .collect_ok(
            &tracking,
            &typed_session,
            &batch(&[
                pointer.clone(),
                click.clone(),
                keydown.clone(),
                number.clone(),
                extra_fields.clone(),
                extra_data.clone(),
            ]),
            6,
        )
        .await;

    let browser = format!("browser-{}", &new_uuid()[..8]);
    let reference = new_uuid();
    let session = session_event(t + 400, &browser, &reference);
    let browser_pointer = format!(
        r#"{{"type":"pointermove","timestamp":{},"data":{{"x":1,"y":2,"pointerType":"touch","trusted":true}}}}"#,
        t + 500
    );
    server
        .collect_ok(
            &tracking,
            &browser,
            &batch(&[session.clone(), browser_pointer.clone()]),
            2,
        )
        .await;
    server
        .collect_ok(
            &other_survey.tracking_key,
            &new_uuid(),
            &batch(std::slice::from_ref(&pointer)),
            1,
        )
        .await;
    let after = now_millis();

    // SIGTERM flushes everything buffered.
    server.terminate_ok().await;

    // The layout: events/survey_id=<24hex>/date=<YYYY-MM-DD>/<file>.parquet
    let events_dir = server.lake_dir().join("events");
    assert!(
        events_dir
            .join("_delta_log/00000000000000000000.json")
            .exists(),
        "the events table's Delta log"
    );
    let files: Vec<String> = files_under(&events_dir)
        .into_iter()
        .filter(|file| !file.starts_with("_delta_log/"))
        .collect();
    assert!(!files.is_empty(), "no events files");
    for file in &files {
        let parts: Vec<&str> = file.split('/').collect();
        assert_eq!(parts.len(), 3, "{file}");
        let survey_part = parts[0].strip_prefix("survey_id=").expect(file);
        assert!(
            survey_part == survey.survey_id || survey_part == other_survey.survey_id,
            "{file}"
        );
        let date = parts[1].strip_prefix("date=").expect(file);
        chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").expect(file);
        assert!(parts[2].ends_with(".parquet"), "{file}");
    }

    let glob = server.events_glob();
    let source = format!("read_parquet('{glob}', hive_partitioning = true)");

    let columns: Vec<String> = duckdb_query(&format!("DESCRIBE SELECT * FROM {source}"))
        .iter()
        .map(|row| row["column_name"].as_str().expect("column name").to_owned())
        .collect();
    for column in [
        "survey_id",
        "session_id",
        "reference",
        "received_at",
        "event_time",
        "type",
        "x",
        "y",
        "payload",
        "date",
    ] {
        assert!(
            columns.iter().any(|name| name == column),
            "column {column} missing from {columns:?}"
        );
    }

    // Row counts per survey partition and per session.
    let per_survey = duckdb_query(&format!(
        "SELECT survey_id, count(*) AS n FROM {source} GROUP BY survey_id ORDER BY survey_id"
    ));
    let per_survey: HashMap<String, u64> = per_survey
        .iter()
        .map(|row| {
            (
                row["survey_id"].as_str().expect("survey_id").to_owned(),
                row["n"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(
        per_survey.get(&survey.survey_id),
        Some(&8),
        "{per_survey:?}"
    );
    assert_eq!(
        per_survey.get(&other_survey.survey_id),
        Some(&1),
        "{per_survey:?}"
    );
    let filtered = duckdb_query(&format!(
        "SELECT count(*) AS n FROM {source} WHERE survey_id = '{}'",
        survey.survey_id
    ));
    assert_eq!(filtered[0]["n"], json!(8));

    let rows = duckdb_query(&format!(
        "SELECT session_id, reference, type, x, y, payload,
                epoch_ms(event_time) AS event_ms, epoch_ms(received_at) AS received_ms,
                CAST(date AS VARCHAR) AS partition_date,
                strftime(received_at, '%Y-%m-%d') AS received_date
         FROM {source} WHERE survey_id = '{}'
         ORDER BY session_id, event_ms NULLS LAST",
        survey.survey_id
    ));
    assert_eq!(rows.len(), 8, "{rows:?}");
    let by_session = |session: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|row| row["session_id"] == json!(session))
            .collect()
    };
    let typed = by_session(&typed_session);
    assert_eq!(typed.len(), 6, "{rows:?}");
    let browser_rows = by_session(&browser);
    assert_eq!(browser_rows.len(), 2, "{rows:?}");

    for row in &rows {
        let received = row["received_ms"].as_i64().expect("received_at");
        assert!(
            (before..=after).contains(&received),
            "received_at {received} outside {before}..={after}"
        );
        assert_eq!(row["partition_date"], row["received_date"], "{row}");
    }

    // The typed session: vocabulary events have no payload; the rest keep their raw JSON.
    let expected_typed = [
        ("pointermove", Some(t), Some(10), Some(20), None),
        ("click", Some(t + 100), Some(11), Some(21), None),
        ("keydown", Some(t + 200), None, None, None),
        (
            "pointermove",
            Some(t + 300),
            Some(12),
            Some(22),
            Some(extra_fields.as_str()),
        ),
    ];
    for (row, (event_type, time, x, y, payload)) in typed.iter().zip(expected_typed) {
        assert_eq!(row["reference"], json!(typed_session), "{row}");
        assert_eq!(row["type"], json!(event_type), "{row}");
        assert_eq!(row["event_ms"], json!(time), "{row}");
        assert_eq!(row["x"], json!(x), "{row}");
        assert_eq!(row["y"], json!(y), "{row}");
        assert_eq!(row["payload"], json!(payload), "{row}");
    }
    // Data fields outside the vocabulary: the raw event is kept.
    let unknown_data = typed[4];
    assert_eq!(unknown_data["type"], json!("pointermove"), "{unknown_data}");
    assert_eq!(unknown_data["event_ms"], json!(t + 350), "{unknown_data}");
    assert_eq!(unknown_data["payload"], json!(extra_data), "{unknown_data}");
    let raw_number = typed[5];
    assert_eq!(raw_number["payload"], json!(number), "{raw_number}");
    assert!(raw_number["type"].is_null(), "{raw_number}");
    assert!(raw_number["event_ms"].is_null(), "{raw_number}");
    assert_eq!(raw_number["reference"], json!(typed_session));

    // The browser session: both rows carry the reference its session event names.
    assert_eq!(browser_rows[0]["type"], json!("session"));
    assert_eq!(browser_rows[0]["payload"], json!(session));
    assert_eq!(browser_rows[1]["type"], json!("pointermove"));
    assert!(browser_rows[1]["payload"].is_null());
    assert_eq!(browser_rows[1]["x"], json!(1));
    for row in &browser_rows {
        assert_eq!(row["reference"], json!(reference), "{row}");
    }

    // Lookup agrees with the lake.
    server.restart().await;
    let looked_up = server
        .lookup_rows(
            &key,
            &survey.survey_id,
            &[typed_session.clone(), reference.clone()],
        )
        .await;
    assert_eq!(looked_up[0]["eventCount"], json!(6));
    assert_eq!(looked_up[1]["eventCount"], json!(2));
}

/// Reads the `events` and `scores` tables in a loop with Python's `deltalake` and with
/// `polars.read_delta`, printing one JSON line per snapshot read, until the stop file exists.
const PYTHON_DELTA_READERS: &str = r#"
import json, os, sys, time
import deltalake, polars, pyarrow.compute as pc
events, scores, options, stop = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
def counts(values):
    out = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out
def vanished(reader, error):
    # An erasure deletes the files it replaced at once: a snapshot loaded just before it can
    # name a file that is gone. The reader loads the table again (docs/lake.md).
    text = str(error)
    if "No such file" not in text and "not found" not in text:
        raise error
    print(json.dumps({"reader": reader, "vanished": True}), flush=True)
while not os.path.exists(stop):
    try:
        table = deltalake.DeltaTable(events, storage_options=options)
        sessions = table.to_pyarrow_table(columns=["session_id"]).column("session_id")
        sessions = pc.cast(sessions, "string").to_pylist()
        print(json.dumps({"reader": "deltalake", "version": table.version(), "events": counts(sessions)}), flush=True)
    except Exception as error:
        vanished("deltalake", error)
    try:
        frame = polars.read_delta(events, storage_options=options, columns=["session_id"])
        sessions = frame.get_column("session_id").cast(polars.Utf8).to_list()
        print(json.dumps({"reader": "polars", "events": counts(sessions)}), flush=True)
    except Exception as error:
        vanished("polars", error)
    try:
        references = deltalake.DeltaTable(scores, storage_options=options).to_pyarrow_table(columns=["reference"]).column("reference").to_pylist()
        print(json.dumps({"reader": "deltalake-scores", "scores": sorted(references)}), flush=True)
    except Exception as error:
        vanished("deltalake-scores", error)
    time.sleep(0.02)
"#;

/// Outside readers of the Delta tables see exactly the committed rows at every moment of a
/// compaction and an erasure: never an upload before its commit, never a compaction's inputs
/// beside its output, never a file an erasure replaced. A reader of the plain Parquet files
/// sees the same rows once a vacuum has run.
#[tokio::test]
async fn delta_readers_see_only_committed_rows_while_the_lake_is_compacted_and_erased() {
    let server = TestServer::start_with(&[
        "--api-rate-per-minute",
        "100000",
        "--compaction-interval-secs",
        "0",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "readers", "Readers").await;
    let mut sessions = Vec::new();
    let mut before = std::collections::BTreeMap::new();
    // Several flushes, so several small files for the compaction to merge.
    for _ in 0..3 {
        let round: Vec<String> = (0..3).map(|_| new_uuid()).collect();
        before = crate::deletion::prepare_lake(&server, &key, &survey, &round).await;
        sessions.extend(round);
    }
    crate::deletion::score_survey(&server, &key, &survey.survey_id).await;
    let victim = sessions[4].clone();
    let mut after = before.clone();
    after.remove(&victim);
    let scored_before: Vec<String> = {
        let mut all = sessions.clone();
        all.sort();
        all
    };
    let scored_after: Vec<String> = scored_before
        .iter()
        .filter(|reference| **reference != victim)
        .cloned()
        .collect();

    let (events_uri, options) = server.delta_location("events");
    let (scores_uri, _) = server.delta_location("scores");
    let stop = server.data_dir().join("stop-readers");
    let mut readers = std::process::Command::new("python3")
        .arg("-c")
        .arg(PYTHON_DELTA_READERS)
        .arg(&events_uri)
        .arg(&scores_uri)
        .arg(options.to_string())
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with deltalake and polars");
    let stdout = readers.stdout.take().expect("stdout");
    let (lines_in, lines) = std::sync::mpsc::channel::<String>();
    let collector = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_in.send(line);
        }
    });
    // Once they have read the lake as it is (the interpreter and its modules take a moment).
    let mut observed: Vec<String> = Vec::new();
    while observed.len() < 3 {
        match lines.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) => observed.push(line),
            Err(_) => panic!(
                "the Delta readers printed nothing: {:?}",
                readers.wait_with_output()
            ),
        }
    }

    // While they read: a compaction, then an erasure, then another compaction.
    let report = server.cli_json(&["compact", "--json"]);
    assert!(report["filesIn"].as_u64().unwrap_or(0) >= 2, "{report}");
    let reply = crate::deletion::request_deletion(&server, &key, &survey.survey_id, &victim).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = crate::deletion::wait_deletion_done(&server, &key, &survey.survey_id, &victim).await;
    assert_eq!(done["status"], "completed", "{done}");
    server.cli_json(&["compact", "--json"]);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    std::fs::write(&stop, b"").expect("stop the readers");
    let output = readers.wait_with_output().expect("readers");
    assert!(
        output.status.success(),
        "the Delta readers failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    collector.join().expect("the line collector");
    observed.extend(lines.try_iter());

    let mut seen = std::collections::BTreeMap::<String, (u32, u32)>::new();
    let mut vanished = std::collections::BTreeMap::<String, u32>::new();
    for line in &observed {
        let observation: Value = serde_json::from_str(line).expect("a JSON line");
        let reader = observation["reader"].as_str().expect("reader").to_owned();
        if observation["vanished"] == true {
            // A snapshot loaded just before the erasure named a file it deleted; the reader
            // loaded the table again. Rows it never returned cannot be wrong ones.
            *vanished.entry(reader).or_default() += 1;
            continue;
        }
        let entry = seen.entry(reader.clone()).or_default();
        if let Some(events) = observation["events"].as_object() {
            let counts: std::collections::BTreeMap<String, u64> = events
                .iter()
                .map(|(session, count)| (session.clone(), count.as_u64().expect("count")))
                .collect();
            if counts == before {
                entry.0 += 1;
            } else if counts == after {
                entry.1 += 1;
            } else {
                panic!(
                    "{reader} read rows no snapshot holds: {counts:?}\nbefore {before:?}\nafter {after:?}"
                );
            }
        } else {
            let references: Vec<String> = observation["scores"]
                .as_array()
                .expect("scores")
                .iter()
                .map(|reference| reference.as_str().expect("reference").to_owned())
                .collect();
            if references == scored_before {
                entry.0 += 1;
            } else if references == scored_after {
                entry.1 += 1;
            } else {
                panic!("{reader} read scores no snapshot holds: {references:?}");
            }
        }
    }
    for reader in ["deltalake", "polars", "deltalake-scores"] {
        let (old, new) = seen.get(reader).copied().unwrap_or_default();
        assert!(
            old >= 1 && new >= 1,
            "{reader} read {old} snapshots before the erasure and {new} after: {seen:?} \
             (reloads after an erased file vanished: {vanished:?})"
        );
    }

    // The plain files: exactly the table's rows once a vacuum has run.
    server.cli_json(&["vacuum", "--retention-secs", "0", "--json"]);
    let rows = duckdb_query(&format!(
        "SELECT CAST(session_id AS VARCHAR) AS session, count(*) AS n FROM read_parquet('{}') GROUP BY 1",
        server.events_glob()
    ));
    let plain: std::collections::BTreeMap<String, u64> = rows
        .iter()
        .map(|row| {
            (
                row["session"].as_str().expect("session").to_owned(),
                row["n"].as_u64().expect("count"),
            )
        })
        .collect();
    assert_eq!(plain, after, "DuckDB over the vacuumed folder");
}

/// `telltale sql --as-of` reads earlier snapshots of the Delta tables: a version of `events`, or
/// a time; a compaction in between changes nothing an older snapshot reads (its inputs are kept
/// for the retention), and nonsense is refused with a clear message.
#[tokio::test]
async fn telltale_sql_reads_earlier_snapshots_as_of_a_version_or_a_time() {
    let server = TestServer::start_with(&[
        "--api-rate-per-minute",
        "100000",
        "--compaction-interval-secs",
        "0",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "as-of", "As of").await;
    let count = |args: &[&str]| -> u64 {
        let mut full = vec!["sql", "--format", "csv"];
        full.extend_from_slice(args);
        full.push("SELECT count(*) AS n FROM events");
        let csv = server.cli_ok(&full);
        csv.lines()
            .nth(1)
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("a count: {csv}"))
    };
    let first: Vec<String> = (0..2).map(|_| new_uuid()).collect();
    crate::deletion::prepare_lake(&server, &key, &survey, &first).await;
    let first_rows = count(&[]);
    assert!(first_rows > 0);
    // The events table's newest version now, and a moment after it.
    let log = server.lake_dir().join("events/_delta_log");
    let newest = std::fs::read_dir(&log)
        .expect("the log")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()?
                .strip_suffix(".json")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .expect("a commit");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let second: Vec<String> = (0..2).map(|_| new_uuid()).collect();
    crate::deletion::prepare_lake(&server, &key, &survey, &second).await;
    server.cli_json(&["compact", "--json"]);
    let all_rows = count(&[]);
    assert!(all_rows > first_rows, "{all_rows} > {first_rows}");

    assert_eq!(count(&["--as-of", &newest.to_string()]), first_rows);
    assert_eq!(count(&["--as-of", &between]), first_rows);
    assert_eq!(count(&["--as-of", "0"]), 0, "version 0 is the empty table");

    // A date alone is its first instant (UTC); a time without a zone is UTC.
    assert_eq!(count(&["--as-of", "2000-01-01"]), 0, "before the table");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert!(count(&["--as-of", &today]) <= all_rows);
    let naive = chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string();
    assert!(count(&["--as-of", &naive]) > 0);

    let refused = |args: &[&str], says: &str| {
        let output = server.cli(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("LogSegment"), "kernel jargon: {stderr}");
    };
    refused(
        &["sql", "--as-of", "yesterday", "SELECT 1"],
        "neither a version number, a date (2026-11-25) nor a time",
    );
    refused(
        &["sql", "--as-of", "100000", "SELECT 1"],
        "the events table's newest version is",
    );

    // No rows is still a table with its columns, and a CSV header.
    let empty = server.cli_ok(&["sql", "SELECT reference FROM scores WHERE false"]);
    assert!(empty.contains("reference"), "{empty}");
    let empty = server.cli_ok(&[
        "sql",
        "--format",
        "csv",
        "SELECT reference, score_band FROM scores WHERE false",
    ]);
    assert_eq!(empty.trim(), "reference,score_band");
    let empty = server.cli_ok(&["sql", "--format", "json", "SELECT 1 AS x WHERE false"]);
    assert_eq!(empty.trim(), "[]");

    // A version from before an erasure lists files the erasure removed: reading it fails and
    // says so, rather than answering without the erased session's rows.
    let before_erasure =
        server.cli_ok(&["sql", "--format", "csv", "SELECT count(*) AS n FROM events"]);
    assert!(before_erasure.lines().nth(1).is_some());
    let log_versions = || {
        std::fs::read_dir(&log)
            .expect("the log")
            .filter_map(Result::ok)
            .filter_map(|entry| {
                entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".json")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .expect("a commit")
    };
    let version = log_versions();
    let reply =
        crate::deletion::request_deletion(&server, &key, &survey.survey_id, &first[0]).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done =
        crate::deletion::wait_deletion_done(&server, &key, &survey.survey_id, &first[0]).await;
    assert_eq!(done["status"], "completed", "{done}");
    refused(
        &[
            "sql",
            "--as-of",
            &version.to_string(),
            "SELECT count(*) FROM events",
        ],
        "which is gone",
    );
}

/// Counts the rows of each table with every outside reader the docs name, as one JSON object:
/// {reader: {table: rows}}. DuckDB reads the Delta snapshot's files (the Delta reader's file
/// list) and, where its `delta` extension can be installed, `delta_scan`.
const READERS_PY: &str = r#"
import json, sys
import deltalake, duckdb, polars, pyarrow.dataset
lake = sys.argv[1]
counts = {}
def put(reader, table, rows):
    counts.setdefault(reader, {})[table] = int(rows)
for table in ("events", "features", "scores"):
    path = f"{lake}/{table}"
    delta = deltalake.DeltaTable(path)
    put("deltalake", table, delta.to_pyarrow_table().num_rows)
    put("polars.read_delta", table, polars.read_delta(path).height)
    put("polars.scan_delta", table, polars.scan_delta(path).select(polars.len()).collect().item())
    put("pyarrow", table, delta.to_pyarrow_dataset().count_rows())
    files = delta.file_uris()
    rows = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet({files!r})").fetchone()[0] if files else 0
    put("duckdb", table, rows)
try:
    connection = duckdb.connect()
    connection.execute("INSTALL delta; LOAD delta;")
    for table in ("events", "features", "scores"):
        put("duckdb.delta_scan", table, connection.execute(f"SELECT count(*) FROM delta_scan('{lake}/{table}')").fetchone()[0])
except Exception as error:  # no network for the extension: the file-list reading above stands
    print(f"delta extension unavailable: {error}", file=sys.stderr)
print(json.dumps(counts))
"#;

/// The outside readers and `telltale sql` agree on every table's rows after a compaction and
/// after an erasure (issue 36: polars refused `scores`, and a plain glob double-counted).
#[tokio::test]
async fn every_outside_reader_counts_what_telltale_sql_counts() {
    let server = TestServer::start_with(&["--compaction-interval-secs", "0"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "readers", "Readers").await;
    let sessions: Vec<String> = (0..4).map(|_| new_uuid()).collect();
    crate::deletion::prepare_lake(&server, &key, &survey, &sessions[..2]).await;
    crate::deletion::prepare_lake(&server, &key, &survey, &sessions[2..]).await;
    crate::deletion::score_survey(&server, &key, &survey.survey_id).await;
    let sql_counts = || -> HashMap<String, u64> {
        ["events", "features", "scores"]
            .into_iter()
            .map(|table| {
                let csv = server.cli_ok(&[
                    "sql",
                    "--format",
                    "csv",
                    &format!("SELECT count(*) AS n FROM {table}"),
                ]);
                let rows = csv.lines().nth(1).and_then(|n| n.trim().parse().ok());
                (table.to_owned(), rows.unwrap_or_else(|| panic!("{csv}")))
            })
            .collect()
    };
    let agree = |when: &str| {
        let expected = sql_counts();
        let output = std::process::Command::new("python3")
            .args(["-c", READERS_PY, &server.lake_dir().display().to_string()])
            .output()
            .expect("python3 with deltalake, polars, pyarrow and duckdb");
        assert!(
            output.status.success(),
            "{when}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let counts: HashMap<String, HashMap<String, u64>> =
            serde_json::from_slice(&output.stdout).expect("counts");
        for (reader, tables) in &counts {
            for (table, rows) in tables {
                assert_eq!(
                    Some(rows),
                    expected.get(table),
                    "{when}: {reader} counts {rows} rows of {table}, telltale sql {:?}",
                    expected.get(table)
                );
            }
        }
        assert!(counts.len() >= 5, "{counts:?}");
        expected
    };
    let before = agree("after scoring");
    assert!(before["events"] > 0 && before["scores"] == 4, "{before:?}");
    // Two flushes made two files: compaction merges them; the replaced ones stay on disk.
    server.cli_json(&["compact", "--json"]);
    agree("after a compaction");
    let reply =
        crate::deletion::request_deletion(&server, &key, &survey.survey_id, &sessions[0]).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    crate::deletion::wait_deletion_done(&server, &key, &survey.survey_id, &sessions[0]).await;
    let after = agree("after an erasure");
    assert!(after["events"] < before["events"], "{after:?}");
    assert_eq!(after["scores"], 3, "{after:?}");
}
