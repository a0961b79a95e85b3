//! Real Chromium (Debian's, headless) on the demo survey, driven by playwright-core
//! (`tests/browser/session.js`; `.ci/run` installs both): what the embed sends, that it never
//! sends answers, and that it fails open.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestServer, duckdb_query, new_uuid};

/// Runs one browser session; returns what the script reports.
pub(crate) fn browser_session(
    server: &TestServer,
    tracking_key: &str,
    reference: &str,
    typed: &str,
    pasted: &str,
    collector: &str,
) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "Debian's chromium is missing: apt-get install -y chromium (.ci/run does)"
    );
    assert!(
        std::path::Path::new(dir)
            .join("node_modules/playwright-core")
            .exists(),
        "playwright-core is missing: npm ci --prefix tests/browser (.ci/run does)"
    );
    let output = Command::new("node")
        .arg("session.js")
        .current_dir(dir)
        .env("BASE", server.base_url())
        .env("TRACKING_KEY", tracking_key)
        .env("REFERENCE", reference)
        .env("SECRET_TYPED", typed)
        .env("SECRET_PASTED", pasted)
        .env("COLLECTOR", collector)
        .output()
        .expect("run node (Node.js is required)");
    assert!(
        output.status.success(),
        "browser session failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("no JSON ({e}): {stdout}"))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            if entry.file_type().expect("file type").is_dir() {
                stack.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files
}

#[tokio::test]
async fn a_real_browser_session_is_captured_and_its_answers_are_not() {
    let mut server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "browser-survey", "Browser").await;
    let reference = new_uuid();
    let typed = format!("typedsecret{}", &new_uuid()[..8]);
    let pasted = format!("pastedsecret{}", &new_uuid()[..8]);

    let report = browser_session(
        &server,
        &survey.tracking_key,
        &reference,
        &typed,
        &pasted,
        "up",
    );
    assert_eq!(report["pageErrors"], json!([]), "{report}");
    assert_eq!(report["finished"], true);
    assert_eq!(
        report["answers"]["experience"],
        typed.as_str(),
        "the page works"
    );
    assert_eq!(report["answers"]["colour"], pasted.as_str(), "paste works");

    // Every event the page sent is counted by lookup, no more, no less.
    let sent = report["sentEvents"].as_u64().expect("sentEvents");
    assert!(sent > 50, "{report}");
    let rows = server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(reference.clone(), sent)],
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], sent, "{}", rows[0]);

    // The last second before leaving arrived by the pagehide beacon.
    let beacon: Vec<&str> = report["beaconTypes"]
        .as_array()
        .expect("beaconTypes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(beacon.contains(&"pagehide"), "{report}");
    assert!(beacon.contains(&"pointermove"), "{report}");

    // The vocabulary of DESIGN.md, field by field.
    let fields = &report["fields"];
    let expect = |kind: &str, names: &[&str]| {
        assert_eq!(fields[kind], json!(names), "{kind}: {fields}");
    };
    expect("pointermove", &["pointerType", "trusted", "x", "y"]);
    // A press also says where it landed on its target (embed 1.3): offsets from the centre in
    // half-sizes, never the target's box.
    expect(
        "pointerdown",
        &[
            "button",
            "dx",
            "dy",
            "pointerType",
            "target",
            "trusted",
            "x",
            "y",
        ],
    );
    for kind in ["pointerup", "click"] {
        expect(
            kind,
            &["button", "pointerType", "target", "trusted", "x", "y"],
        );
    }
    expect("fieldfocus", &["field", "target"]);
    expect("keydown", &["keyClass", "repeat", "trusted"]);
    expect("keyup", &["keyClass", "repeat", "trusted"]);
    expect("input", &["field", "inputType", "lengthDelta"]);
    expect("paste", &["length"]);
    expect("wheel", &["deltaMode", "dx", "dy", "trusted"]);
    expect("submit", &[]);
    let session_fields = fields["session"].as_array().expect("a session event");
    for name in [
        "sessionId",
        "interviewId",
        "embedVersion",
        "userAgent",
        "webdriver",
        "screenWidth",
        "viewportWidth",
    ] {
        assert!(
            session_fields.contains(&json!(name)),
            "session lacks {name}: {fields}"
        );
    }

    // Environment tells are booleans (or null: nothing to judge), never the strings they were
    // read from. Headless Chromium draws WebGL with SwiftShader; this run does not patch
    // `navigator.webdriver`; its last click came from Playwright's page script, which sends
    // the environment again with `automationStack`.
    expect(
        "environment",
        &[
            "automationGlobals",
            "automationStack",
            "softwareRenderer",
            "webdriverPatched",
        ],
    );
    let environments = report["environments"].as_array().expect("environments");
    assert_eq!(environments.len(), 2, "{report}");
    for environment in environments {
        for (_, value) in environment.as_object().expect("an object") {
            assert!(value.is_boolean() || value.is_null(), "{environment}");
        }
        assert_eq!(environment["webdriverPatched"], false, "{environment}");
        assert_eq!(environment["automationGlobals"], false, "{environment}");
        assert_eq!(environment["softwareRenderer"], true, "{environment}");
    }
    assert_eq!(environments[0]["automationStack"], false, "{report}");
    assert_eq!(environments[1]["automationStack"], true, "{report}");

    // How input reached the page (embed 1.4), counts only. Playwright's presses carry a mouse's
    // 0.5 pressure; the one press the script sent through the DevTools protocol without a force
    // carries none. Its moves come one per event, never with coalesced samples.
    expect(
        "delivery",
        &[
            "mousePresses",
            "multiSampleMoves",
            "sampledMoves",
            "zeroPressurePresses",
        ],
    );
    let total = |name: &str| -> u64 {
        report["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .map(|d| d[name].as_u64().expect("a count"))
            .sum()
    };
    assert!(total("mousePresses") >= 6, "{report}");
    assert_eq!(total("zeroPressurePresses"), 1, "{report}");
    assert!(total("sampledMoves") >= 40, "{report}");
    assert_eq!(total("multiSampleMoves"), 0, "{report}");

    // The page's content (embed 1.4): visible words and controls, counted again when the
    // survey shows its next page without a page load. The first count agrees with what the
    // browser itself renders as text (`innerText`) within a tenth.
    expect("page", &["controls", "words"]);
    let pages = report["pages"].as_array().expect("pages");
    // The demo's two pages of questions, then its thank-you with nothing to answer.
    assert_eq!(pages.len(), 3, "{report}");
    let words = pages[0]["words"].as_f64().expect("words");
    let rendered = report["innerTextWords"].as_f64().expect("innerTextWords");
    assert!(
        (words - rendered).abs() <= rendered / 10.0,
        "the embed counted {words} words, the browser renders {rendered}"
    );
    assert!(pages[0]["controls"].as_u64() > Some(0), "{report}");
    assert!(pages[1]["controls"].as_u64() > Some(0), "{report}");
    assert_eq!(pages[2]["controls"], 0, "{report}");

    // The scorer reads both from the lake: the share of presses without pressure, the moves'
    // samples, the three page views and the words shown on them.
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");

    // Privacy: neither answer is anywhere under the data dir: not in the log or the catalog as
    // bytes, and not in any Parquet file as decoded rows.
    server.terminate_ok().await;
    let features: Value = serde_json::from_str(
        server
            .cli_ok(&[
                "sql",
                &format!(
                    "SELECT zero_pressure_presses, multi_sample_move_fraction, page_views, page_words \
                     FROM features WHERE reference = '{reference}'"
                ),
                "--format",
                "json",
            ])
            .trim(),
    )
    .expect("json");
    let shown: f64 = pages.iter().filter_map(|p| p["words"].as_f64()).sum();
    assert_eq!(
        features,
        json!([{
            "zero_pressure_presses": 1.0 / total("mousePresses") as f64,
            "multi_sample_move_fraction": 0.0,
            "page_views": 3.0,
            "page_words": shown,
        }]),
        "{report}"
    );
    for file in files_under(server.data_dir()) {
        let bytes = std::fs::read(&file).expect("read");
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&typed) && !text.contains(&pasted),
            "{} holds an answer",
            file.display()
        );
    }
    let rows = duckdb_query(&format!(
        "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM read_parquet('{}/*/survey_id=*/**/*.parquet', union_by_name = true)",
        server.lake_dir().display()
    ));
    assert!(!rows.is_empty());
    let decoded = serde_json::to_string(&rows).expect("json");
    assert!(decoded.contains(&reference), "the rows are the session's");
    assert!(!decoded.contains(&typed) && !decoded.contains(&pasted));
}

