//! `POST /event/{key}/{identifier}`: acceptance, CORS, limits, identifier rules, and hostile
//! input that must neither crash the service nor lose what it accepted.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{
    Reply, TestServer, assert_error, batch, duckdb_query, new_uuid, now_millis, pointermove, send,
};

const ONE_MIB: usize = 1024 * 1024;

/// A batch body padded with one string event to exactly `size` bytes.
fn padded_body(size: usize) -> String {
    let overhead = r#"{"events":[""]}"#.len();
    format!(r#"{{"events":["{}"]}}"#, "a".repeat(size - overhead))
}

fn pointer_batch(count: usize) -> String {
    let start = now_millis();
    let events: Vec<String> = (0..count)
        .map(|i| pointermove(start + i as i64, i as i32, 2 * i as i32))
        .collect();
    batch(&events)
}

#[tokio::test]
async fn collector_accepts_json_and_text_plain_with_open_cors() {
    let server = TestServer::start().await;
    let survey = server.provision_ok(server.key(), "collector", "C").await;
    let identifier = new_uuid();
    let url = server.url(&format!("/event/{}/{identifier}", survey.tracking_key));

    let json_reply = send(
        server
            .client()
            .post(&url)
            .header("origin", "https://surveys.example.org")
            .header("content-type", "application/json")
            .body(pointer_batch(3)),
    )
    .await;
    assert_eq!(json_reply.status, 201, "{}", json_reply.text);
    assert_eq!(json_reply.json(), json!({ "success": true, "count": 3 }));
    assert_eq!(json_reply.header("access-control-allow-origin"), Some("*"));

    // navigator.sendBeacon sends a string as text/plain.
    let beacon = send(
        server
            .client()
            .post(&url)
            .header("origin", "https://surveys.example.org")
            .header("content-type", "text/plain;charset=UTF-8")
            .body(pointer_batch(2)),
    )
    .await;
    assert_eq!(beacon.status, 201, "{}", beacon.text);
    assert_eq!(beacon.json(), json!({ "success": true, "count": 2 }));
    assert_eq!(beacon.header("access-control-allow-origin"), Some("*"));

    // Tracking keys are hexadecimal in either case.
    let upper = server
        .collect(
            &survey.tracking_key.to_uppercase(),
            &identifier,
            Some("application/json"),
            pointer_batch(1),
        )
        .await;
    assert_eq!(upper.status, 201, "{}", upper.text);
    assert_eq!(upper.json(), json!({ "success": true, "count": 1 }));

    // Any JSON value is an event, and an empty batch is accepted with count 0.
    let mixed = r#"{"events":[42,"text",null,true,[1,[2]],{"no":"type"}],"sentAt":1}"#;
    server
        .collect_ok(&survey.tracking_key, &identifier, mixed, 6)
        .await;
    server
        .collect_ok(&survey.tracking_key, &identifier, r#"{"events":[]}"#, 0)
        .await;

    // The preflight a browser sends before a cross-origin JSON POST.
    let preflight = send(
        server
            .client()
            .request(reqwest::Method::OPTIONS, &url)
            .header("origin", "https://surveys.example.org")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type"),
    )
    .await;
    assert!(
        (200..300).contains(&preflight.status),
        "preflight answered {}: {}",
        preflight.status,
        preflight.text
    );
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    let methods = preflight
        .header("access-control-allow-methods")
        .expect("allow-methods")
        .to_ascii_uppercase();
    assert!(methods.contains("POST"), "allow-methods {methods}");
    let headers = preflight
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        headers.contains("content-type") || headers == "*",
        "allow-headers {headers:?}"
    );

    // Errors are readable cross-origin too.
    let unknown = send(
        server
            .client()
            .post(server.url(&format!("/event/{}/{identifier}", "0".repeat(24))))
            .header("origin", "https://surveys.example.org")
            .header("content-type", "application/json")
            .body(pointer_batch(1)),
    )
    .await;
    assert_error(&unknown, 404);
    assert_eq!(unknown.header("access-control-allow-origin"), Some("*"));

    // Everything acknowledged is counted: 3 + 2 + 1 + 6 + 0.
    let rows = server
        .lookup_until_counts(
            server.key(),
            &survey.survey_id,
            &[(identifier.clone(), 12)],
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(12), "{rows:?}");
}

#[tokio::test]
async fn collector_rejects_unknown_keys_bad_bodies_and_oversized_batches() {
    let server = TestServer::start().await;
    let survey = server
        .provision_ok(server.key(), "collector-bad", "C")
        .await;
    let tracking = survey.tracking_key.as_str();
    let identifier = new_uuid();
    let post = |key: String, body: Vec<u8>, content_type: &'static str| {
        let server = &server;
        let identifier = identifier.clone();
        async move {
            server
                .collect(&key, &identifier, Some(content_type), body)
                .await
        }
    };
    let json_post = |body: &[u8]| post(tracking.to_owned(), body.to_vec(), "application/json");

    // Unknown tracking keys: well-formed and garbage.
    for key in [
        "0123456789abcdef01234567".to_owned(),
        survey.survey_id.clone(),
        "nope".to_owned(),
        "x".repeat(300),
    ] {
        let reply = post(key, pointer_batch(1).into_bytes(), "application/json").await;
        assert_error(&reply, 404);
    }

    // Bodies that are not batches.
    let bad_bodies: [&[u8]; 16] = [
        b"",
        b"not json",
        b"{\"events\": [1, 2,]}",
        b"{\"events\": [",
        b"{\"events\": []} trailing",
        b"{}",
        b"{\"event\": []}",
        b"{\"events\": {}}",
        b"{\"events\": \"[]\"}",
        b"{\"events\": 5}",
        b"{\"events\": null}",
        b"[{\"events\": []}]",
        b"[1, 2, 3]",
        b"\"events\"",
        b"{\"events\": [\"\xff\xfe\"]}",
        b"{\"events\": [1]}\xc3",
    ];
    for body in bad_bodies {
        let reply = json_post(body).await;
        assert_eq!(
            reply.status,
            400,
            "{:?} answered {}: {}",
            String::from_utf8_lossy(body),
            reply.status,
            reply.text
        );
        assert_error(&reply, 400);
    }
    let reply = post(
        tracking.to_owned(),
        b"{\"events\": [\"\xc3\x28\"]}".to_vec(),
        "text/plain",
    )
    .await;
    assert_error(&reply, 400);

    // At most 1000 events per batch, at most 1 MiB per body.
    let reply = json_post(pointer_batch(1000).as_bytes()).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json(), json!({ "success": true, "count": 1000 }));
    let small_events = format!(r#"{{"events":[{}]}}"#, vec!["1"; 1001].join(","));
    assert_error(&json_post(small_events.as_bytes()).await, 413);
    assert_error(&json_post(pointer_batch(1001).as_bytes()).await, 413);
    let exactly_one_mib = padded_body(ONE_MIB);
    assert_eq!(exactly_one_mib.len(), ONE_MIB);
    let reply = json_post(exactly_one_mib.as_bytes()).await;
    assert_eq!(reply.status, 201, "a body of exactly 1 MiB: {}", reply.text);
    // One byte over: the server reads the whole body before refusing it, so the client sees
    // the answer (a much larger body may get its connection closed while still uploading).
    assert_error(&json_post(padded_body(ONE_MIB + 1).as_bytes()).await, 413);

    // Content types other than JSON and plain text.
    for content_type in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
    ] {
        let reply = post(
            tracking.to_owned(),
            pointer_batch(1).into_bytes(),
            content_type,
        )
        .await;
        assert_error(&reply, 415);
    }

    // Only the accepted batches were counted: 1000 events and the 1 MiB one.
    let rows = server
        .lookup_until_counts(
            server.key(),
            &survey.survey_id,
            &[(identifier.clone(), 1001)],
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(1001), "{rows:?}");
    assert_eq!(server.get("/status/health").await.status, 200);
}

