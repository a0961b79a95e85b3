//! The scoring-quality harness's bot generators (`lab/bots.js`) in real headless
//! Chromium against the real demo survey, embed and collector: every generator finishes the
//! survey, its session is captured under the reference the harness labels it with, and the
//! features tell the generators apart the way docs/evaluation.md says they differ.

use std::collections::HashMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{TestServer, duckdb_query};

/// The sessions run: naive and stealth, and factorial sessions with forced levels that between
/// them cover every modality, every typing level and both drivers (generator, seed, flags).
const RUNS: [(&str, u32, &[&str]); 7] = [
    ("naive", 7, &[]),
    ("stealth", 7, &[]),
    (
        "factorial",
        7,
        &[
            "--modality",
            "mouse",
            "--path",
            "bezier",
            "--driver",
            "cdp",
            "--typing",
            "population",
        ],
    ),
    (
        "factorial",
        8,
        &[
            "--modality",
            "mouse",
            "--path",
            "replay",
            "--driver",
            "webdriver",
            "--typing",
            "metronome",
        ],
    ),
    (
        "factorial",
        9,
        &[
            "--modality",
            "keyboard",
            "--driver",
            "cdp",
            "--typing",
            "replay",
        ],
    ),
    (
        "factorial",
        10,
        &[
            "--modality",
            "touch",
            "--driver",
            "webdriver",
            "--typing",
            "population",
        ],
    ),
    (
        "factorial",
        11,
        &[
            "--modality",
            "paste",
            "--path",
            "ghost-cursor",
            "--driver",
            "cdp",
            "--typing",
            "insert",
        ],
    ),
];

/// Runs one session (fast pacing: a script's pauses); returns its JSON line.
fn run_session(
    base: &str,
    tracking_key: &str,
    (generator, seed, flags): (&str, u32, &[&str]),
    traces: (&str, &str),
) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lab");
    assert!(
        std::path::Path::new(dir)
            .join("node_modules/selenium-webdriver")
            .exists(),
        "the bots' npm packages are missing: npm ci --prefix lab (.ci/run does)"
    );
    let seed = seed.to_string();
    let mut command = Command::new("node");
    command
        .args(["bots.js", "--base", base, "--key", tracking_key])
        .args([
            "--generator",
            generator,
            "--seeds",
            seed.as_str(),
            "--concurrency",
            "1",
        ])
        .args(["--replay-traces", traces.0, "--typing-traces", traces.1]);
    if generator == "factorial" {
        command.args(["--pacing", "fast"]).args(flags);
    }
    let output = command
        .current_dir(dir)
        .output()
        .expect("run node (Node.js is required)");
    assert!(
        output.status.success(),
        "{generator} {seed}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("no JSON ({e}): {stdout}"))
}