#[tokio::test]
async fn the_page_works_when_the_collector_is_down_or_failing() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server
        .provision_ok(&key, "browser-failopen", "Fail open")
        .await;
    for collector in ["down", "error"] {
        let report = browser_session(
            &server,
            &survey.tracking_key,
            &new_uuid(),
            "hello there",
            "pasted",
            collector,
        );
        assert_eq!(report["pageErrors"], json!([]), "{collector}: {report}");
        assert_eq!(report["finished"], true, "{collector}: {report}");
        assert_eq!(report["answers"]["experience"], "hello there");
        // It tried and backed off (1 s doubling per failure, at least half of it with the
        // jitter): over a session of about 12 s at most six fetches and the pagehide beacon,
        // not one request per batch (the collector is a closed port, or a real server
        // answering 500).
        let attempts = report["attempts"].as_u64().expect("attempts");
        assert!(
            (1..=8).contains(&attempts),
            "{collector}: {attempts} attempts"
        );
    }
}

#[tokio::test]
async fn a_flaky_collector_loses_no_event() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "browser-flaky", "Flaky").await;
    let reference = new_uuid();
    let report = browser_session(
        &server,
        &survey.tracking_key,
        &reference,
        "typed",
        "pasted",
        "flaky",
    );
    assert_eq!(report["pageErrors"], json!([]), "{report}");
    assert_eq!(report["finished"], true, "{report}");
    // The stand-in refused every third request: 503, 429 and a reset each came up.
    let refused = report["refused"].as_array().expect("refused");
    for kind in ["503", "429", "reset"] {
        assert!(
            refused.contains(&json!(kind)),
            "{kind} never tried: {report}"
        );
    }
    // Before the page was left, every event it produced had been accepted, none dropped.
    let drained = &report["drained"];
    let produced = drained["produced"].as_u64().expect("produced");
    assert!(produced > 600, "{report}");
    assert_eq!(drained["accepted"], produced, "{report}");
    assert_eq!(drained["dropped"], 0, "{report}");
    // The collector holds exactly those, plus what the pagehide beacon carried: nothing lost,
    // nothing twice.
    let expected = produced + report["beaconEvents"].as_u64().expect("beaconEvents");
    assert_eq!(report["sentEvents"], expected, "{report}");
    let rows = server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(reference.clone(), expected)],
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], expected, "{}", rows[0]);
}
