//! Availability endpoints, the OpenAPI document, and JSON errors for unknown routes and wrong
//! methods.

use serde_json::json;

use crate::harness::{TestServer, assert_error, send};

#[tokio::test]
async fn health_and_status_report_ok_with_the_date_and_version() {
    let server = TestServer::start().await;

    let health = server.get("/status/health").await;
    assert_eq!(health.status, 200);
    assert!(
        health
            .header("content-type")
            .is_some_and(|value| value.starts_with("application/json"))
    );
    assert_eq!(health.json(), json!({ "status": "ok" }));

    let status = server.get("/status/").await;
    assert_eq!(status.status, 200, "{}", status.text);
    let body = status.json();
    assert_eq!(body["status"], json!("ok"));
    let date = body["date"].as_str().expect("date string");
    let date = chrono::DateTime::parse_from_rfc3339(date)
        .unwrap_or_else(|error| panic!("date {date} is not ISO 8601: {error}"));
    let skew = (chrono::Utc::now().timestamp_millis() - date.timestamp_millis()).abs();
    assert!(skew < 5_000, "status date is {skew} ms off");
    let version = body["version"].as_str().expect("version string");
    assert!(!version.is_empty());

    // Health checks need no key.
    let with_bad_key = send(
        server
            .client()
            .get(server.url("/status/health"))
            .bearer_auth("garbage"),
    )
    .await;
    assert_eq!(with_bad_key.status, 200);
}

#[tokio::test]
async fn the_openapi_document_is_3_1_and_lists_the_operations() {
    let server = TestServer::start().await;
    let reply = server.get("/integrations/v1/openapi.json").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let document = reply.json();
    let version = document["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3.1"), "openapi {version}");
    assert_eq!(document["info"]["version"], json!("1.0.0"));
    let paths = document["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/integrations/v1/context", "get"),
        ("/integrations/v1/surveys/{externalSurveyId}", "put"),
        (
            "/integrations/v1/surveys/{surveyId}/sessions/lookup",
            "post",
        ),
        ("/event/{key}/{identifier}", "post"),
        ("/status/health", "get"),
    ] {
        let item = paths
            .get(path)
            .unwrap_or_else(|| panic!("{path} missing from {:?}", paths.keys()));
        assert!(item.get(method).is_some(), "{path} has no {method}");
    }
    for (path, operation_id) in [
        ("/integrations/v1/context", "getIntegrationContext"),
        (
            "/integrations/v1/surveys/{externalSurveyId}",
            "provisionSurvey",
        ),
        (
            "/integrations/v1/surveys/{surveyId}/sessions/lookup",
            "lookupSurveySessions",
        ),
    ] {
        let method = if path.ends_with("lookup") {
            "post"
        } else if path.ends_with("Id}") {
            "put"
        } else {
            "get"
        };
        assert_eq!(
            paths[path][method]["operationId"],
            json!(operation_id),
            "{path}"
        );
    }
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json_errors() {
    let server = TestServer::start().await;
    let client = server.client();

    for path in [
        "/",
        "/nope",
        "/integrations/v2/context",
        "/integrations/v1/surveys/x/unknown",
        "/event/onlykey",
        "/event/a/b/c",
    ] {
        assert_error(&server.get(path).await, 404);
        let post = send(client.post(server.url(path)).body("{}")).await;
        assert_error(&post, 404);
    }

    for request in [
        client.delete(server.url("/status/health")),
        client.post(server.url("/status/health")),
        client.get(server.url("/event/x/y")),
        client.put(server.url("/event/x/y")),
        client.post(server.url("/integrations/v1/context")),
        client.delete(server.url("/integrations/v1/context")),
        client.get(server.url("/integrations/v1/surveys/abc")),
        client.get(server.url("/integrations/v1/surveys/0123456789abcdef01234567/sessions/lookup")),
    ] {
        assert_error(&send(request).await, 405);
    }
}
