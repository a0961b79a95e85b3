//! `POST /integrations/v1/surveys/{surveyId}/sessions/lookup`: validation, tenancy, row order
//! and the capture statistics aggregated per reference.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    TestServer, assert_error, assert_instant, batch, new_uuid, now_millis, pointermove,
    session_event,
};

/// The nine fields of a lookup row.
const ROW_FIELDS: [&str; 9] = [
    "captured",
    "eventCount",
    "externalReference",
    "firstEventAt",
    "humanScorePercent",
    "lastEventAt",
    "modelVersion",
    "scoreBand",
    "scoredAt",
];

fn assert_row_fields(row: &Value) {
    let mut fields: Vec<&str> = row
        .as_object()
        .expect("row object")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, ROW_FIELDS, "{row}");
}

fn assert_uncaptured(row: &Value, submitted: &str) {
    assert_row_fields(row);
    assert_eq!(
        row,
        &json!({
            "externalReference": submitted,
            "captured": false,
            "eventCount": 0,
            "firstEventAt": null,
            "lastEventAt": null,
            "humanScorePercent": null,
            "scoreBand": null,
            "scoredAt": null,
            "modelVersion": null,
        })
    );
}

#[tokio::test]
async fn lookup_validates_the_survey_and_the_body() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "lookup-validation", "V").await;
    let one = json!({ "externalReferences": [new_uuid()] }).to_string();

    // Surveys that do not exist, are malformed, or belong to another organization: 404.
    assert_error(
        &server.lookup(&key, "0123456789abcdef01234567", &one).await,
        404,
    );
    for malformed in [
        "not-a-survey",
        "0123456789abcdef0123456",
        "zzzzzzzzzzzzzzzzzzzzzzzz",
    ] {
        assert_error(&server.lookup(&key, malformed, &one).await, 404);
    }
    let org = server.create_org("Neighbour");
    let neighbour_key = server.create_key(&org, "server", None).key;
    let neighbour_survey = server
        .provision_ok(&neighbour_key, "lookup-validation", "Theirs")
        .await;
    assert_error(
        &server.lookup(&key, &neighbour_survey.survey_id, &one).await,
        404,
    );
    assert_error(
        &server.lookup(&neighbour_key, &survey.survey_id, &one).await,
        404,
    );
    // The survey id is case-insensitive hex.
    let upper = survey.survey_id.to_uppercase();
    let reply = server.lookup(&key, &upper, &one).await;
    assert_eq!(reply.status, 200, "{}", reply.text);

    // Bodies: 0 or 101 references, a non-UUID, wrong types, not JSON.
    let references = |count: usize| -> Vec<String> { (0..count).map(|_| new_uuid()).collect() };
    let bad_bodies = [
        json!({ "externalReferences": [] }).to_string(),
        json!({ "externalReferences": references(101) }).to_string(),
        json!({ "externalReferences": [new_uuid(), "not-a-uuid"] }).to_string(),
        json!({ "externalReferences": [new_uuid().replace('-', "")] }).to_string(),
        json!({ "externalReferences": [format!("{{{}}}", new_uuid())] }).to_string(),
        json!({ "externalReferences": [""] }).to_string(),
        json!({ "externalReferences": [42] }).to_string(),
        json!({ "externalReferences": [null] }).to_string(),
        json!({ "externalReferences": new_uuid() }).to_string(),
        json!({ "externalReferences": { "a": new_uuid() } }).to_string(),
        json!({ "externalReferences": null }).to_string(),
        json!({}).to_string(),
        json!([new_uuid()]).to_string(),
        json!([[new_uuid()]]).to_string(),
        "{\"externalReferences\": [".to_owned(),
        "externalReferences=1".to_owned(),
        String::new(),
    ];
    for body in &bad_bodies {
        let reply = server.lookup(&key, &survey.survey_id, body).await;
        assert_eq!(reply.status, 400, "body {body}: {}", reply.text);
        assert_error(&reply, 400);
    }

    // 100 references are fine and give 100 rows.
    let hundred = references(100);
    let rows = server.lookup_rows(&key, &survey.survey_id, &hundred).await;
    assert_eq!(rows.len(), 100);
    for (row, reference) in rows.iter().zip(&hundred) {
        assert_uncaptured(row, reference);
    }
}

