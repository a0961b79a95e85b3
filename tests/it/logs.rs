//! `telltale log export`, `telltale log import` and `telltale score-features` through the real
//! binary: a deployment's traffic read out of its held log, logged into another deployment with
//! every arrival time kept (the lab's corpus is loaded this way), and scores computed from
//! feature rows equal, field by field, to the scoring run's own.

use std::collections::BTreeMap;

use scorer::synthetic::Behaviour;
use serde_json::{Value, json};

use crate::harness::TestServer;
use crate::scoring::{NO_API_LIMIT, post_generated, post_session};

/// Every row of a `telltale sql --format json` query.
fn sql_rows(server: &TestServer, query: &str) -> Vec<Value> {
    let out = server.cli_ok(&["sql", "--format", "json", query]);
    let text = out.trim();
    if text.starts_with('[') {
        serde_json::from_str::<Vec<Value>>(text).expect("sql rows")
    } else {
        text.lines()
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_str(line).expect("sql row"))
            .collect()
    }
}

/// Feature rows of a run by reference, every column but the table's keys.
fn features_of_run(server: &TestServer, run_id: &str) -> BTreeMap<String, Value> {
    sql_rows(
        server,
        &format!(
            "SELECT * EXCLUDE (survey_id, run_id, computed_at) FROM features WHERE run_id = '{run_id}'"
        ),
    )
    .into_iter()
    .map(|mut row| {
        let reference = row["reference"].as_str().expect("reference").to_owned();
        row.as_object_mut().expect("row").remove("reference");
        (reference, row)
    })
    .collect()
}

#[tokio::test]
async fn recorded_traffic_moves_to_another_deployment_and_scores_from_its_rows_as_a_run_does() {
    let mut source = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = source.key().to_owned();
    let survey = source.provision_ok(&key, "recorded", "Recorded").await;
    // Held as `telltale backup` holds it: no segment is retired, so the log still has every
    // batch when the server stops (the lab's recorder does the same).
    let hold = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(source.data_dir().join("wal").join("HOLD"))
        .expect("open HOLD");
    hold.lock().expect("hold the log");
    // People-like sessions of every seed, and a farm of one session posted again and again:
    // the cohort has something to find.
    for seed in 0..16 {
        post_session(&source, &survey, Behaviour::Human, seed).await;
    }
    for _ in 0..12 {
        post_generated(&source, &survey, "farm", Behaviour::Human, 1_000).await;
    }
    let run = source.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let run_id = run["id"].as_str().expect("run id").to_owned();
    let recorded = features_of_run(&source, &run_id);
    assert_eq!(recorded.len(), 28);

    // Scores from the run's feature rows, as one survey: the run's scores, reasons and all.
    let rows_path = source.data_dir().join("rows.jsonl");
    let rows: String = recorded
        .iter()
        .map(|(reference, features)| {
            format!(
                "{}\n",
                json!({"reference": reference, "features": features})
            )
        })
        .collect();
    std::fs::write(&rows_path, rows).expect("write rows");
    let scored = source.cli_ok(&["score-features", rows_path.to_str().expect("path")]);
    let from_rows: BTreeMap<String, Value> = scored
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).expect("score line");
            (value["reference"].as_str().expect("ref").to_owned(), value)
        })
        .collect();
    let from_run = sql_rows(
        &source,
        &format!(
            "SELECT reference, human_score_percent, score_band, reasons FROM scores WHERE run_id = '{run_id}'"
        ),
    );
    assert_eq!(from_run.len(), 28);
    let mut clustered = 0;
    for row in &from_run {
        let reference = row["reference"].as_str().expect("reference");
        let mine = &from_rows[reference];
        assert_eq!(
            mine["humanScorePercent"], row["human_score_percent"],
            "{mine} {row}"
        );
        assert_eq!(mine["scoreBand"], row["score_band"], "{mine} {row}");
        assert_eq!(mine["reasons"], row["reasons"], "{mine} {row}");
        clustered += usize::from(mine["clustered"] == json!(true));
        if mine["clustered"] == json!(true) {
            // A clustered session says in which modality it was found.
            assert!(
                matches!(
                    mine["cohortModality"].as_str(),
                    Some("pointing" | "typing" | "touch")
                ),
                "{mine}"
            );
        }
    }
    assert_eq!(clustered, 12, "the farm is named by the cohort of the rows");

    // The log, read out once the server is gone: every batch, as received.
    source.terminate_ok().await;
    drop(hold);
    let exported = source.cli_ok(&["log", "export"]);
    let records: Vec<Value> = exported
        .lines()
        .map(|line| serde_json::from_str(line).expect("record"))
        .collect();
    assert!(records.len() >= 28, "{} records", records.len());
    assert!(
        records
            .windows(2)
            .all(|pair| pair[0]["lsn"].as_u64() < pair[1]["lsn"].as_u64()),
        "records in log order"
    );
    assert!(
        records
            .iter()
            .all(|r| r["surveyId"] == json!(survey.survey_id))
    );
    let recorded_at: Vec<i64> = records
        .iter()
        .map(|r| r["receivedAt"].as_i64().expect("receivedAt"))
        .collect();

    // Into another deployment: refused while its server holds the log, then logged with the
    // recorded arrival times and scored to the same features.
    let mut target = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let target_key = target.key().to_owned();
    let loaded = target.provision_ok(&target_key, "loaded", "Loaded").await;
    let file = target.data_dir().join("recorded.jsonl");
    std::fs::write(&file, &exported).expect("write recorded");
    let file = file.to_str().expect("path");
    let refused = target.cli(&["log", "import", "--survey", &loaded.survey_id, file]);
    assert!(!refused.status.success(), "import ran beside a live server");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("in use by another process"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    target.terminate_ok().await;
    let unknown = target.cli(&[
        "log",
        "import",
        "--survey",
        "0123456789abcdef01234567",
        file,
    ]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("provision it first"));
    let imported = target.cli_json(&[
        "log",
        "import",
        "--survey",
        &loaded.survey_id,
        "--json",
        file,
    ]);
    assert_eq!(imported["batches"], json!(records.len()), "{imported}");
    assert_eq!(imported["sessions"], json!(28), "{imported}");
    let arrivals = sql_rows(
        &target,
        "SELECT DISTINCT CAST(received_at AS BIGINT) AS at FROM events ORDER BY at",
    );
    let mut expected = recorded_at.clone();
    expected.sort_unstable();
    expected.dedup();
    let found: Vec<i64> = arrivals
        .iter()
        .map(|row| row["at"].as_i64().expect("at"))
        .collect();
    assert_eq!(
        found, expected,
        "every batch keeps its recorded arrival time"
    );

    target.restart().await;
    let run = target
        .run_scoring_to_end(&target_key, &loaded.survey_id)
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    let reloaded = features_of_run(&target, run["id"].as_str().expect("run id"));
    assert_eq!(
        reloaded, recorded,
        "the loaded sessions' features are the recorded ones"
    );

    // A bad line is refused with its place, and nothing of the file is half-logged.
    target.terminate_ok().await;
    let bad = target.data_dir().join("bad.jsonl");
    std::fs::write(&bad, "{\"receivedAt\": 1, \"identifier\": \"x\"}\n").expect("write bad");
    let refused = target.cli(&[
        "log",
        "import",
        "--survey",
        &loaded.survey_id,
        bad.to_str().expect("path"),
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("line 1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
