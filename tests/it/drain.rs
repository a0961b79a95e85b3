//! `telltale drain`: an instance's write-ahead log flushed into the lake and the catalog
//! before the instance is retired, and refused while a server holds the log.

use serde_json::json;

use crate::harness::{TestServer, batch, new_uuid, now_millis, pointermove, session_event};

#[tokio::test]
async fn drain_flushes_a_dead_instances_log_so_its_data_dir_can_go() {
    // Nothing reaches the lake on its own for a minute: what is acknowledged stays in the log.
    let mut server = TestServer::start_with(&["--flush-interval-ms", "60000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "drain", "Drain").await;
    let references = [new_uuid(), new_uuid(), new_uuid()];
    let start = now_millis() - 30_000;
    let mut acknowledged = 0;
    for (index, reference) in references.iter().enumerate() {
        let mut events = vec![session_event(start, reference, reference)];
        for step in 0..(10 + 5 * index as i64) {
            events.push(pointermove(
                start + 10 + step * 16,
                step as i32,
                index as i32,
            ));
        }
        acknowledged += events.len();
        server
            .collect_ok(
                &survey.tracking_key,
                reference,
                &batch(&events),
                events.len(),
            )
            .await;
    }

    // While the server runs it holds the log: drain refuses and changes nothing.
    let refused = server.cli(&["drain"]);
    assert!(!refused.status.success(), "drain ran beside a live server");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("in use by another process"), "{stderr}");

    // The instance dies; its log is all that holds the batches' lake rows.
    server.kill_hard();
    let drained = server.cli_json(&["drain", "--json"]);
    assert_eq!(drained["drained"], json!(true), "{drained}");
    assert_eq!(
        drained["recordsFlushed"],
        json!(3),
        "one per batch: {drained}"
    );
    let position = &drained["position"];
    assert_eq!(position["lakeWatermark"], position["lastLsn"], "{drained}");
    assert_eq!(position["statsWatermark"], position["lastLsn"], "{drained}");

    // Draining again finds nothing left.
    let again = server.cli_json(&["drain", "--json"]);
    assert_eq!(
        (&again["drained"], &again["recordsFlushed"]),
        (&json!(true), &json!(0)),
        "{again}"
    );

    // The data dir's log goes; another instance serves everything from the catalog and lake.
    std::fs::remove_dir_all(server.data_dir().join("wal")).expect("remove the log");
    std::fs::remove_file(server.data_dir().join("instance-id")).expect("remove the id");
    let csv = server.cli_ok(&["sql", "--format", "csv", "SELECT count(*) AS n FROM events"]);
    assert_eq!(csv.trim(), format!("n\n{acknowledged}"));
    server.restart().await;
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    let counts: Vec<u64> = rows
        .iter()
        .map(|row| row["eventCount"].as_u64().expect("count"))
        .collect();
    assert_eq!(counts, [11, 16, 21], "{rows:?}");
}
