//! The embed script at the address provisioning returns: JavaScript, cacheable, validated by
//! ETag, readable from any origin, small.

use crate::harness::{TestServer, send};

#[tokio::test]
async fn the_embed_is_served_where_provisioning_points() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let reply = server
        .provision(&key, "embed-survey", r#"{"name": "Embed"}"#)
        .await;
    let embed_url = reply.json()["data"]["embedScriptUrl"]
        .as_str()
        .expect("embedScriptUrl")
        .to_owned();
    assert!(embed_url.ends_with("/embed/v1/telltale.js"), "{embed_url}");

    let script = send(server.client().get(&embed_url)).await;
    assert_eq!(script.status, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(script.header("access-control-allow-origin"), Some("*"));
    assert_eq!(script.header("cache-control"), Some("public, max-age=3600"));
    assert!(script.text.contains("Telltale.start") || script.text.contains("start: start"));
    assert!(script.text.len() < 32 * 1024, "{} bytes", script.text.len());
    let etag = script.header("etag").expect("etag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    // Revalidation: the same bytes answer 304 with no body; another tag gets the script.
    let again = send(
        server
            .client()
            .get(&embed_url)
            .header("if-none-match", &etag),
    )
    .await;
    assert_eq!(again.status, 304);
    assert!(again.text.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let stale = send(
        server
            .client()
            .get(&embed_url)
            .header("if-none-match", "\"0000\""),
    )
    .await;
    assert_eq!(stale.status, 200);
}

#[tokio::test]
async fn the_demo_survey_runs_the_embed_for_its_tracking_key() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "demo-survey", "Demo").await;

    let page = server.get(&format!("/demo/{}", survey.tracking_key)).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.text
            .contains(r#"<script src="/embed/v1/telltale.js"></script>"#)
    );
    assert!(
        page.text
            .contains(&format!(r#"trackingKey: "{}""#, survey.tracking_key)),
        "{}",
        page.text
    );
    for kind in [
        r#"type="radio""#,
        r#"type="checkbox""#,
        "<textarea",
        r#"type="range""#,
        r#"id="page-3""#,
    ] {
        assert!(page.text.contains(kind), "the demo lacks {kind}");
    }

    crate::harness::assert_error(&server.get("/demo/0123456789abcdef01234567").await, 404);
    crate::harness::assert_error(&server.get("/demo/not-a-key").await, 404);
}
