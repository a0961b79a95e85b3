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
    // At most 8 KB gzipped, as served (measured with the system's gzip at its best level).
    let mut gzip = std::process::Command::new("gzip")
        .args(["-9", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    {
        use std::io::Write;
        let mut stdin = gzip.stdin.take().expect("stdin");
        stdin.write_all(script.text.as_bytes()).expect("write");
    }
    let compressed = gzip.wait_with_output().expect("gzip output").stdout.len();
    assert!(
        compressed > 1000 && compressed <= 9 * 1024,
        "{compressed} bytes gzipped"
    );
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

/// The server-side example in docs/examples runs as written against the real service.
#[tokio::test]
async fn the_integration_example_provisions_scores_and_looks_up() {
    let server = TestServer::start_with(&["--model", crate::scoring::HAND_SET_MODEL]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "example-survey", "Example").await;
    let reference = crate::harness::new_uuid();
    let events = scorer::synthetic::session(
        scorer::synthetic::Behaviour::Human,
        &reference,
        &reference,
        crate::harness::now_millis() - 60_000,
        2,
        3,
    );
    for chunk in events.chunks(100) {
        let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
        server
            .collect_ok(&survey.tracking_key, &reference, &body, chunk.len())
            .await;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/examples/integrate.py");
    let output = std::process::Command::new("python3")
        .args([script, "example-survey", &reference])
        .env("TELLTALE_URL", server.base_url())
        .env("TELLTALE_KEY", &key)
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("json line"))
        .collect();
    assert_eq!(
        lines[0]["provisioned"]["surveyId"],
        survey.survey_id.as_str()
    );
    assert_eq!(lines[1]["run"]["status"], "completed", "{:?}", lines[1]);
    assert_eq!(lines[2]["session"]["externalReference"], reference.as_str());
    assert_eq!(lines[2]["session"]["eventCount"], events.len());
    assert_eq!(lines[2]["session"]["scoreBand"], "human-like");
}

#[tokio::test]
async fn the_embed_is_served_compressed_to_browsers_that_accept_it() {
    use std::io::Read as _;
    let server = TestServer::start().await;
    let url = server.url("/embed/v1/telltale.js");
    let plain = send(server.client().get(&url)).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));

    for (accept, coding) in [
        ("gzip, deflate, br, zstd", "br"),
        ("gzip, deflate", "gzip"),
        ("br;q=0, gzip", "gzip"),
    ] {
        let response = server
            .client()
            .get(&url)
            .header("accept-encoding", accept)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), 200);
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        assert_eq!(
            headers
                .get("content-encoding")
                .map(|v| v.to_str().expect("ascii")),
            Some(coding),
            "{accept}"
        );
        assert_eq!(
            headers.get("vary").map(|v| v.to_str().expect("ascii")),
            Some("Accept-Encoding")
        );
        let etag = headers
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .expect("etag")
            .to_owned();
        assert_ne!(
            Some(etag.as_str()),
            plain.header("etag"),
            "one tag per encoding"
        );
        let mut decoded = String::new();
        match coding {
            "br" => brotli::Decompressor::new(&bytes[..], 4096)
                .read_to_string(&mut decoded)
                .expect("brotli"),
            _ => flate2::read::GzDecoder::new(&bytes[..])
                .read_to_string(&mut decoded)
                .expect("gzip"),
        };
        assert_eq!(decoded, plain.text, "{coding} decodes to the script");
        // The budgets of ingest/embed's package test, as served.
        let budget = if coding == "br" { 8 * 1024 } else { 9 * 1024 };
        assert!(bytes.len() <= budget, "{coding}: {} bytes", bytes.len());
        // Revalidation of the compressed form.
        let again = send(
            server
                .client()
                .get(&url)
                .header("accept-encoding", accept)
                .header("if-none-match", &etag),
        )
        .await;
        assert_eq!(again.status, 304, "{coding}");
    }
}
