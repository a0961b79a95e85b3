//! The lake in an S3-compatible bucket (`--lake s3://bucket/prefix`): a real `moto_server`
//! (PyPI `moto[server]`, `.ci/run` installs it) started by the test, the real binary talking S3 to
//! it through object_store. Batches flushed, read back by `telltale sql`, scored, and nothing
//! written to the local folder the embedded default would use.

use serde_json::json;

use crate::harness::{TestServer, batch, new_uuid, now_millis, pointermove, session_event};
use crate::stores::{MotoServer, aws_env, create_bucket, start_moto};

const BUCKET: &str = "telltale-lake";

/// Keys under `prefix` in the bucket, from S3's ListObjectsV2.
async fn list_keys(moto: &MotoServer, prefix: &str) -> Vec<String> {
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("client");
    let body = client
        .get(format!(
            "{}/{BUCKET}?list-type=2&prefix={prefix}",
            moto.endpoint
        ))
        .send()
        .await
        .expect("list the bucket")
        .text()
        .await
        .expect("listing body");
    body.split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split("</Key>").next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_lake_lives_in_an_s3_bucket_when_asked() {
    let moto = start_moto();
    create_bucket(&moto.endpoint, BUCKET).await;
    let env = aws_env(&moto.endpoint);
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let lake_url = format!("s3://{BUCKET}/prod/lake");
    let mut server = TestServer::start_with_env(&["--lake", &lake_url], &env).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "s3-survey", "S3").await;

    let references = [new_uuid(), new_uuid()];
    let start = now_millis() - 60_000;
    let mut expected = 0;
    for (index, reference) in references.iter().enumerate() {
        let mut events = vec![session_event(start, reference, reference)];
        for step in 0..40 {
            events.push(pointermove(
                start + 20 + step * 16,
                100 + (step as i32) * 3 + index as i32,
                200 + (step as i32) % 7,
            ));
        }
        expected += events.len();
        server
            .collect_ok(
                &survey.tracking_key,
                reference,
                &batch(&events),
                events.len(),
            )
            .await;
    }
    // SIGTERM flushes everything buffered into the lake.
    server.terminate_ok().await;

    let objects = list_keys(&moto, "prod/lake/events/").await;
    assert!(
        objects.iter().any(|key| key.starts_with(&format!(
            "prod/lake/events/survey_id={}/date=",
            survey.survey_id
        )) && key.ends_with(".parquet")),
        "{objects:?}"
    );
    assert!(
        !server.data_dir().join("lake").exists(),
        "nothing goes to the local folder"
    );

    // DataFusion reads the bucket through the same store.
    let csv = server.cli_ok(&[
        "sql",
        "--lake",
        &lake_url,
        "--format",
        "csv",
        "SELECT count(*) AS n FROM events",
    ]);
    assert_eq!(csv.trim(), format!("n\n{expected}"));

    // A scoring run reads events from and writes features and scores to the bucket.
    server.restart().await;
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(
        (&run["status"], &run["scored"]),
        (&json!("completed"), &json!(2)),
        "{run}"
    );
    let scores = list_keys(&moto, "prod/lake/scores/").await;
    assert!(
        scores.iter().any(|key| key.ends_with(".parquet")),
        "{scores:?}"
    );
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    for row in &rows {
        assert!(row["humanScorePercent"].is_number(), "{row}");
    }
}
