//! `PUT /integrations/v1/surveys/{externalSurveyId}`: envelope, idempotency, tenancy and
//! validation of the external id and the name.

use serde_json::json;

use crate::harness::{
    TestServer, assert_error, batch, is_hex24, new_uuid, now_millis, pointermove,
};

/// The survey's stored name, read from the catalog (the API has no endpoint that shows it).
fn stored_name(server: &TestServer, survey_id: &str) -> String {
    assert!(is_hex24(survey_id));
    server
        .catalog_sql(&format!(
            "SELECT name FROM surveys WHERE id = '{survey_id}'"
        ))
        .trim_end_matches('\n')
        .to_owned()
}

#[tokio::test]
async fn provisioning_returns_the_envelope_and_is_idempotent() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();

    let reply = server
        .provision(&key, "survey-2026-01", r#"{"name":"Customer panel"}"#)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|value| value.starts_with("application/json"))
    );
    let body = reply.json();
    assert_eq!(body.as_object().expect("object").len(), 1, "only `data`");
    let data = body["data"].as_object().expect("data object");
    let mut fields: Vec<&str> = data.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "collectorApiUrl",
            "embedScriptUrl",
            "surveyId",
            "trackingKey"
        ]
    );
    let survey_id = data["surveyId"].as_str().expect("surveyId").to_owned();
    let tracking_key = data["trackingKey"]
        .as_str()
        .expect("trackingKey")
        .to_owned();
    assert!(is_hex24(&survey_id), "{survey_id}");
    assert!(is_hex24(&tracking_key), "{tracking_key}");
    assert_ne!(survey_id, tracking_key);
    for field in ["collectorApiUrl", "embedScriptUrl"] {
        let uri = data[field].as_str().expect("uri string");
        assert!(
            uri.starts_with(server.base_url()),
            "{field} {uri} is not under {}",
            server.base_url()
        );
        reqwest::Url::parse(uri).unwrap_or_else(|error| panic!("{field} {uri}: {error}"));
    }
    assert_eq!(stored_name(&server, &survey_id), "Customer panel");

    // The collector address works as documented: {collectorApiUrl}/{trackingKey}/{identifier}.
    let collector = data["collectorApiUrl"].as_str().expect("collector url");
    let identifier = new_uuid();
    let posted = crate::harness::send(
        server
            .client()
            .post(format!("{collector}/{tracking_key}/{identifier}"))
            .header("content-type", "application/json")
            .body(batch(&[pointermove(now_millis(), 1, 2)])),
    )
    .await;
    assert_eq!(posted.status, 201, "{}", posted.text);

    // Repeating updates the name and returns the same ids.
    let again = server
        .provision(
            &key,
            "survey-2026-01",
            r#"{"name":"Customer panel, wave 2"}"#,
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["data"]["surveyId"], json!(survey_id));
    assert_eq!(again.json()["data"]["trackingKey"], json!(tracking_key));
    assert_eq!(stored_name(&server, &survey_id), "Customer panel, wave 2");

    // The name is trimmed before it is stored.
    let trimmed = server
        .provision(&key, "survey-2026-01", r#"{"name":"  \t Padded name \n "}"#)
        .await;
    assert_eq!(trimmed.status, 200, "{}", trimmed.text);
    assert_eq!(trimmed.json()["data"]["surveyId"], json!(survey_id));
    assert_eq!(stored_name(&server, &survey_id), "Padded name");

    // A different external id is a different survey; ids are opaque, so case matters.
    let other = server
        .provision_ok(&key, "survey-2026-02", "Second survey")
        .await;
    assert_ne!(other.survey_id, survey_id);
    assert_ne!(other.tracking_key, tracking_key);
    let upper = server
        .provision_ok(&key, "SURVEY-2026-01", "Shouting")
        .await;
    assert_ne!(upper.survey_id, survey_id);

    // The same external id in another organization is another survey.
    let org = server.create_org("Other platform");
    let other_key = server.create_key(&org, "server", None).key;
    let foreign = server
        .provision_ok(&other_key, "survey-2026-01", "Their panel")
        .await;
    assert_ne!(foreign.survey_id, survey_id);
    assert_ne!(foreign.tracking_key, tracking_key);
    assert_eq!(stored_name(&server, &survey_id), "Padded name");
    // ... and provisioning it again in the first organization still finds the first survey.
    let mine = server
        .provision_ok(&key, "survey-2026-01", "Customer panel")
        .await;
    assert_eq!(mine.survey_id, survey_id);
}

