//! The scoring-quality harness's recording path (`lab/replay`): a person's recorded
//! input played through the operating system (XTEST on Xvfb) into a headed Chromium on a survey
//! page served from another origin, through the real embed and collector, and its automation
//! twin (the same plan, window and page, straight minimum-jerk paths and metronome keys of the
//! same classes). The two event streams may differ in where the pointer went and when things
//! happened, and in nothing else: that is what "people and automation recorded the same way"
//! means, checked field by field.

use std::collections::HashMap;
use std::process::Command;

use serde_json::Value;

use crate::harness::{TestServer, duckdb_query};

/// The columns of an event that say what happened, not where the pointer was or when: every
/// column of the events table but the coordinates (`x`, `y`, and the press offsets `dx`, `dy`
/// of pointer events), the times, and the raw payload (compared apart for the session event).
const WHAT: &[&str] = &[
    "type",
    "pointer_type",
    "trusted",
    "button",
    "target",
    "key_class",
    "repeat",
    "input_type",
    "length_delta",
    "field",
    "length",
    "delta_mode",
    "state",
];

fn record_pair(base: &str, tracking_key: &str) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lab");
    let output = Command::new("python3")
        .args(["-m", "replay.twin", "--base", base, "--key", tracking_key])
        .current_dir(dir)
        .output()
        .expect("run python3 (the replay needs python3 with python-xlib, Xvfb and Chromium: .ci/run installs them)");
    assert!(
        output.status.success(),
        "replay.twin failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("no JSON ({e}): {stdout}"))
}

#[tokio::test]
async fn a_replayed_person_and_its_automation_twin_differ_only_in_movement_and_timing() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "replay-twin", "Replay").await;
    let pair = record_pair(server.base_url(), &survey.tracking_key);
    let person = pair["person"]
        .as_str()
        .expect("person reference")
        .to_owned();
    let twin = pair["twin"].as_str().expect("twin reference").to_owned();
    assert_eq!(pair["actions"][0], pair["actions"][1], "{pair}");
    assert_eq!(pair["keys"][0], pair["keys"][1], "{pair}");
    assert!(
        pair["keys"][0].as_u64() > Some(20),
        "the person typed: {pair}"
    );

    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let events = duckdb_query(&format!(
        // Events of one millisecond keep the order they were sent in: their place in the file.
        "SELECT reference, {}, x, y, payload FROM read_parquet('{}/events/survey_id=*/**/*.parquet', \
         filename = true, file_row_number = true) \
         ORDER BY event_time, received_at, filename, file_row_number",
        WHAT.join(", "),
        server.lake_dir().display()
    ));
    let of = |reference: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|row| row["reference"] == reference)
            .collect()
    };
    let (person_events, twin_events) = (of(&person), of(&twin));

    // What the browser reported of itself is the same but for the session's own identifiers.
    let environment = |rows: &[&Value], kind: &str| -> Value {
        let row = rows
            .iter()
            .find(|row| row["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event"));
        let mut payload: Value =
            serde_json::from_str(row["payload"].as_str().expect("payload")).expect("JSON");
        let data = payload["data"].as_object_mut().expect("data");
        data.remove("sessionId");
        data.remove("interviewId");
        payload["data"].clone()
    };
    for kind in ["session", "environment"] {
        assert_eq!(
            environment(&person_events, kind),
            environment(&twin_events, kind),
            "the {kind} events differ"
        );
    }
    let session = environment(&person_events, "session");
    assert_eq!(session["webdriver"], false, "{session}");
    assert!(
        !session["userAgent"]
            .as_str()
            .unwrap_or("")
            .contains("Headless"),
        "a headed browser: {session}"
    );

    // Every discrete event, in order, the same in everything but coordinates and time.
    // Pointer moves and scroll positions are the movement itself (their number follows the
    // path and the smooth scroll); key releases come in another order when a person's keys
    // overlap, so they are compared as a multiset; a `resize` is the window system settling
    // the new window, in either session or neither; the page's end (`pagehide`, `visibility`)
    // is the browser closing, in whichever order its teardown runs (CI saw both orders); the
    // embed's counts (`delivery` at the head of each batch, `page` a second after the content
    // changed) fall where its timers do, and are compared below.
    let discrete = |rows: &[&Value]| -> Vec<Vec<Value>> {
        rows.iter()
            .filter(|row| {
                !matches!(
                    row["type"].as_str(),
                    Some(
                        "pointermove"
                            | "scroll"
                            | "keyup"
                            | "resize"
                            | "session"
                            | "environment"
                            | "pagehide"
                            | "visibility"
                            | "delivery"
                            | "page"
                    )
                )
            })
            .map(|row| WHAT.iter().map(|column| row[*column].clone()).collect())
            .collect()
    };
    let (a, b) = (discrete(&person_events), discrete(&twin_events));
    assert!(a.len() > 50, "{} discrete events", a.len());
    for (index, (left, right)) in a.iter().zip(&b).enumerate() {
        assert_eq!(left, right, "discrete event {index} differs");
    }
    assert_eq!(a.len(), b.len(), "as many discrete events");
    let releases = |rows: &[&Value]| -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for row in rows.iter().filter(|row| row["type"] == "keyup") {
            *counts.entry(row["key_class"].to_string()).or_default() += 1;
        }
        counts
    };
    assert_eq!(releases(&person_events), releases(&twin_events));
    // Embed 1.4's counts. The page showed the same content to both (as a set: when a recount
    // falls is the embed's timer), and every press of both came through the operating system
    // with a mouse's pressure.
    let data = |rows: &[&Value], kind: &str| -> Vec<Value> {
        rows.iter()
            .filter(|row| row["type"] == kind)
            .map(|row| {
                let payload: Value =
                    serde_json::from_str(row["payload"].as_str().expect("payload")).expect("JSON");
                payload["data"].clone()
            })
            .collect()
    };
    let contents = |rows: &[&Value]| -> Vec<String> {
        let mut seen: Vec<String> = data(rows, "page").iter().map(Value::to_string).collect();
        seen.sort();
        seen.dedup();
        seen
    };
    assert!(!contents(&person_events).is_empty());
    assert_eq!(contents(&person_events), contents(&twin_events));
    for rows in [&person_events, &twin_events] {
        let counts = data(rows, "delivery");
        let total = |name: &str| {
            counts
                .iter()
                .map(|d| d[name].as_u64().expect("a count"))
                .sum::<u64>()
        };
        assert!(total("mousePresses") > 0, "{counts:?}");
        assert_eq!(total("zeroPressurePresses"), 0, "{counts:?}");
    }
    // The movement went through the operating system in both: trusted mouse events.
    for rows in [&person_events, &twin_events] {
        let moves: Vec<_> = rows
            .iter()
            .filter(|row| row["type"] == "pointermove")
            .collect();
        assert!(moves.len() > 50, "{} moves", moves.len());
        assert!(
            moves
                .iter()
                .all(|row| row["trusted"] == true && row["pointer_type"] == "mouse")
        );
    }
    // And the two really moved differently: the person's path is not the twin's.
    let path = |rows: &[&Value]| -> Vec<(i64, i64)> {
        rows.iter()
            .filter(|row| row["type"] == "pointermove")
            .map(|row| {
                (
                    row["x"].as_i64().unwrap_or(0),
                    row["y"].as_i64().unwrap_or(0),
                )
            })
            .collect()
    };
    assert_ne!(path(&person_events), path(&twin_events));
}