#[tokio::test]
async fn collector_enforces_the_identifier_alphabet_and_length() {
    let server = TestServer::start().await;
    let survey = server.provision_ok(server.key(), "identifiers", "I").await;
    let tracking = survey.tracking_key.as_str();
    let body = pointer_batch(1);
    let post = |identifier: String| {
        let server = &server;
        let body = body.clone();
        async move {
            server
                .collect(tracking, &identifier, Some("application/json"), body)
                .await
        }
    };

    for accepted in [
        "a".repeat(128),
        "a.b_c:d-E9".to_owned(),
        new_uuid(),
        "x".to_owned(),
    ] {
        let reply = post(accepted.clone()).await;
        assert_eq!(reply.status, 201, "{accepted}: {}", reply.text);
    }

    // Percent-encoded forms reach the server decoded; none may pass.
    for rejected in [
        "a".repeat(129),
        "a%20b".to_owned(),
        "a+b".to_owned(),
        "..%2F..%2Fetc".to_owned(),
        "..%2F..%2F..%2Fetc%2Fpasswd".to_owned(),
        "%2E%2E%2F%2E%2E%2Fcatalog.db".to_owned(),
        "..%5C..%5Cwindows".to_owned(),
        "%C3%A9t%C3%A9".to_owned(),
        "%FF%FE".to_owned(),
        "%F0%9F%99%82".to_owned(),
        "a%00b".to_owned(),
        "a%0Ab".to_owned(),
        "semi%3Bcolon".to_owned(),
        "quote%22".to_owned(),
        "a*".to_owned(),
    ] {
        let reply = post(rejected.clone()).await;
        assert_eq!(
            reply.status, 400,
            "identifier {rejected} answered {}: {}",
            reply.status, reply.text
        );
        assert_error(&reply, 400);
    }
    // Nothing escaped the data dir.
    let parent = server.data_dir().parent().expect("root");
    assert!(!parent.join("etc").exists());
    assert_eq!(server.get("/status/health").await.status, 200);
}

