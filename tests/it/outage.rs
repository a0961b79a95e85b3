//! Outages of the stores under load. A server runs on a PostgreSQL cluster and a moto S3 server
//! of the test's own while a collector load and an integrator's load run against it.
//!
//! - Stopped: PostgreSQL is stopped and started again (`pg_ctl -m fast`), then moto's HTTP server
//!   (its buckets live on, as a real S3's would).
//! - Frozen and read-only: PostgreSQL's processes are frozen (SIGSTOP) and thawed, then it turns
//!   read-only (every write refused, as after a failover) and writable again, then moto's process
//!   is frozen and thawed; and a second server started while PostgreSQL is down answers 503
//!   until it is back, then serves.
//!
//! Throughout: no answer is a 500, every 503 carries `Retry-After` and a JSON error, no request
//! is held longer than the store timeout and a second, the collector keeps acknowledging into its
//! log, and after each outage the service serves again without a restart; at the end every
//! acknowledged batch is in the lake exactly once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Reply, TestServer, duckdb_query, new_uuid, send};
use crate::stores::{PrivatePostgres, RestartableMoto, ScaleOutStores};

/// One answer the loads got: when (seconds from the start of the load), to what, and how.
#[derive(Debug, Clone)]
struct Answer {
    at: f64,
    /// How long the request took, in seconds.
    took: f64,
    route: &'static str,
    status: u16,
    retry_after: Option<String>,
    body: String,
}

/// When each outage began and ended, in seconds from the start of the load.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    from: f64,
    to: f64,
}

impl Window {
    fn holds(&self, at: f64) -> bool {
        at >= self.from && at <= self.to
    }
}

struct Load {
    started: Instant,
    stop: AtomicBool,
    answers: Mutex<Vec<Answer>>,
    /// `(reference, batch)` of every batch answered 201.
    acknowledged: Mutex<Vec<(String, u64)>>,
    /// Every scoring run started.
    runs: Mutex<Vec<String>>,
}

