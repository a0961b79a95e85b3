//! Upgrades: the data an earlier release wrote opens under this one. Each folder under
//! `tests/upgrade/fixtures/<release>/` was written by that release's binary
//! (`tests/upgrade/make_fixture.py`, tests/upgrade/README.md): `embedded` (a SQLite catalog, a
//! lake folder and a log) and `postgres` (a pg_dump of the catalog, a lake folder and a log).
//! Each ends with batches in the log that no flush wrote. The current binary opens a copy and
//! must answer what the old one answered (lookups, the run, the deletion), replay the log into
//! the lake, score a new run and erase a session from the old files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::deletion::{request_deletion, wait_deletion_done};
use crate::harness::{TestServer, duckdb_query, send};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade/fixtures");
    let mut found = Vec::new();
    for release in std::fs::read_dir(&root).expect("tests/upgrade/fixtures") {
        let release = release.expect("a fixture release").path();
        for config in ["embedded", "postgres"] {
            let folder = release.join(config);
            if folder.join("expected.json").exists() {
                found.push(folder);
            }
        }
    }
    found.sort();
    found
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a folder");
    for entry in std::fs::read_dir(from).expect("read a fixture folder") {
        let entry = entry.expect("a fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// Every field the old release answered holds the same value now (a newer release may add
/// fields).
#[track_caller]
fn assert_reads_the_same(now: &Value, then: &Value, what: &str) {
    match (now, then) {
        (Value::Object(now_fields), Value::Object(then_fields)) => {
            for (name, value) in then_fields {
                let current = now_fields.get(name).unwrap_or(&Value::Null);
                assert_reads_the_same(current, value, &format!("{what}.{name}"));
            }
        }
        (Value::Array(now_items), Value::Array(then_items)) => {
            assert_eq!(now_items.len(), then_items.len(), "{what}: {now} vs {then}");
            for (index, (current, value)) in now_items.iter().zip(then_items).enumerate() {
                assert_reads_the_same(current, value, &format!("{what}[{index}]"));
            }
        }
        _ => assert_eq!(now, then, "{what} changed across the upgrade"),
    }
}

/// Events per browser session in the lake, as DuckDB reads its Parquet files.
fn events_in_lake(server: &TestServer) -> Vec<(String, u64)> {
    duckdb_query(&format!(
        "SELECT session_id, count(*) AS n FROM read_parquet({}, hive_partitioning = true)
         GROUP BY session_id ORDER BY session_id",
        server.events_files()
    ))
    .into_iter()
    .map(|row| {
        (
            row["session_id"].as_str().unwrap_or_default().to_owned(),
            row["n"].as_u64().expect("count"),
        )
    })
    .collect()
}

#[tokio::test]
async fn the_data_of_every_earlier_release_opens_reads_the_same_and_stays_erasable() {
    let fixtures = fixtures();
    assert!(!fixtures.is_empty(), "no upgrade fixtures");
    for fixture in fixtures {
        open_fixture(&fixture).await;
    }
}

/// The documented fixture script, run with this release's binary: what it writes opens the same
/// way (the script keeps working for the next release's fixtures).
#[tokio::test]
async fn the_fixture_script_writes_fixtures_this_release_opens() {
    let out = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade/make_fixture.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--binary", crate::harness::BIN, "--out"])
        .arg(out.path())
        .args(["--postgres", &crate::stores::postgres_admin_url()])
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "make_fixture.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for config in ["embedded", "postgres"] {
        open_fixture(&out.path().join(config)).await;
    }
}

async fn open_fixture(fixture: &Path) {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json is JSON");
    let key = expected["key"].as_str().expect("key");
    let survey_id = expected["surveyId"].as_str().expect("surveyId");
    let root = TestServer::new_root();
    let data = root.path().join("data");
    copy_folder(fixture, &data);
    let mut args: Vec<String> = vec!["--api-rate-per-minute".into(), "100000".into()];
    let mut database = None;
    if expected["config"] == "postgres" {
        let (url, name) = crate::stores::restore_postgres_dump(&data.join("catalog.sql"));
        args.extend(["--catalog".into(), url]);
        database = Some(name);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = TestServer::start_on_existing(root, key, &args).await;
    let what = fixture.display().to_string();

    // Everything reads as the old release answered it.
    let references: Vec<String> = expected["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|session| session["reference"].as_str().expect("reference").to_owned())
        .collect();
    let lookup = server
        .lookup(
            key,
            survey_id,
            &json!({ "externalReferences": references }).to_string(),
        )
        .await;
    assert_eq!(lookup.status, 200, "{what}: {}", lookup.text);
    assert_reads_the_same(&lookup.json()["data"], &expected["lookup"], &what);
    let run_id = expected["run"]["id"].as_str().expect("run id");
    let run = send(
        server
            .client()
            .get(server.url(&format!(
                "/integrations/v1/surveys/{survey_id}/scoring-runs/{run_id}"
            )))
            .bearer_auth(key),
    )
    .await;
    assert_eq!(run.status, 200, "{what}: {}", run.text);
    assert_reads_the_same(&run.json()["data"], &expected["run"], &what);
    let erased = expected["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|session| session["erased"] == true)
        .expect("an erased session");
    let erased_reference = erased["reference"].as_str().expect("reference");
    let deletion = wait_deletion_done(&server, key, survey_id, erased_reference).await;
    assert_reads_the_same(&deletion, &expected["deletion"], &what);

    // The log replays: the batches no flush wrote reach the lake, each session whole, once.
    // (browser session, events), sorted.
    let wanted: Vec<(String, u64)> = {
        let mut wanted: Vec<(String, u64)> = expected["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter(|session| session["erased"] != true)
            .map(|session| {
                (
                    session["identifier"]
                        .as_str()
                        .expect("identifier")
                        .to_owned(),
                    session["events"].as_u64().expect("events"),
                )
            })
            .collect();
        wanted.sort();
        wanted
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = events_in_lake(&server);
        if found == wanted {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the lake holds {found:?}, not {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A new run scores every session left, and an erasure reaches the old release's files.
    let run = server.run_scoring_to_end(key, survey_id).await;
    assert_eq!(run["status"], "completed", "{what}: {run}");
    assert_eq!(run["failed"], 0, "{what}: {run}");
    let gone = &expected["sessions"][1];
    let gone_reference = gone["reference"].as_str().expect("reference");
    let reply = request_deletion(&server, key, survey_id, gone_reference).await;
    assert_eq!(reply.status, 202, "{what}: {}", reply.text);
    let done = wait_deletion_done(&server, key, survey_id, gone_reference).await;
    assert_eq!(done["status"], "completed", "{what}: {done}");
    server.terminate_ok().await;
    let left: Vec<(String, u64)> = wanted
        .iter()
        .filter(|(identifier, _)| gone["identifier"] != identifier.as_str())
        .cloned()
        .collect();
    assert_eq!(events_in_lake(&server), left, "{what}: after the erasure");
    if let Some(name) = database {
        crate::stores::drop_database(&name);
    }
}