#[tokio::test]
async fn provisioning_validates_the_name() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();

    for body in [
        json!({ "name": "" }).to_string(),
        json!({ "name": "    " }).to_string(),
        json!({ "name": " \t\n\r " }).to_string(),
        json!({ "name": "x".repeat(201) }).to_string(),
        json!({ "name": format!("  {}  ", "y".repeat(201)) }).to_string(),
        json!({ "name": "é".repeat(201) }).to_string(),
        json!({}).to_string(),
        json!({ "title": "no name" }).to_string(),
        json!({ "name": null }).to_string(),
        json!({ "name": 42 }).to_string(),
        json!({ "name": ["a"] }).to_string(),
        json!(["name"]).to_string(),
        json!("name").to_string(),
        "not json at all".to_owned(),
        r#"{"name":"unterminated"#.to_owned(),
        String::new(),
    ] {
        let reply = server.provision(&key, "validation", &body).await;
        assert_eq!(reply.status, 400, "body {body}: {}", reply.text);
        assert_error(&reply, 400);
    }
    // None of those created the survey: the first valid request does.
    assert_eq!(
        server
            .catalog_sql("SELECT count(*) FROM surveys WHERE external_survey_id = 'validation'")
            .trim(),
        "0"
    );

    // Limits count characters after trimming, not bytes.
    let exactly_200 = format!("   {}   ", "n".repeat(200));
    let survey = server.provision_ok(&key, "validation", &exactly_200).await;
    assert_eq!(stored_name(&server, &survey.survey_id), "n".repeat(200));
    let multibyte = "é".repeat(200);
    let survey = server.provision_ok(&key, "validation", &multibyte).await;
    assert_eq!(stored_name(&server, &survey.survey_id), multibyte);
    let emoji = "🙂".repeat(200);
    server.provision_ok(&key, "validation", &emoji).await;
    assert_error(
        &server
            .provision(
                &key,
                "validation",
                &json!({ "name": "🙂".repeat(201) }).to_string(),
            )
            .await,
        400,
    );
}

#[tokio::test]
async fn provisioning_validates_the_external_survey_id() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let body = r#"{"name":"Survey"}"#;

    let exactly_200 = "e".repeat(200);
    let reply = server.provision(&key, &exactly_200, body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_error(&server.provision(&key, &"e".repeat(201), body).await, 400);

    // Characters, not bytes: 200 two-byte characters are fine, 201 are not.
    let multibyte = "ü".repeat(200);
    let first = server.provision(&key, &multibyte, body).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let again = server.provision(&key, &multibyte, body).await;
    assert_eq!(
        again.json()["data"]["surveyId"],
        first.json()["data"]["surveyId"]
    );
    assert_error(&server.provision(&key, &"ü".repeat(201), body).await, 400);

    // The id is opaque: spaces and punctuation are part of it.
    let opaque = "Q3 2026 / wave #1?";
    let first = server.provision(&key, opaque, body).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let stored = server.catalog_sql(&format!(
        "SELECT external_survey_id FROM surveys WHERE id = '{}'",
        first.json()["data"]["surveyId"].as_str().expect("id")
    ));
    assert_eq!(stored.trim_end_matches('\n'), opaque);

    // A path segment that does not decode to UTF-8.
    let undecodable = crate::harness::send(
        server
            .client()
            .put(server.url("/integrations/v1/surveys/%FF%FE"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_error(&undecodable, 400);

    // An empty external id.
    let empty = crate::harness::send(
        server
            .client()
            .put(server.url("/integrations/v1/surveys/"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_error(&empty, 400);

    // A bad external id is reported even with a bad body, and neither creates anything.
    assert_error(&server.provision(&key, &"e".repeat(201), "nope").await, 400);
    let count = server.catalog_sql("SELECT count(*) FROM surveys");
    assert_eq!(count.trim(), "3", "surveys: {count}");
}
