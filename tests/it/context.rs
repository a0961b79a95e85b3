//! `GET /integrations/v1/context`, bearer authentication, revocation, deleted organizations and
//! scopes.

use serde_json::json;

use crate::harness::{TestServer, assert_error, is_hex24, new_uuid, send};

const ALL_SCOPES: [&str; 5] = [
    "surveys:write",
    "sessions:read",
    "scoring:write",
    "scoring:read",
    "sessions:delete",
];

#[tokio::test]
async fn context_describes_the_key_and_its_organization() {
    let server = TestServer::start().await;

    let reply = server.context(server.key()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|value| value.starts_with("application/json"))
    );
    let body = reply.json();
    assert_eq!(body.as_object().expect("object").len(), 1, "only `data`");
    let data = &body["data"];
    let organization_id = data["organization"]["id"].as_str().expect("org id");
    assert!(is_hex24(organization_id), "{organization_id}");
    assert!(data["organization"]["name"].is_string());
    let prefix = data["key"]["prefix"].as_str().expect("prefix");
    assert!(
        server.key().starts_with(prefix),
        "{prefix} is not the key's prefix"
    );
    assert!(data["key"]["label"].is_string());
    assert_eq!(data["key"]["scopes"], json!(ALL_SCOPES));

    let org = server.create_org("Acme Research");
    let created = server.create_key(&org, "panel-server", Some("sessions:read,surveys:write"));
    let reply = server.context(&created.key).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({
            "data": {
                "organization": { "id": org, "name": "Acme Research" },
                "key": {
                    "prefix": created.prefix,
                    "label": "panel-server",
                    "scopes": ["sessions:read", "surveys:write"],
                }
            }
        })
    );
}