#[tokio::test]
async fn every_bot_generator_fills_in_the_demo_survey_through_the_real_embed() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "quality-bots", "Bots").await;
    // Two hand-made "human" strokes for the replay path (the harness uses Balabit TRAIN
    // movements), and a hand-made typist for the replay typing (the harness uses CMU TRAIN ones).
    let strokes_file = server.data_dir().join("strokes.json");
    let stroke: Vec<[f64; 3]> = (0..40)
        .map(|i| {
            let t = f64::from(i) * 16.0;
            let a = f64::from(i) / 12.0;
            [t, 300.0 + 80.0 * a.cos(), 200.0 + 60.0 * a.sin()]
        })
        .collect();
    std::fs::write(&strokes_file, json!([stroke, stroke]).to_string()).expect("write strokes");
    let traces_file = server.data_dir().join("typing.json");
    let keys: Vec<Value> = (0..60)
        .map(|i| {
            let down = 180.0 * f64::from(i) + 40.0 * f64::from(i % 3);
            json!([down, down + 95.0, if i % 6 == 5 { "digit" } else { "char" }])
        })
        .collect();
    std::fs::write(
        &traces_file,
        json!([{"person": "t1", "keys": keys}]).to_string(),
    )
    .expect("write typing traces");
    let strokes = strokes_file.to_str().expect("utf-8 path").to_owned();
    let traces = traces_file.to_str().expect("utf-8 path").to_owned();

    // The sessions run side by side.
    let results: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = RUNS
            .iter()
            .map(|run| {
                let (base, tracking) = (server.base_url(), &survey.tracking_key);
                let files = (strokes.as_str(), traces.as_str());
                scope.spawn(move || run_session(base, tracking, *run, files))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("session thread"))
            .collect()
    });
    for result in &results {
        assert_eq!(result["ok"], true, "{result}");
    }
    // Every line says which levels the session had; forced levels are the ones it got.
    for (result, (generator, _, flags)) in results.iter().zip(RUNS) {
        let factors = &result["factors"];
        if generator == "factorial" {
            for pair in flags.chunks(2) {
                let factor = pair[0].trim_start_matches("--");
                assert_eq!(factors[factor], pair[1], "{result}");
            }
            assert_eq!(factors["pacing"], "fast", "{result}");
        } else {
            assert_eq!(factors["modality"], "library", "{result}");
        }
    }

    // Score the survey; the features say what each session looked like to the scorer.
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["scored"], 7, "every session was captured: {run}");
    let references: Vec<String> = results
        .iter()
        .map(|r| r["reference"].as_str().expect("reference").to_owned())
        .collect();
    let looked_up = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    for row in &looked_up {
        assert_eq!(
            row["modelVersion"], "telltale-v4",
            "the trained model is the default: {row}"
        );
    }
    assert_eq!(
        looked_up[0]["scoreBand"], "automation-like",
        "naive: {}",
        looked_up[0]
    );

    let rows = duckdb_query(&format!(
        "SELECT reference, webdriver, headless_user_agent, automation_globals, pointer_moves, \
         key_presses, input_without_keys, pasted_chars, touch_taps \
         FROM read_parquet('{}/features/survey_id=*/**/*.parquet')",
        server.lake_dir().display()
    ));
    let by_reference: HashMap<&str, &Value> = rows
        .iter()
        .map(|row| (row["reference"].as_str().expect("reference"), row))
        .collect();
    let features = |index: usize| -> &Value {
        by_reference[results[index]["reference"].as_str().expect("reference")]
    };
    let naive = features(0);
    assert_eq!(
        (
            naive["webdriver"].as_f64(),
            naive["headless_user_agent"].as_f64()
        ),
        (Some(1.0), Some(1.0)),
        "{naive}"
    );
    for (index, run) in RUNS.iter().enumerate().skip(1) {
        let row = features(index);
        assert_eq!(
            (
                row["webdriver"].as_f64(),
                row["headless_user_agent"].as_f64(),
                row["automation_globals"].as_f64()
            ),
            (Some(0.0), Some(0.0), Some(0.0)),
            "{run:?} hides the automation flags (chromedriver's too): {row}"
        );
    }
    // Scripted fills insert text without key presses.
    assert_eq!(features(1)["input_without_keys"].as_f64(), Some(1.0));
    // Mouse and ghost-cursor paste sessions move a pointer and (but for insert typing) press keys.
    for index in [2, 3, 6] {
        let row = features(index);
        assert!(
            row["pointer_moves"].as_f64() > Some(50.0),
            "{:?}: {row}",
            RUNS[index]
        );
    }
    for index in [2, 3, 4, 5] {
        let row = features(index);
        assert!(
            row["key_presses"].as_f64() > Some(5.0),
            "{:?}: {row}",
            RUNS[index]
        );
    }
    // The keyboard session has no pointer at all; the phone taps; the paste session pastes.
    let keyboard = features(4);
    assert_eq!(keyboard["pointer_moves"].as_f64(), Some(0.0), "{keyboard}");
    let touch = features(5);
    assert!(touch["touch_taps"].as_f64() >= Some(5.0), "{touch}");
    let paste = features(6);
    assert!(paste["pasted_chars"].as_f64() > Some(5.0), "{paste}");
}