impl Load {
    fn record(&self, route: &'static str, reply: &Reply, sent: Instant) {
        self.answers
            .lock()
            .expect("the loads' records")
            .push(Answer {
                at: self.started.elapsed().as_secs_f64(),
                took: sent.elapsed().as_secs_f64(),
                route,
                status: reply.status,
                retry_after: reply.header("retry-after").map(str::to_owned),
                body: reply.text.clone(),
            });
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

const EVENTS_PER_BATCH: u64 = 10;

fn numbered_batch(number: u64) -> String {
    crate::harness::numbered_batch(number, EVENTS_PER_BATCH)
}

/// Four sessions, a batch every 20 ms in turn, until told to stop.
async fn collector_load(server: Arc<TestServer>, load: Arc<Load>, tracking_key: String) {
    let references: Vec<String> = (0..4).map(|_| new_uuid()).collect();
    let mut number = 0u64;
    while !load.stop.load(Ordering::Relaxed) {
        let reference = &references[(number % 4) as usize];
        let sent = Instant::now();
        let reply = server
            .collect(
                &tracking_key,
                reference,
                Some("application/json"),
                numbered_batch(number),
            )
            .await;
        load.record("collector", &reply, sent);
        if reply.status == 201 {
            load.acknowledged
                .lock()
                .expect("the loads' records")
                .push((reference.clone(), number));
        }
        number += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An integrator's requests to one route of the API (`turn` picks it), over and over until told
/// to stop; the test runs one of these per route, so that a request held by an outage holds up
/// no other route.
async fn integrator_load(
    server: Arc<TestServer>,
    load: Arc<Load>,
    key: String,
    survey_id: String,
    scored: String,
    route: usize,
) {
    let client = server.client().clone();
    let surveys = format!("/integrations/v1/surveys/{survey_id}");
    let mut turn = 0u64;
    while !load.stop.load(Ordering::Relaxed) {
        let (route, request) = match route {
            0 => (
                "context",
                client.get(server.url("/integrations/v1/context")),
            ),
            1 => (
                "lookup",
                client
                    .post(server.url(&format!("{surveys}/sessions/lookup")))
                    .json(&json!({ "externalReferences": [scored] })),
            ),
            2 => (
                "evidence",
                client.get(server.url(&format!(
                    "{surveys}/sessions/by-reference/{scored}/evidence"
                ))),
            ),
            3 => (
                "provision",
                client
                    .put(server.url(&format!("/integrations/v1/surveys/outage-{turn}")))
                    .json(&json!({ "name": "Outage" })),
            ),
            4 => (
                "start run",
                client
                    .post(server.url(&format!("{surveys}/scoring-runs")))
                    .json(&json!({})),
            ),
            5 => (
                "delete",
                client
                    .delete(server.url(&format!("{surveys}/sessions/by-reference/{}", new_uuid()))),
            ),
            6 => (
                "deletion",
                client.get(server.url(&format!("{surveys}/session-deletions/{}", new_uuid()))),
            ),
            _ => ("ready", client.get(server.url("/status/ready"))),
        };
        let sent = Instant::now();
        let reply = send(request.bearer_auth(&key)).await;
        load.record(route, &reply, sent);
        if route == "start run" && reply.status == 202 {
            let run = reply.json()["data"]["id"].as_str().map(str::to_owned);
            if let Some(run) = run {
                load.runs
                    .lock()
                    .expect("the loads' records")
                    .push(run.clone());
                let poll = client
                    .get(server.url(&format!("{surveys}/scoring-runs/{run}")))
                    .bearer_auth(&key);
                let sent = Instant::now();
                let reply = send(poll).await;
                load.record("run", &reply, sent);
            }
        }
        turn += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The integrator's routes, one load each.
const ROUTES: usize = 8;

/// Polls `/status/ready` until it answers `status`; returns the body.
async fn ready_is(server: &TestServer, status: u16, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let reply = server.get("/status/ready").await;
        if reply.status == status {
            return reply.json();
        }
        assert!(
            Instant::now() < deadline,
            "/status/ready still {} after {within:?}: {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A server on a PostgreSQL cluster and a moto server of the test's own, a survey with one
/// session captured and scored (lookups and evidence have data), and the loads running.
struct Rig {
    postgres: Arc<PrivatePostgres>,
    moto: RestartableMoto,
    server: Arc<TestServer>,
    key: String,
    survey: crate::harness::Survey,
    load: Arc<Load>,
    loads: Vec<tokio::task::JoinHandle<()>>,
}

async fn rig() -> Rig {
    let postgres = Arc::new(PrivatePostgres::create());
    let moto = RestartableMoto::start();
    let scratch = TestServer::new_root();
    let stores = ScaleOutStores::create_with(scratch.path(), &postgres.url(), &moto.endpoint).await;
    let server = Arc::new(
        TestServer::start_on_stores(
            scratch,
            stores,
            &[
                "--api-rate-per-minute",
                "1000000",
                "--collector-ip-rate",
                "0",
                "--collector-identifier-rate",
                "0",
            ],
            &[],
        )
        .await,
    );
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "outage", "Outage").await;
    // A session captured and scored before the outages: lookups and evidence have data.
    let scored = new_uuid();
    for number in 0..5 {
        server
            .collect_ok(
                &survey.tracking_key,
                &scored,
                &numbered_batch(number),
                EVENTS_PER_BATCH as usize,
            )
            .await;
    }
    server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(scored.clone(), 5 * EVENTS_PER_BATCH)],
            Duration::from_secs(10),
        )
        .await;
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    ready_is(&server, 200, Duration::from_secs(10)).await;

    let load = Arc::new(Load {
        started: Instant::now(),
        stop: AtomicBool::new(false),
        answers: Mutex::new(Vec::new()),
        acknowledged: Mutex::new(Vec::new()),
        runs: Mutex::new(Vec::new()),
    });
    let collector = tokio::spawn(collector_load(
        Arc::clone(&server),
        Arc::clone(&load),
        survey.tracking_key.clone(),
    ));
    let mut loads: Vec<_> = (0..ROUTES)
        .map(|route| {
            tokio::spawn(integrator_load(
                Arc::clone(&server),
                Arc::clone(&load),
                key.clone(),
                survey.survey_id.clone(),
                scored.clone(),
                route,
            ))
        })
        .collect();
    loads.push(collector);
    Rig {
        postgres,
        moto,
        server,
        key,
        survey,
        load,
        loads,
    }
}

impl Rig {
    /// Stops the loads; the answers they got.
    async fn stop(&mut self) -> Vec<Answer> {
        self.load.stop.store(true, Ordering::Relaxed);
        for load in self.loads.drain(..) {
            load.await.expect("a load");
        }
        self.load
            .answers
            .lock()
            .expect("the loads' records")
            .clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outages_of_postgresql_and_s3_answer_503_and_lose_no_batch() {
    let mut rig = rig().await;
    let (postgres, server, load) = (
        Arc::clone(&rig.postgres),
        Arc::clone(&rig.server),
        Arc::clone(&rig.load),
    );
    let (key, survey) = (rig.key.clone(), rig.survey.clone());
    let outage = Duration::from_secs(8);

    // PostgreSQL goes away and comes back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut catalog = Window {
        from: load.now(),
        to: 0.0,
    };
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .expect("stop PostgreSQL");
    let down = ready_is(&server, 503, Duration::from_secs(10)).await;
    assert_ne!(down["checks"]["catalog"], "ok", "{down}");
    tokio::time::sleep(outage).await;
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.start())
        .await
        .expect("start PostgreSQL");
    ready_is(&server, 200, Duration::from_secs(15)).await;
    catalog.to = load.now();

    // The object store goes away and comes back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut lake = Window {
        from: load.now(),
        to: 0.0,
    };
    rig.moto.stop();
    let down = ready_is(&server, 503, Duration::from_secs(10)).await;
    assert_ne!(down["checks"]["lake"], "ok", "{down}");
    assert_eq!(down["checks"]["catalog"], "ok", "{down}");
    tokio::time::sleep(outage).await;
    rig.moto.resume();
    ready_is(&server, 200, Duration::from_secs(15)).await;
    lake.to = load.now();

    tokio::time::sleep(Duration::from_secs(3)).await;
    let answers = rig.stop().await;
    let statuses: std::collections::BTreeMap<(&str, u16), usize> =
        answers
            .iter()
            .fold(Default::default(), |mut counts, answer| {
                *counts.entry((answer.route, answer.status)).or_default() += 1;
                counts
            });
    for (name, window) in [("catalog", catalog), ("lake", lake)] {
        let counts: std::collections::BTreeMap<(&str, u16), usize> = answers
            .iter()
            .filter(|answer| window.holds(answer.at))
            .fold(Default::default(), |mut counts, answer| {
                *counts.entry((answer.route, answer.status)).or_default() += 1;
                counts
            });
        eprintln!("outage: during the {name} outage: {counts:?}");
    }
    eprintln!(
        "outage: catalog {catalog:?}, lake {lake:?}; answers (route, status): count {statuses:?}"
    );
    assert_only_retryable_failures(&answers);
    let in_window = |window: Window, route: &str, status: u16| {
        answers
            .iter()
            .filter(|answer| window.holds(answer.at))
            .filter(|answer| answer.route == route && answer.status == status)
            .count()
    };
    for route in ["context", "lookup", "provision", "delete"] {
        assert!(
            in_window(catalog, route, 503) > 0,
            "no 503 for {route} while PostgreSQL was down"
        );
    }
    assert!(
        in_window(lake, "evidence", 503) > 0,
        "no 503 for evidence while S3 was down"
    );
    // The collector acknowledged throughout: every batch of both windows is a 201.
    for window in [catalog, lake] {
        let refused: Vec<&Answer> = answers
            .iter()
            .filter(|answer| answer.route == "collector" && window.holds(answer.at))
            .filter(|answer| answer.status != 201)
            .collect();
        assert!(
            refused.is_empty(),
            "collector refused batches: {refused:#?}"
        );
        assert!(in_window(window, "collector", 201) > 50, "{window:?}");
    }

    // Everything serves again without a restart, and every batch is counted once.
    drop(server);
    assert_every_batch_counted_once(rig, &key, &survey).await;
}

/// Every answer of 500 or more is a 503 with `Retry-After` and a JSON error.
fn assert_only_retryable_failures(answers: &[Answer]) {
    let mut failures = Vec::new();
    for answer in answers {
        let bad = match answer.status {
            503 => {
                answer.retry_after.is_none()
                    || serde_json::from_str::<Value>(&answer.body)
                        .ok()
                        .and_then(|body| body.get("error").map(Value::is_string))
                        != Some(true)
            }
            status => status >= 500,
        };
        if bad {
            failures.push(answer.clone());
        }
    }
    assert!(
        failures.is_empty(),
        "answers that were not a 503 with Retry-After and a JSON error: {failures:#?}"
    );
}

/// After the outages: lookups count every acknowledged event, every run started during them
/// completed, a new run completes, and every acknowledged batch is in the lake once, whole.
async fn assert_every_batch_counted_once(rig: Rig, key: &str, survey: &crate::harness::Survey) {
    let Rig { server, load, .. } = rig;
    let key = key.to_owned();
    // Everything serves again without a restart: lookups count every acknowledged event, a new
    // run completes.
    let acknowledged = load
        .acknowledged
        .lock()
        .expect("the loads' records")
        .clone();
    let mut per_reference: std::collections::BTreeMap<String, u64> = Default::default();
    for (reference, _) in &acknowledged {
        *per_reference.entry(reference.clone()).or_default() += EVENTS_PER_BATCH;
    }
    let expected: Vec<(String, u64)> = per_reference.into_iter().collect();
    let rows = server
        .lookup_until_counts(&key, &survey.survey_id, &expected, Duration::from_secs(30))
        .await;
    for (row, (reference, count)) in rows.iter().zip(&expected) {
        assert_eq!(
            row["eventCount"].as_u64(),
            Some(*count),
            "{reference}: {row}"
        );
    }
    // Runs started during an outage were paused, not failed, and completed once it ended.
    let mut runs = load.runs.lock().expect("the loads' records").clone();
    runs.sort();
    runs.dedup();
    for run in &runs {
        let path = format!(
            "/integrations/v1/surveys/{}/scoring-runs/{run}",
            survey.survey_id
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let body = loop {
            let reply = send(server.client().get(server.url(&path)).bearer_auth(&key)).await;
            assert_eq!(reply.status, 200, "{}", reply.text);
            let body = reply.json()["data"].clone();
            if body["status"] != "running" || Instant::now() > deadline {
                break body;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert_eq!(body["status"], "completed", "{body}");
    }
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");

    // Every acknowledged batch is in the lake once, whole.
    let mut server = Arc::into_inner(server).expect("the loads are done");
    server.terminate_ok().await;
    let references: Vec<String> = expected
        .iter()
        .map(|(reference, _)| format!("'{reference}'"))
        .collect();
    let rows = duckdb_query(&format!(
        "SELECT reference, CAST(x AS BIGINT) AS batch, count(*) AS n, count(DISTINCT y) AS d
         FROM read_parquet({}, hive_partitioning = true)
         WHERE reference IN ({}) GROUP BY reference, batch ORDER BY reference, batch",
        server.events_files(),
        references.join(",")
    ));
    let mut found: Vec<(String, u64)> = Vec::new();
    for row in &rows {
        assert_eq!(
            row["n"],
            json!(EVENTS_PER_BATCH),
            "a batch twice or in part: {row}"
        );
        assert_eq!(row["d"], json!(EVENTS_PER_BATCH), "{row}");
        found.push((
            row["reference"].as_str().expect("reference").to_owned(),
            row["batch"].as_u64().expect("batch"),
        ));
    }
    let mut acknowledged = acknowledged;
    acknowledged.sort();
    assert_eq!(
        found, acknowledged,
        "the lake holds the acknowledged batches"
    );
}

/// The longest a request may be held while a store hangs: the store timeout (5 s, the outage
/// policy's) and a second.
const HELD_AT_MOST_SECS: f64 = 6.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn frozen_and_read_only_stores_hold_no_request_and_a_start_waits_for_them() {
    let mut rig = rig().await;
    let (postgres, server, load) = (
        Arc::clone(&rig.postgres),
        Arc::clone(&rig.server),
        Arc::clone(&rig.load),
    );
    let (key, survey) = (rig.key.clone(), rig.survey.clone());
    let outage = Duration::from_secs(8);
    let mut windows = Vec::new();

    // PostgreSQL hangs: connections are taken and never answered.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut frozen = Window {
        from: load.now(),
        to: 0.0,
    };
    postgres.freeze(true);
    ready_is(&server, 503, Duration::from_secs(10)).await;
    tokio::time::sleep(outage).await;
    postgres.freeze(false);
    ready_is(&server, 200, Duration::from_secs(20)).await;
    frozen.to = load.now();
    windows.push(("frozen PostgreSQL", frozen));

    // PostgreSQL refuses every write, as a demoted primary does after a failover.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut read_only = Window {
        from: load.now(),
        to: 0.0,
    };
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.set_read_only(true))
        .await
        .expect("read-only");
    tokio::time::sleep(outage).await;
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.set_read_only(false))
        .await
        .expect("writable");
    read_only.to = load.now() + 2.0;
    windows.push(("read-only PostgreSQL", read_only));

    // The object store hangs.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut bucket = Window {
        from: load.now(),
        to: 0.0,
    };
    rig.moto.freeze(true);
    ready_is(&server, 503, Duration::from_secs(10)).await;
    tokio::time::sleep(outage).await;
    rig.moto.freeze(false);
    ready_is(&server, 200, Duration::from_secs(40)).await;
    bucket.to = load.now();
    windows.push(("frozen S3", bucket));

    // A second server started while PostgreSQL is down takes its address, answers 503 (health
    // answers: the process serves), and serves once the database is back.
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .expect("stop PostgreSQL");
    let second = TestServer::start_sharing(&server, &["--api-rate-per-minute", "1000000"]).await;
    let waiting = second.context(&key).await;
    assert_eq!(waiting.status, 503, "{}", waiting.text);
    assert!(waiting.header("retry-after").is_some(), "{}", waiting.text);
    assert!(waiting.json()["error"].is_string(), "{}", waiting.text);
    let cluster = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || cluster.start())
        .await
        .expect("start PostgreSQL");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = second.context(&key).await;
        if reply.status == 200 {
            break;
        }
        assert_eq!(reply.status, 503, "{}", reply.text);
        assert!(
            Instant::now() < deadline,
            "the server started during the outage never served: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(second);

    tokio::time::sleep(Duration::from_secs(3)).await;
    let answers = rig.stop().await;
    for (name, window) in &windows {
        let counts: std::collections::BTreeMap<(&str, u16), usize> = answers
            .iter()
            .filter(|answer| window.holds(answer.at))
            .fold(Default::default(), |mut counts, answer| {
                *counts.entry((answer.route, answer.status)).or_default() += 1;
                counts
            });
        eprintln!("outage: during the {name} window {window:?}: {counts:?}");
    }
    assert_only_retryable_failures(&answers);
    let held: Vec<&Answer> = answers
        .iter()
        .filter(|answer| answer.took > HELD_AT_MOST_SECS)
        .collect();
    assert!(
        held.is_empty(),
        "requests held past the store timeout and a second: {held:#?}"
    );
    let longest = answers.iter().map(|a| a.took).fold(0.0, f64::max);
    eprintln!("outage: the longest request took {longest:.2} s");
    // Writes were refused while PostgreSQL was read-only; the collector kept acknowledging.
    let refused_writes = answers
        .iter()
        .filter(|answer| read_only.holds(answer.at) && answer.route == "provision")
        .filter(|answer| answer.status == 503)
        .count();
    assert!(
        refused_writes > 0,
        "no provisioning refused while read-only"
    );
    for (name, window) in &windows {
        let acknowledged = answers
            .iter()
            .filter(|answer| window.holds(answer.at) && answer.route == "collector")
            .filter(|answer| answer.status == 201)
            .count();
        assert!(
            acknowledged > 50,
            "{name}: {acknowledged} batches acknowledged"
        );
    }

    drop(server);
    assert_every_batch_counted_once(rig, &key, &survey).await;
}
