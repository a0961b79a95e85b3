//! What an operator watches: Prometheus metrics that count what the service answered,
//! readiness that follows the real stores (a PostgreSQL cluster stopped and started, a moto S3
//! server killed and started again), and logs that honour `RUST_LOG` and `--log-format json`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{
    TestServer, assert_error, batch, new_uuid, now_millis, pointermove, send, session_event,
};
use crate::stores::{PrivatePostgres, aws_env, create_bucket, start_moto, start_moto_on};

/// The value of one series in a Prometheus text exposition (`name{labels} value`), where every
/// label in `labels` is present; the sum over the series that match.
pub(crate) fn series_sum(exposition: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, rest) = match series.split_once('{') {
                Some((series_name, rest)) => (series_name, rest),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let matches = labels
                .iter()
                .all(|(label, wanted)| rest.contains(&format!("{label}=\"{wanted}\"")));
            matches.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

pub(crate) async fn scrape(server: &TestServer) -> String {
    let reply = server.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    reply.text
}

/// Every series docs/operations.md lists is on the first scrape of a fresh instance, at zero
/// where nothing moved it yet: an alert on a rising counter must see its first event.
#[tokio::test]
async fn the_first_scrape_shows_every_documented_series() {
    let server = TestServer::start().await;
    let scraped = scrape(&server).await;
    let documented =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
            .expect("docs/operations.md");
    let mut names: Vec<&str> = documented
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 43, "{names:?}");
    for name in names {
        assert!(
            scraped.contains(&format!("# TYPE {name} ")),
            "{name} is missing from the first scrape"
        );
    }
    for zero in [
        "telltale_collector_refusals_total{reason=\"lake_backlog\"} 0",
        "telltale_rate_limit_refusals_total{limit=\"collector_ip\"} 0",
        "telltale_lake_upload_errors_total 0",
        "telltale_vacuumed_files_total{table=\"events\"} 0",
        "telltale_ready 0",
    ] {
        assert!(scraped.contains(zero), "{zero} not in:\n{scraped}");
    }
}

#[tokio::test]
async fn metrics_count_what_the_collector_and_the_api_answered() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "metrics-survey", "Metrics").await;
    let before = scrape(&server).await;
    let stored_before = series_sum(
        &before,
        "telltale_collector_events_total",
        &[("outcome", "stored")],
    );

    let start = now_millis() - 10_000;
    let mut events_sent = 0usize;
    let mut bytes_sent = 0usize;
    for session in 0..5i32 {
        let reference = new_uuid();
        let mut events = vec![session_event(start, &reference, &reference)];
        for step in 0..(10 + session * 7) {
            events.push(pointermove(start + 16 * i64::from(step), step, session));
        }
        let body = batch(&events);
        events_sent += events.len();
        bytes_sent += body.len();
        server
            .collect_ok(&survey.tracking_key, &reference, &body, events.len())
            .await;
    }
    // Refusals are counted by status, not as accepted events.
    let refused = server
        .collect(
            &survey.tracking_key,
            "bad identifier with spaces",
            Some("application/json"),
            batch(&[]),
        )
        .await;
    assert_error(&refused, 400);

    let after = scrape(&server).await;
    let stored = series_sum(
        &after,
        "telltale_collector_events_total",
        &[("outcome", "stored")],
    );
    assert_eq!(stored - stored_before, events_sent as f64, "{after}");
    assert_eq!(
        series_sum(
            &after,
            "telltale_collector_bytes_total",
            &[("outcome", "stored")]
        ),
        bytes_sent as f64
    );
    let route = "/event/{key}/{identifier}";
    assert_eq!(
        series_sum(
            &after,
            "telltale_http_requests_total",
            &[("route", route), ("status", "201")]
        ),
        5.0,
        "{after}"
    );
    assert_eq!(
        series_sum(
            &after,
            "telltale_http_requests_total",
            &[("route", route), ("status", "400")]
        ),
        1.0
    );
    assert_eq!(
        series_sum(
            &after,
            "telltale_http_request_duration_seconds_count",
            &[("route", route), ("method", "POST")]
        ),
        6.0
    );
    // Group commits happened and were timed; every series is described.
    assert!(series_sum(&after, "telltale_wal_sync_seconds_count", &[]) >= 1.0);
    for name in [
        "telltale_collector_events_total",
        "telltale_wal_sync_seconds",
        "telltale_http_requests_total",
        "telltale_lake_backlog_bytes",
        "telltale_log_lake_lag_records",
    ] {
        assert!(
            after.contains(&format!("# HELP {name} ")),
            "{name}: {after}"
        );
    }
    // Paths are never labels: tracking keys and identifiers stay out of the metrics.
    assert!(!after.contains(&survey.tracking_key), "{after}");

    // The flush drains the backlog: lag and backlog return to zero (flush every 500 ms).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = scrape(&server).await;
        if series_sum(&now, "telltale_log_lake_lag_records", &[]) == 0.0
            && series_sum(&now, "telltale_lake_backlog_bytes", &[]) == 0.0
            && series_sum(&now, "telltale_lake_flushed_events_total", &[]) >= events_sent as f64
        {
            assert!(
                series_sum(
                    &now,
                    "telltale_lake_commits_total",
                    &[("table", "events"), ("outcome", "committed")]
                ) >= 1.0
            );
            break;
        }
        assert!(Instant::now() < deadline, "backlog never drained: {now}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A key over its rate limit is counted as a refusal by limit.
    let limited = TestServer::start_with(&["--api-rate-per-minute", "2"]).await;
    let limited_key = limited.key().to_owned();
    for _ in 0..3 {
        limited.context(&limited_key).await;
    }
    let exposition = scrape(&limited).await;
    assert_eq!(
        series_sum(
            &exposition,
            "telltale_rate_limit_refusals_total",
            &[("limit", "integration_key")]
        ),
        1.0,
        "{exposition}"
    );
}

