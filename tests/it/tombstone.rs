//! A deleted session's tombstone: later collector batches are acknowledged with 202 and
//! discarded. The tombstone is written into the catalog directly, as another instance serving
//! the DELETE would, so this also shows how soon an instance notices one it did not write
//! (`deletion.rs` covers the endpoint and the erasure).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{TestServer, batch, new_uuid, now_millis, pointermove, session_event};

#[tokio::test]
async fn batches_for_a_tombstoned_reference_get_202_and_are_discarded() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "tombstones", "T").await;
    let tracking = survey.tracking_key.clone();
    let deleted = new_uuid();
    let kept = new_uuid();
    let linked = format!("browser-{}", &new_uuid()[..8]);
    let t = now_millis();

    server
        .collect_ok(
            &tracking,
            &deleted,
            &batch(&[pointermove(t, 1, 1), pointermove(t + 1, 2, 2)]),
            2,
        )
        .await;
    server
        .collect_ok(
            &tracking,
            &linked,
            &batch(&[
                session_event(t, &linked, &deleted),
                pointermove(t + 2, 3, 3),
            ]),
            2,
        )
        .await;
    server
        .collect_ok(&tracking, &kept, &batch(&[pointermove(t, 4, 4)]), 1)
        .await;
    let rows = server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(deleted.clone(), 4), (kept.clone(), 1)],
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(4), "{rows:?}");

    server.catalog_sql(&format!(
        "INSERT INTO tombstones (survey_id, reference, created_at) VALUES ('{}', '{deleted}', {})",
        survey.survey_id,
        now_millis()
    ));
    let inserted = Instant::now();

    // Until the service notices, batches are still stored; each one it stores is counted.
    let mut stored_meanwhile = 0u64;
    let one_event = batch(&[pointermove(now_millis(), 5, 5)]);
    let discarded = loop {
        let reply = server
            .collect(
                &tracking,
                &deleted,
                Some("application/json"),
                one_event.clone(),
            )
            .await;
        match reply.status {
            202 => break reply,
            201 => stored_meanwhile += 1,
            other => panic!("unexpected {other}: {}", reply.text),
        }
        assert!(
            inserted.elapsed() < Duration::from_secs(2),
            "the tombstone was not honoured within 2 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let noticed_after = inserted.elapsed();
    assert!(
        noticed_after <= Duration::from_millis(1500),
        "the tombstone took {noticed_after:?} to be honoured"
    );
    assert_eq!(
        discarded.json(),
        json!({ "success": true, "count": 1, "deleted": true })
    );

    // Identifiers linked to the reference by their session event are deleted too, and so is
    // the reference written in capitals.
    let reply = server
        .collect(
            &tracking,
            &linked,
            Some("text/plain"),
            batch(&[
                pointermove(now_millis(), 6, 6),
                pointermove(now_millis(), 7, 7),
            ]),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({ "success": true, "count": 2, "deleted": true })
    );
    let reply = server
        .collect(
            &tracking,
            &deleted.to_uppercase(),
            Some("application/json"),
            batch(&[]),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({ "success": true, "count": 0, "deleted": true })
    );

    // A page load after the deletion, under a new browser-session identifier: its session
    // event names the deleted reference, so the batch is discarded, and so are the
    // identifier's later batches.
    let reloaded = format!("browser-{}", &new_uuid()[..8]);
    let reply = server
        .collect(
            &tracking,
            &reloaded,
            Some("application/json"),
            batch(&[
                session_event(now_millis(), &reloaded, &deleted),
                pointermove(now_millis(), 9, 9),
            ]),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({ "success": true, "count": 2, "deleted": true })
    );
    let reply = server
        .collect(
            &tracking,
            &reloaded,
            Some("application/json"),
            batch(&[pointermove(now_millis(), 10, 10)]),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);

    // Other sessions are unaffected.
    server
        .collect_ok(
            &tracking,
            &kept,
            &batch(&[pointermove(now_millis(), 8, 8)]),
            1,
        )
        .await;

    // Once the kept session's new batch is visible, the discarded ones would be too: they are
    // not counted.
    let rows = server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(kept.clone(), 2), (deleted.clone(), 0)],
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(2), "{rows:?}");
    // Batches stored before the tombstone was noticed may be counted, or dropped on their way
    // from the log (the statistics consumer drops tombstoned sessions' batches once it knows);
    // discarded ones never are.
    let counted = rows[1]["eventCount"].as_u64().expect("count");
    assert!(
        (4..=4 + stored_meanwhile).contains(&counted),
        "discarded events were counted: {rows:?} ({stored_meanwhile} stored meanwhile)"
    );

    // The tombstone survives a restart.
    let mut server = server;
    server.terminate_ok().await;
    server.restart().await;
    let reply = server
        .collect(&tracking, &deleted, Some("application/json"), one_event)
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({ "success": true, "count": 1, "deleted": true })
    );
    let reply = server
        .collect(
            &tracking,
            &linked,
            Some("application/json"),
            batch(&[pointermove(now_millis(), 9, 9)]),
        )
        .await;
    assert_eq!(
        reply.status, 202,
        "a linked identifier after a restart: {}",
        reply.text
    );
    server
        .collect_ok(
            &tracking,
            &kept,
            &batch(&[pointermove(now_millis(), 8, 8)]),
            1,
        )
        .await;
}