#[tokio::test]
async fn lookup_aggregates_every_identifier_of_a_reference_in_input_order() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "lookup-stats", "Stats").await;
    let tracking = survey.tracking_key.clone();

    // 2023-11-14T22:13:20.000Z
    let t0: i64 = 1_700_000_000_000;
    let reference = new_uuid();
    let other_reference = new_uuid();
    let uncaptured = new_uuid();
    let browser_a = format!("browser-a-{}", &new_uuid()[..8]);
    let browser_b = format!("browser-b-{}", &new_uuid()[..8]);

    // Two browser sessions name the reference in their `session` event; a third identifier is
    // the reference itself (a UUID identifier is its own reference).
    server
        .collect_ok(
            &tracking,
            &browser_a,
            &batch(&[
                session_event(t0 + 1000, &browser_a, &reference),
                pointermove(t0 + 1100, 1, 1),
                pointermove(t0 + 1200, 2, 2),
                pointermove(t0 + 1300, 3, 3),
            ]),
            4,
        )
        .await;
    server
        .collect_ok(
            &tracking,
            &browser_b,
            &batch(&[
                session_event(t0 + 500, &browser_b, &reference.to_uppercase()),
                pointermove(t0 + 4000, 4, 4),
                pointermove(t0 + 5123, 5, 5),
            ]),
            3,
        )
        .await;
    server
        .collect_ok(
            &tracking,
            &reference,
            &batch(&[pointermove(t0 + 200, 6, 6), pointermove(t0 + 300, 7, 7)]),
            2,
        )
        .await;
    server
        .collect_ok(
            &tracking,
            &other_reference,
            &batch(&[pointermove(t0 + 60_000, 8, 8)]),
            1,
        )
        .await;
    // A later batch of browser A, without a session event, still counts for the reference.
    let now = now_millis();
    server
        .collect_ok(&tracking, &browser_a, &batch(&[pointermove(now, 9, 9)]), 1)
        .await;
    let acknowledged = Instant::now();

    let expected = [(reference.clone(), 10), (other_reference.clone(), 1)];
    let rows = server
        .lookup_until_counts(&key, &survey.survey_id, &expected, Duration::from_secs(2))
        .await;
    let visible_after = acknowledged.elapsed();
    assert_eq!(rows[0]["eventCount"], json!(10), "{rows:?}");
    assert_eq!(rows[1]["eventCount"], json!(1), "{rows:?}");
    assert!(
        visible_after <= Duration::from_millis(1500),
        "events became visible to lookup {visible_after:?} after the 201"
    );

    // One row per submitted reference, in input order, duplicates included, echoing the
    // submitted string.
    let submitted = vec![
        uncaptured.clone(),
        reference.clone(),
        other_reference.clone(),
        reference.to_uppercase(),
        reference.clone(),
        uncaptured.clone(),
    ];
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &submitted)
        .await;
    assert_eq!(rows.len(), submitted.len());
    for (row, sent) in rows.iter().zip(&submitted) {
        assert_row_fields(row);
        assert_eq!(row["externalReference"], json!(sent));
    }
    assert_uncaptured(&rows[0], &uncaptured);
    assert_uncaptured(&rows[5], &uncaptured);

    for index in [1, 3, 4] {
        let row = &rows[index];
        assert_eq!(row["captured"], json!(true), "{row}");
        assert_eq!(row["eventCount"], json!(10), "{row}");
        assert_instant(&row["firstEventAt"], t0 + 200);
        assert_instant(&row["lastEventAt"], now);
        for score_field in ["humanScorePercent", "scoreBand", "scoredAt", "modelVersion"] {
            assert!(row[score_field].is_null(), "{row}");
        }
    }
    let other = &rows[2];
    assert_eq!(other["captured"], json!(true));
    assert_eq!(other["eventCount"], json!(1));
    assert_instant(&other["firstEventAt"], t0 + 60_000);
    assert_instant(&other["lastEventAt"], t0 + 60_000);

    // The same references in another survey of the organization are not captured there.
    let empty_survey = server.provision_ok(&key, "lookup-empty", "Empty").await;
    let rows = server
        .lookup_rows(
            &key,
            &empty_survey.survey_id,
            std::slice::from_ref(&reference),
        )
        .await;
    assert_uncaptured(&rows[0], &reference);
}