/// Polls `/status/ready` until it answers `status`; returns how long that took.
async fn ready_becomes(server: &TestServer, status: u16, within: Duration) -> (Duration, Value) {
    let started = Instant::now();
    loop {
        let reply = server.get("/status/ready").await;
        if reply.status == status {
            return (started.elapsed(), reply.json());
        }
        assert!(
            started.elapsed() < within,
            "/status/ready still {} after {within:?}: {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_s3_lake_down_and_back() {
    let moto = start_moto();
    create_bucket(&moto.endpoint, "ready-lake").await;
    let port: u16 = moto
        .endpoint
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("moto port");
    let env = aws_env(&moto.endpoint);
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let server = TestServer::start_with_env(&["--lake", "s3://ready-lake/x"], &env).await;
    let (_, ready) = ready_becomes(&server, 200, Duration::from_secs(10)).await;
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"]["lake"], "ok");

    drop(moto);
    let (took, body) = ready_becomes(&server, 503, Duration::from_secs(10)).await;
    assert!(took <= Duration::from_secs(5), "503 only after {took:?}");
    assert_eq!(body["checks"]["catalog"], "ok", "{body}");
    assert_ne!(body["checks"]["lake"], "ok", "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|error| error.contains("lake")),
        "{body}"
    );
    let reply = server.get("/status/ready").await;
    assert!(reply.header("retry-after").is_some());
    // Liveness is not readiness: the process still serves.
    assert_eq!(server.get("/status/health").await.status, 200);

    let moto = start_moto_on(port);
    create_bucket(&moto.endpoint, "ready-lake").await;
    let (took, _) = ready_becomes(&server, 200, Duration::from_secs(10)).await;
    assert!(
        took <= Duration::from_secs(5),
        "200 again only after {took:?}"
    );
    let metrics = scrape(&server).await;
    assert!(metrics.contains("telltale_ready 1"), "{metrics}");
}

#[tokio::test]
async fn readiness_and_lookups_follow_a_postgresql_restart() {
    let postgres = PrivatePostgres::create();
    let url = postgres.url();
    let server = TestServer::start_with(&["--catalog", &url]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "pg-ready", "PG").await;
    let reference = new_uuid();
    let body = serde_json::json!({ "externalReferences": [reference] }).to_string();
    assert_eq!(
        server.lookup(&key, &survey.survey_id, &body).await.status,
        200
    );
    ready_becomes(&server, 200, Duration::from_secs(10)).await;

    postgres.stop();
    let (took, not_ready) = ready_becomes(&server, 503, Duration::from_secs(10)).await;
    assert!(took <= Duration::from_secs(5), "503 only after {took:?}");
    assert_ne!(not_ready["checks"]["catalog"], "ok", "{not_ready}");
    assert_eq!(not_ready["checks"]["lake"], "ok", "{not_ready}");
    // An integrator's request while the catalog is away: 503 with Retry-After (retried by the
    // clients), never a 500.
    let lookup = server.lookup(&key, &survey.survey_id, &body).await;
    assert_error(&lookup, 503);
    assert!(lookup.header("retry-after").is_some());
    // The collector keeps acknowledging batches of known surveys into its log meanwhile.
    let start = now_millis() - 5_000;
    let events = [
        session_event(start, &reference, &reference),
        pointermove(start + 16, 1, 2),
    ];
    server
        .collect_ok(&survey.tracking_key, &reference, &batch(&events), 2)
        .await;

    postgres.start();
    let (took, _) = ready_becomes(&server, 200, Duration::from_secs(15)).await;
    assert!(
        took <= Duration::from_secs(5),
        "200 again only after {took:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = server.lookup(&key, &survey.survey_id, &body).await;
        assert_ne!(reply.status, 500, "{}", reply.text);
        if reply.status == 200 && reply.json()["data"][0]["eventCount"].as_u64() == Some(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the batch acknowledged during the outage never reached the catalog: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Text logs written to a file (the test reads the server's stderr from a pipe) have no
/// terminal colours, and a request line says its status and latency once, the latency short.
#[tokio::test]
async fn text_logs_off_a_terminal_are_plain_and_say_each_field_once() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    server.provision_ok(&key, "text-logs", "Logs").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let logs = server.logs();
        if let Some(line) = logs.lines().find(|line| line.contains("request answered")) {
            break line.to_owned();
        }
        assert!(Instant::now() < deadline, "no request line: {logs}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !server.logs().contains('\u{1b}'),
        "ANSI escapes in a log file"
    );
    assert_eq!(line.matches("status=").count(), 1, "{line}");
    assert_eq!(line.matches("latency_ms=").count(), 1, "{line}");
    let latency = line
        .split("latency_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a latency");
    let decimals = latency.split('.').nth(1).map_or(0, str::len);
    assert!(decimals <= 3, "{latency} in {line}");
}

#[tokio::test]
async fn logs_are_json_lines_with_one_request_line_and_follow_rust_log() {
    let server = TestServer::start_with(&["--log-format", "json"]).await;
    let key = server.key().to_owned();
    server.provision_ok(&key, "json-logs", "Logs").await;
    let wanted = "/integrations/v1/surveys/{externalSurveyId}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let logs = server.logs();
        let found = logs
            .lines()
            .filter(|line| line.starts_with('{'))
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| {
                line["message"] == "request answered"
                    && line["span"]["route"]
                        .as_str()
                        .is_some_and(|r| r.starts_with(wanted))
            });
        if let Some(line) = found {
            break line;
        }
        assert!(Instant::now() < deadline, "no JSON request line: {logs}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["span"]["method"], "PUT", "{line}");
    assert!(line["status"].as_u64().is_some(), "{line}");
    assert!(line["latency_ms"].as_f64().is_some(), "{line}");
    // Every stderr line of the server is JSON.
    for logged in server.logs().lines().filter(|line| !line.trim().is_empty()) {
        if logged.starts_with('{') {
            serde_json::from_str::<Value>(logged)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {logged}"));
        }
    }

    // RUST_LOG applies when no --log-filter is given: at warn, no request lines.
    let quiet = TestServer::start_with_env(&[], &[("RUST_LOG", "warn")]).await;
    let quiet_key = quiet.key().to_owned();
    quiet.provision_ok(&quiet_key, "quiet", "Quiet").await;
    let reply = send(quiet.client().get(quiet.url("/nowhere"))).await;
    assert_eq!(reply.status, 404);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !quiet.logs().contains("request answered"),
        "{}",
        quiet.logs()
    );

    // A filter that does not parse is refused, naming where it came from.
    let output = server.cli(&["--log-filter", "info,[unclosed", "org", "list"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid --log-filter"), "{stderr}");
}