#[tokio::test]
async fn hostile_bodies_do_not_crash_the_service_or_lose_accepted_data() {
    let server_args = ["--collector-identifier-rate", "0"];
    let mut server = TestServer::start_with(&server_args).await;
    let survey = server.provision_ok(server.key(), "hostile", "H").await;
    let tracking = survey.tracking_key.clone();
    let identifier = new_uuid();
    let depth = 100_000;

    let mut accepted = 0u64;
    let mut raw_lengths = Vec::new();
    let hostile_events = [
        format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth)),
        format!(r#""{}""#, "s".repeat(900 * 1024)),
        format!(
            r#"{{"type":"input","timestamp":{},"data":{{"note":"{}"}}}}"#,
            now_millis(),
            "\\u00e9\\\"".repeat(50_000)
        ),
        format!(
            r#"{{"type":{},"timestamp":"yesterday","data":[1,2,3]}}"#,
            "[".repeat(1000) + &"]".repeat(1000)
        ),
        r#"{"type":"pointermove","timestamp":1e400,"data":{"x":1e400,"y":-1}}"#.to_owned(),
        r#"{"type":"pointermove","timestamp":-9223372036854775809,"data":{"x":2147483648,"y":0}}"#
            .to_owned(),
    ];
    for event in &hostile_events {
        let body = batch(std::slice::from_ref(event));
        let reply: Reply = server
            .collect(&tracking, &identifier, Some("application/json"), body)
            .await;
        assert_eq!(
            reply.status,
            201,
            "a {} byte event answered {}: {}",
            event.len(),
            reply.status,
            reply.text
        );
        accepted += 1;
        raw_lengths.push(event.len());
        assert_eq!(server.get("/status/health").await.status, 200);
    }
    // Unbalanced deep nesting is malformed, not a crash.
    for body in [
        format!(r#"{{"events":[{}]}}"#, "[".repeat(depth)),
        format!(r#"{{"events":[{}]}}"#, r#"{"a":"#.repeat(depth)),
        format!(r#"{{"events":[{}"#, "[".repeat(depth)),
    ] {
        let reply = server
            .collect(&tracking, &identifier, Some("application/json"), body)
            .await;
        assert_error(&reply, 400);
    }
    // A well-behaved batch after all that.
    server
        .collect_ok(&tracking, &identifier, &pointer_batch(5), 5)
        .await;
    accepted += 5;

    let rows = server
        .lookup_until_counts(
            server.key(),
            &survey.survey_id,
            &[(identifier.clone(), accepted)],
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(accepted), "{rows:?}");

    // The background flusher decodes and writes them all while the server keeps serving.
    let partition = format!("events/survey_id={}/", survey.survey_id);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let flushed: u64 = server
            .live_files("events")
            .iter()
            .filter(|(path, _)| path.starts_with(&partition))
            .map(|(_, rows)| rows)
            .sum();
        if flushed == accepted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {flushed} of {accepted} events reached the lake\n{}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server.is_running(), "the server died\n{}", server.logs());
    assert_eq!(server.get("/status/health").await.status, 200);
    server.terminate_ok().await;

    // Everything accepted is in the lake, raw where it could not be typed.
    let rows = duckdb_query(&format!(
        "SELECT count(*) AS n, count(payload) AS raw, max(length(payload)) AS longest
         FROM read_parquet({}, hive_partitioning = true)
         WHERE session_id = '{identifier}'",
        server.events_files()
    ));
    assert_eq!(rows[0]["n"], json!(accepted), "{rows:?}");
    assert_eq!(rows[0]["raw"], json!(hostile_events.len()), "{rows:?}");
    assert_eq!(
        rows[0]["longest"],
        json!(raw_lengths.iter().max().copied().expect("some")),
        "{rows:?}"
    );

    // And the restarted service still counts them.
    server.restart().await;
    let rows = server
        .lookup_rows(
            server.key(),
            &survey.survey_id,
            std::slice::from_ref(&identifier),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(accepted), "{rows:?}");
}

/// Sends a request's head over a raw connection, declaring `length` body bytes and sending none,
/// and returns the status line of the answer, or None when none came within two seconds.
async fn head_only(server: &TestServer, path: &str, length: usize) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.base_url().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("send head");
    let mut answer = vec![0u8; 512];
    match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut answer)).await {
        Ok(Ok(n)) if n > 0 => String::from_utf8_lossy(&answer[..n])
            .lines()
            .next()
            .map(str::to_owned),
        _ => None,
    }
}

#[tokio::test]
async fn refusals_come_before_the_body_is_read() {
    let server = TestServer::start_with(&["--collector-ip-rate", "2"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "early", "Early").await;
    let path = format!("/event/{}/{}", survey.tracking_key, new_uuid());
    // A declared length over 1 MiB is refused from the head alone.
    let status = head_only(&server, &path, 5 * ONE_MIB).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    // A client over its rate limit is refused without sending its body: of ten requests at
    // once, those past the limit are answered 429 from the head alone (the others wait for
    // bodies that never come).
    let answers =
        futures::future::join_all((0..10).map(|_| head_only(&server, &path, 500_000))).await;
    assert!(
        answers
            .iter()
            .any(|answer| answer.as_deref() == Some("HTTP/1.1 429 Too Many Requests")),
        "{answers:?}"
    );
}
