//! The scoring-quality harness's bot generators (`scorer/quality/bots.js`) in real headless
//! Chromium against the real demo survey, embed and collector: every generator finishes the
//! survey, its session is captured under the reference the harness labels it with, and the
//! features tell the generators apart the way docs/evaluation.md says they differ.

use std::collections::HashMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{TestServer, duckdb_query};

const GENERATORS: [&str; 9] = [
    "naive",
    "stealth",
    "humanized",
    "replay",
    "agent",
    "ghost-cursor",
    "windmouse",
    "perlin",
    "minjerk",
];
/// The humanizers: their own pointer paths over one shared survey filling.
const PACED: [&str; 6] = [
    "humanized",
    "replay",
    "ghost-cursor",
    "windmouse",
    "perlin",
    "minjerk",
];

/// Runs one generator for one seed; returns its JSON line.
fn run_generator(base: &str, tracking_key: &str, generator: &str, strokes: &str) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scorer/quality");
    assert!(
        std::path::Path::new(dir)
            .join("node_modules/playwright-core")
            .exists(),
        "playwright-core is missing: npm ci --prefix scorer/quality (.ci/run does)"
    );
    let output = Command::new("node")
        .args(["bots.js", "--base", base, "--key", tracking_key])
        .args([
            "--generator",
            generator,
            "--seeds",
            "7",
            "--concurrency",
            "1",
        ])
        .args(["--replay-traces", strokes])
        .current_dir(dir)
        .output()
        .expect("run node (Node.js is required)");
    assert!(
        output.status.success(),
        "{generator}: {}",
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
    // Two hand-made "human" strokes for the replay generator (the harness uses Balabit TRAIN movements).
    let strokes_file = server.data_dir().join("strokes.json");
    let stroke: Vec<[f64; 3]> = (0..40)
        .map(|i| {
            let t = f64::from(i) * 16.0;
            let a = f64::from(i) / 12.0;
            [t, 300.0 + 80.0 * a.cos(), 200.0 + 60.0 * a.sin()]
        })
        .collect();
    std::fs::write(&strokes_file, json!([stroke, stroke]).to_string()).expect("write strokes");
    let strokes = strokes_file.to_str().expect("utf-8 path").to_owned();

    // The generators run side by side: the paced ones take tens of seconds each.
    let results: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = GENERATORS
            .iter()
            .map(|generator| {
                let (base, tracking, strokes) = (server.base_url(), &survey.tracking_key, &strokes);
                scope.spawn(move || run_generator(base, tracking, generator, strokes))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("generator thread"))
            .collect()
    });
    for result in &results {
        assert_eq!(result["ok"], true, "{result}");
    }

    // Score the survey; the features say what each generator looked like to the scorer.
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["scored"], 9,
        "every generator's session was captured: {run}"
    );
    let references: Vec<String> = results
        .iter()
        .map(|r| r["reference"].as_str().expect("reference").to_owned())
        .collect();
    let looked_up = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    for row in &looked_up {
        assert_eq!(
            row["modelVersion"], "telltale-v3",
            "the trained model is the default: {row}"
        );
    }
    assert_eq!(
        looked_up[0]["scoreBand"], "automation-like",
        "naive: {}",
        looked_up[0]
    );

    let rows = duckdb_query(&format!(
        "SELECT reference, webdriver, headless_user_agent, pointer_moves, key_presses, \
         input_without_keys FROM read_parquet('{}/features/survey_id=*/**/*.parquet')",
        server.lake_dir().display()
    ));
    let by_reference: HashMap<&str, &Value> = rows
        .iter()
        .map(|row| (row["reference"].as_str().expect("reference"), row))
        .collect();
    let features = |generator: &str| -> &Value {
        let result = results
            .iter()
            .find(|r| r["generator"] == generator)
            .expect("result");
        by_reference[result["reference"].as_str().expect("reference")]
    };
    let naive = features("naive");
    assert_eq!(
        (
            naive["webdriver"].as_f64(),
            naive["headless_user_agent"].as_f64()
        ),
        (Some(1.0), Some(1.0)),
        "{naive}"
    );
    for generator in GENERATORS.iter().skip(1) {
        let row = features(generator);
        assert_eq!(
            (
                row["webdriver"].as_f64(),
                row["headless_user_agent"].as_f64()
            ),
            (Some(0.0), Some(0.0)),
            "{generator} hides the automation flags: {row}"
        );
    }
    // Scripted fills insert text without key presses; paced generators press keys.
    assert_eq!(
        features("stealth")["input_without_keys"].as_f64(),
        Some(1.0)
    );
    // Paths: every humanizer's cursor travels and its keys are pressed one by one; the agent's
    // cursor jumps.
    for generator in PACED {
        let row = features(generator);
        assert!(
            row["key_presses"].as_f64() > Some(5.0),
            "{generator}: {row}"
        );
        assert!(
            row["pointer_moves"].as_f64() > Some(50.0),
            "{generator}: {row}"
        );
    }
    assert!(features("agent")["pointer_moves"].as_f64() < Some(20.0));
}
