//! Time-bounded fuzzing of the collector's request handling against the real binary
//! (tests/fuzz/mutator.rs; budget `TELLTALE_FUZZ_SECS`). Each input is a request: a head line
//! `METHOD PATH CONTENT-TYPE` (`{KEY}` in the path stands for a real tracking key, `-` for no
//! content type), a newline, and the body; the corpus is `tests/fuzz/corpus/collector`.
//!
//! What must hold for every request: an answer (no dropped connection), never a 5xx but a 503
//! with `Retry-After`, every error a JSON `{"error": "..."}`; a 201 only for a JSON object whose
//! `events` is an array, counting exactly its events; a well-formed batch for a known key under
//! a valid identifier always a 201. Afterwards the lake holds exactly the events acknowledged.

use std::cell::Cell;
use std::path::Path;

use serde_json::Value;

use crate::harness::{TestServer, duckdb_query};

#[path = "../fuzz/mutator.rs"]
mod mutator;

/// A request decoded from an input, or None when it is not one an HTTP client can send.
struct FuzzRequest {
    method: reqwest::Method,
    path: String,
    content_type: Option<String>,
    body: Vec<u8>,
}

fn parse_input(input: &[u8], tracking_key: &str) -> Option<FuzzRequest> {
    let split = input.iter().position(|byte| *byte == b'\n')?;
    let head = std::str::from_utf8(&input[..split]).ok()?;
    let mut parts = head.splitn(3, ' ');
    let method = reqwest::Method::from_bytes(parts.next()?.as_bytes()).ok()?;
    let path = parts.next()?.replace("{KEY}", tracking_key);
    if !path.starts_with('/') {
        return None;
    }
    let content_type = match parts.next()?.trim() {
        "-" => None,
        value => Some(value.to_owned()),
    };
    Some(FuzzRequest {
        method,
        path,
        content_type,
        body: input[split + 1..].to_vec(),
    })
}

/// What serde says the body is: the number of events of a well-formed batch, if it is one.
/// Events are taken as raw JSON: a string escape of a lone surrogate (`"\ud83a"`, which a
/// browser's `JSON.stringify` writes for a string holding half an emoji) is valid JSON syntax
/// the collector keeps verbatim, though it decodes to no Unicode text (found by this fuzzing).
fn batch_events(body: &[u8]) -> Option<usize> {
    #[derive(serde::Deserialize)]
    struct Batch {
        events: Vec<Box<serde_json::value::RawValue>>,
    }
    let first = body.iter().find(|byte| !byte.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    serde_json::from_slice::<Batch>(body)
        .ok()
        .map(|batch| batch.events.len())
}

fn valid_identifier(identifier: &str) -> bool {
    (1..=128).contains(&identifier.len())
        && identifier
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._:-".contains(&byte))
}

fn accepted_content_type(content_type: Option<&str>) -> bool {
    let Some(value) = content_type else {
        return true;
    };
    let media = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media == "text/plain"
}

#[test]
fn fuzz_the_collector_request_handling() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut server = runtime.block_on(TestServer::start_with(&[
        "--collector-ip-rate",
        "0",
        "--collector-identifier-rate",
        "0",
    ]));
    let key = server.key().to_owned();
    let survey = runtime.block_on(server.provision_ok(&key, "fuzz", "Fuzz"));
    let tracking_key = survey.tracking_key.clone();
    let accepted = Cell::new(0u64);
    let sent = Cell::new(0u64);

    let check = |input: &[u8]| -> Result<(), String> {
        let Some(request) = parse_input(input, &tracking_key) else {
            return Ok(());
        };
        let Ok(url) = reqwest::Url::parse(&server.url(&request.path)) else {
            return Ok(());
        };
        let mut builder = server
            .client()
            .request(request.method.clone(), url.clone())
            .body(request.body.clone());
        if let Some(content_type) = &request.content_type {
            let Ok(value) = reqwest::header::HeaderValue::from_str(content_type) else {
                return Ok(());
            };
            builder = builder.header(reqwest::header::CONTENT_TYPE, value);
        }
        sent.set(sent.get() + 1);
        let (status, retry_after, text) = runtime.block_on(async {
            let response = builder
                .send()
                .await
                .map_err(|error| format!("no answer: {error}"))?;
            let status = response.status().as_u16();
            let retry_after = response.headers().contains_key("retry-after");
            let text = response
                .bytes()
                .await
                .map_err(|error| format!("answer cut off: {error}"))?;
            Ok::<_, String>((status, retry_after, text))
        })?;
        let describe = || {
            format!(
                "{} {} ({:?}) answered {status}: {}",
                request.method,
                url.path(),
                request.content_type,
                String::from_utf8_lossy(&text)
            )
        };
        if status >= 500 && !(status == 503 && retry_after) {
            return Err(describe());
        }
        let json: Option<Value> = serde_json::from_slice(&text).ok();
        if status >= 400 && !json.as_ref().is_some_and(|body| body["error"].is_string()) {
            return Err(format!("an error without a JSON body: {}", describe()));
        }
        let events = batch_events(&request.body);
        if status == 201 {
            let Some(events) = events else {
                return Err(format!("accepted a body that is no batch: {}", describe()));
            };
            let expected = serde_json::json!({ "success": true, "count": events });
            if json.as_ref() != Some(&expected) {
                return Err(format!(
                    "counted other than {events} events: {}",
                    describe()
                ));
            }
            accepted.set(accepted.get() + events as u64);
        }
        if status == 202 {
            return Err(format!("no session is deleted here: {}", describe()));
        }
        // A well-formed batch for the real key under a valid identifier is always taken.
        let segments: Vec<&str> = url.path().split('/').collect();
        let well_formed = request.method == reqwest::Method::POST
            && segments.len() == 4
            && segments[1] == "event"
            && segments[2] == tracking_key
            && valid_identifier(segments[3])
            && accepted_content_type(request.content_type.as_deref())
            && request.body.len() <= 1024 * 1024
            && events.is_some_and(|events| events <= 1000);
        if well_formed && status != 201 && status != 429 && status != 503 {
            return Err(format!("refused a well-formed batch: {}", describe()));
        }
        Ok(())
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    let dictionary: Vec<&[u8]> = mutator::JSON_TOKENS
        .iter()
        .copied()
        .chain([
            &b"%2F"[..],
            &b"%00"[..],
            &b"/"[..],
            &b".."[..],
            &b"?"[..],
            &b"#"[..],
            &b"\n"[..],
            &b";charset="[..],
            &b"text/plain"[..],
            &b"application/json"[..],
            &b"POST "[..],
            &b"PUT "[..],
            &b"OPTIONS "[..],
        ])
        .collect();
    let report = mutator::run("collector", &root, &dictionary, check);
    assert!(
        report.mutants > 0 || mutator::budget().is_zero(),
        "{report:?}"
    );
    assert!(sent.get() > 0, "no request was sent");
    assert!(
        accepted.get() > 0,
        "nothing was accepted: the corpus lost its valid batches"
    );

    // Everything acknowledged is in the lake, once.
    runtime.block_on(server.terminate_ok());
    let rows = duckdb_query(&format!(
        "SELECT count(*) AS n FROM read_parquet({}, hive_partitioning = true)",
        server.events_files()
    ));
    assert_eq!(
        rows[0]["n"],
        serde_json::json!(accepted.get()),
        "{report:?}, {} requests sent",
        sent.get()
    );
}