#[tokio::test]
async fn missing_malformed_and_unknown_keys_get_401() {
    let server = TestServer::start().await;
    let context_url = server.url("/integrations/v1/context");
    let real_key = server.key().to_owned();
    let (prefix, _) = real_key.rsplit_once('_').expect("tt_<prefix>_<secret>");

    let missing = send(server.client().get(&context_url)).await;
    assert_error(&missing, 401);
    // RFC 6750: the 401 names the scheme to use.
    assert_eq!(
        missing
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer"),
        "{:?}",
        missing.headers
    );

    let basic = send(
        server
            .client()
            .get(&context_url)
            .header("authorization", format!("Basic {real_key}")),
    )
    .await;
    assert_error(&basic, 401);

    let no_token = send(
        server
            .client()
            .get(&context_url)
            .header("authorization", "Bearer"),
    )
    .await;
    assert_error(&no_token, 401);

    for malformed in [
        "not-a-key",
        "tt_123",
        &real_key[..real_key.len() - 1],
        &format!("{real_key}0"),
        &real_key.to_uppercase(),
    ] {
        let reply = server.context(malformed).await;
        assert_error(&reply, 401);
    }

    // Well formed but never issued: an unknown prefix, and a known prefix with a wrong secret.
    let unknown_prefix = format!("tt_0123456789_{}", "ab".repeat(32));
    assert_error(&server.context(&unknown_prefix).await, 401);
    let wrong_secret = format!("{prefix}_{}", "0".repeat(64));
    assert_ne!(wrong_secret, real_key);
    assert_error(&server.context(&wrong_secret).await, 401);

    // The same holds on the other integration endpoints.
    let survey = server
        .provision_ok(&real_key, "auth-check", "Auth check")
        .await;
    let provision = send(
        server
            .client()
            .put(server.url("/integrations/v1/surveys/auth-check"))
            .json(&json!({ "name": "x" })),
    )
    .await;
    assert_error(&provision, 401);
    let lookup_body = json!({ "externalReferences": [new_uuid()] }).to_string();
    assert_error(
        &server
            .lookup(&unknown_prefix, &survey.survey_id, &lookup_body)
            .await,
        401,
    );
    assert_error(
        &server
            .provision(&wrong_secret, "auth-check", r#"{"name":"x"}"#)
            .await,
        401,
    );

    // The real key still works after all those failures, and the scheme is case-insensitive.
    assert_eq!(server.context(&real_key).await.status, 200);
    let lowercase = send(
        server
            .client()
            .get(&context_url)
            .header("authorization", format!("bearer {real_key}")),
    )
    .await;
    assert_eq!(lowercase.status, 200, "{}", lowercase.text);
}

#[tokio::test]
async fn a_key_revoked_from_the_command_line_stops_working_at_once() {
    let server = TestServer::start().await;
    let org = server.default_org().await;
    let doomed = server.create_key(&org, "to-revoke", None);
    let survey = server
        .provision_ok(&doomed.key, "revocation", "Revocation")
        .await;
    assert_eq!(server.context(&doomed.key).await.status, 200);

    let printed = server.cli_ok(&["key", "revoke", &doomed.prefix]);
    assert!(printed.contains(&doomed.prefix), "{printed}");

    assert_error(&server.context(&doomed.key).await, 401);
    assert_error(
        &server
            .provision(&doomed.key, "revocation", r#"{"name":"again"}"#)
            .await,
        401,
    );
    let lookup_body = json!({ "externalReferences": [new_uuid()] }).to_string();
    assert_error(
        &server
            .lookup(&doomed.key, &survey.survey_id, &lookup_body)
            .await,
        401,
    );
    // Other keys of the organization are unaffected.
    assert_eq!(server.context(server.key()).await.status, 200);
    // Revoking twice is an error on the command line.
    assert!(
        !server
            .cli(&["key", "revoke", &doomed.prefix])
            .status
            .success()
    );
    // `key list` shows it revoked.
    let keys = server.cli_json(&["key", "list", "--org", &org, "--json"]);
    let listed = keys
        .as_array()
        .expect("array")
        .iter()
        .find(|key| key["prefix"] == json!(doomed.prefix))
        .expect("revoked key listed");
    assert!(listed["revokedAt"].is_string(), "{listed}");
}

#[tokio::test]
async fn a_deleted_organization_gets_404_on_context_and_401_elsewhere() {
    let server = TestServer::start().await;
    let org = server.create_org("Soon Gone");
    let key = server.create_key(&org, "server", None).key;
    let survey = server.provision_ok(&key, "gone-survey", "Gone").await;
    let lookup_body = json!({ "externalReferences": [new_uuid()] }).to_string();
    assert_eq!(
        server
            .lookup(&key, &survey.survey_id, &lookup_body)
            .await
            .status,
        200
    );

    server.cli_ok(&["org", "delete", &org]);

    assert_error(&server.context(&key).await, 404);
    assert_error(
        &server
            .provision(&key, "gone-survey", r#"{"name":"Gone"}"#)
            .await,
        401,
    );
    assert_error(
        &server.lookup(&key, &survey.survey_id, &lookup_body).await,
        401,
    );
    let organizations = server.cli_json(&["org", "list", "--json"]);
    assert!(
        organizations
            .as_array()
            .expect("array")
            .iter()
            .all(|listed| listed["id"] != json!(org)),
        "deleted organization still listed: {organizations}"
    );
    // Another organization's key is unaffected.
    assert_eq!(server.context(server.key()).await.status, 200);
}

#[tokio::test]
async fn scopes_gate_provisioning_and_lookup_but_not_context() {
    let server = TestServer::start().await;
    let org = server.default_org().await;
    let survey = server.provision_ok(server.key(), "scoped", "Scoped").await;
    let reader = server.create_key(&org, "reader", Some("sessions:read"));
    let writer = server.create_key(&org, "writer", Some("surveys:write"));
    let lookup_body = json!({ "externalReferences": [new_uuid()] }).to_string();

    // sessions:read only
    let context = server.context(&reader.key).await;
    assert_eq!(context.status, 200, "{}", context.text);
    assert_eq!(
        context.json()["data"]["key"]["scopes"],
        json!(["sessions:read"])
    );
    assert_error(
        &server
            .provision(&reader.key, "scoped", r#"{"name":"Scoped"}"#)
            .await,
        403,
    );
    assert_error(
        &server
            .provision(&reader.key, "brand-new", r#"{"name":"New"}"#)
            .await,
        403,
    );
    let reply = server
        .lookup(&reader.key, &survey.survey_id, &lookup_body)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);

    // surveys:write only
    let context = server.context(&writer.key).await;
    assert_eq!(context.status, 200, "{}", context.text);
    assert_eq!(
        context.json()["data"]["key"]["scopes"],
        json!(["surveys:write"])
    );
    let reply = server
        .provision(&writer.key, "scoped", r#"{"name":"Scoped"}"#)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["data"]["surveyId"], json!(survey.survey_id));
    assert_error(
        &server
            .lookup(&writer.key, &survey.survey_id, &lookup_body)
            .await,
        403,
    );
}

#[tokio::test]
async fn json_endpoints_refuse_other_content_types_and_bodies_over_1_mib() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let url = server.url("/integrations/v1/surveys/content-types");
    let with = |content_type: &'static str, body: String| {
        server
            .client()
            .put(&url)
            .bearer_auth(&key)
            .header("content-type", content_type)
            .body(body)
    };
    let xml = send(with("application/xml", "<name>x</name>".to_owned())).await;
    assert_error(&xml, 415);
    // curl -d sends a form type by default: refused, not read as JSON.
    let form = send(with(
        "application/x-www-form-urlencoded",
        r#"{"name":"Form"}"#.to_owned(),
    ))
    .await;
    assert_error(&form, 415);
    for json_type in [
        "application/json",
        "application/json; charset=utf-8",
        "application/merge-patch+json",
    ] {
        let accepted = send(with(json_type, r#"{"name":"Typed"}"#.to_owned())).await;
        assert_eq!(accepted.status, 200, "{json_type}: {}", accepted.text);
    }
    // A body over 1 MiB, as the document and the message say (axum's default was 2 MiB).
    let large = format!(r#"{{"name":"{}"}}"#, "x".repeat(1024 * 1024 + 16));
    assert_error(&send(with("application/json", large)).await, 413);
    // Liveness under the name that pairs with /status/ready.
    let live = server.get("/status/live").await;
    assert_eq!(live.status, 200);
    assert_eq!(live.json()["status"], "ok");
}
