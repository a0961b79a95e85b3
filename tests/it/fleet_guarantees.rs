//! What a fleet guarantees when one of its members stalls or lags (issue 70), through the
//! binary: two instances on one PostgreSQL catalog and one S3 bucket (moto), one of them reaching
//! the bucket through a proxy the test can stall.
//!
//! - An erasure that completes while an instance's uploads hang is not undone when they land:
//!   the stalled instance was fenced, and what it wrote after is refused.
//! - A run on one instance scores a session another instance acknowledged on all of its events,
//!   or defers it to a later run, never on part of them, while that instance could still
//!   deliver them (it is silent, or stopped without leaving); one given up with
//!   `forget-instance` holds nothing up.

use std::time::{Duration, Instant};

use scorer::synthetic::{Behaviour, session};
use serde_json::{Value, json};

use crate::deletion::{lake_rows_mentioning, request_deletion, send_session, wait_deletion_done};
use crate::harness::{TestServer, duckdb_query, new_uuid, now_millis};
use crate::operations::{scrape, series_sum};
use crate::proxy::StallProxy;
use crate::scoring::{HAND_SET_MODEL, NO_API_LIMIT, run_to_end};

/// Two instances on one catalog and bucket; the second reaches the bucket through a proxy.
async fn fleet_with_proxied_second(args: &[&str]) -> (TestServer, TestServer, StallProxy) {
    let first = TestServer::start_scale_out(args).await;
    let moto = first
        .scale_out_stores()
        .expect("scale-out stores")
        .endpoint()
        .to_owned();
    let proxy = StallProxy::start(&moto).await;
    let second =
        TestServer::start_sharing_with_env(&first, args, &[("AWS_ENDPOINT", &proxy.endpoint)])
            .await;
    (first, second, proxy)
}

#[tokio::test]
async fn an_erasure_is_not_undone_by_an_instance_whose_uploads_were_stalled() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--instance-lease-secs",
        "3",
    ];
    let (first, mut second, proxy) = fleet_with_proxied_second(&args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "fenced", "Fenced").await;
    let sid = survey.survey_id.clone();

    // The second instance's S3 traffic hangs from here on; it still acknowledges into its log
    // and applies statistics to the catalog.
    proxy.stall();
    let (x, kept) = (new_uuid(), new_uuid());
    let x_events = send_session(&second, &survey, &x, None, 3, 27).await;
    let kept_events = send_session(&second, &survey, &kept, None, 2, 20).await;
    first
        .lookup_until_counts(
            &key,
            &sid,
            &[(x.clone(), x_events), (kept.clone(), kept_events)],
            Duration::from_secs(10),
        )
        .await;
    // At least one flush of the second instance is now stuck in its upload.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(second.log_occurrences(&x) > 0, "x is in the second's log");

    // Deleted through the first instance: it completes while the second still hangs.
    let reply = request_deletion(&first, &key, &sid, &x).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = wait_deletion_done(&first, &key, &sid, &x).await;
    assert_eq!(done["status"], "completed", "{done}");
    // It went ahead by fencing the silent instance off, not by ignoring it.
    let fences = series_sum(&scrape(&first).await, "telltale_fleet_fences_total", &[]);
    assert_eq!(fences, 1.0, "the first instance fenced the second off");

    // The stall ends: whatever the second instance had in flight lands or is refused. Stopped
    // gracefully, it flushes everything it holds.
    proxy.release();
    let deadline = Instant::now() + Duration::from_secs(60);
    while second.log_occurrences(&x) > 0 {
        assert!(
            Instant::now() < deadline,
            "the second instance did not purge x from its log after the stall\n{}",
            second.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let scraped = scrape(&second).await;
    let rejoins = series_sum(&scraped, "telltale_fleet_rejoins_total", &[]);
    eprintln!(
        "the second instance: {rejoins} rejoins, {} flush commits refused, {} flush errors",
        series_sum(
            &scraped,
            "telltale_lake_commits_total",
            &[("outcome", "refused")]
        ),
        series_sum(
            &scraped,
            "telltale_lake_flushes_total",
            &[("outcome", "error")]
        ),
    );
    assert!(
        rejoins >= 1.0,
        "the second instance found itself fenced off"
    );
    second.terminate_ok().await;
    let mentions = lake_rows_mentioning(&first, &[&x]);
    assert!(
        mentions.is_empty(),
        "the erased session is back in the lake: {} rows, first {:?}",
        mentions.len(),
        mentions.first()
    );
    assert_eq!(second.log_occurrences(&x), 0, "x is in the second's log");
    let rows = first
        .lookup_rows(&key, &sid, &[x.clone(), kept.clone()])
        .await;
    assert_eq!(
        (&rows[0]["captured"], &rows[0]["eventCount"]),
        (&json!(false), &json!(0)),
        "{rows:?}"
    );
    // Nothing acknowledged of the kept session was lost on the way.
    assert_eq!(rows[1]["eventCount"], json!(kept_events), "{rows:?}");
    let kept_rows = duckdb_query(&format!(
        "SELECT count(*) AS n FROM read_parquet({}) WHERE session_id = '{kept}'",
        first.events_files()
    ));
    assert_eq!(kept_rows[0]["n"], json!(kept_events), "{kept_rows:?}");
}

/// How many events the latest score of `reference` was computed from (the `scores` table's
/// A person's session of a few hundred events that began two minutes ago: its reference, its
/// browser-session id (`prefix`-) and its events.
fn human_session(prefix: &str, seed: u64) -> (String, String, Vec<String>) {
    let reference = new_uuid();
    let identifier = format!("{prefix}-{}", &reference[..8]);
    let events = session(
        Behaviour::Human,
        &identifier,
        &reference,
        now_millis() - 120_000,
        3,
        seed,
    );
    (reference, identifier, events)
}

/// Posts `events` to `server` in batches of 40, each acknowledged.
async fn post_in_batches(
    server: &TestServer,
    tracking_key: &str,
    identifier: &str,
    events: &[String],
) {
    for chunk in events.chunks(40) {
        let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
        server
            .collect_ok(tracking_key, identifier, &body, chunk.len())
            .await;
    }
}

/// `event_count`), if it has a score.
fn scored_event_count(server: &TestServer, reference: &str) -> Option<u64> {
    let lake = server.lake_dir();
    let live: Vec<String> = crate::harness::live_files_at(&lake, "scores")
        .into_iter()
        .map(|(path, _)| format!("'{}'", lake.join(path).display()))
        .collect();
    if live.is_empty() {
        return None;
    }
    let rows: Vec<Value> = duckdb_query(&format!(
        "SELECT event_count FROM read_parquet([{}], union_by_name = true)
         WHERE reference = '{reference}' ORDER BY scored_at DESC LIMIT 1",
        live.join(", ")
    ));
    rows.first().and_then(|row| row["event_count"].as_u64())
}

#[tokio::test]
async fn a_run_on_one_instance_scores_another_instances_session_whole_or_not_at_all() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
        "--flush-interval-ms",
        "1000",
    ];
    let first = TestServer::start_scale_out(&args).await;
    let second = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "horizon", "Horizon").await;
    let sid = survey.survey_id.clone();

    // A session of 300-odd events posted to the second instance: its first half reaches the
    // lake in a flush, its second half is acknowledged just before a run starts on the first.
    let (reference, identifier, events) = human_session("horizon", 7);
    let total = events.len() as u64;
    assert!(total >= 200, "{total} events");
    let (early, late) = events.split_at(events.len() / 2);
    post_in_batches(&second, &survey.tracking_key, &identifier, early).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    post_in_batches(&second, &survey.tracking_key, &identifier, late).await;
    let done = run_to_end(&first, &key, &sid, Some(r#"{"force": false}"#)).await;
    assert_eq!(done["status"], "completed", "{done}");
    match scored_event_count(&first, &reference) {
        Some(count) => assert_eq!(
            count, total,
            "the run scored the session on {count} of its {total} acknowledged events: {done}"
        ),
        None => {
            // Deferred: the run says so, and the next run scores it whole.
            assert_eq!(done["deferred"], json!(1), "{done}");
            let again = run_to_end(&first, &key, &sid, Some(r#"{"force": false}"#)).await;
            assert_eq!(
                (&again["status"], &again["scored"]),
                (&json!("completed"), &json!(1)),
                "{again}"
            );
            assert_eq!(scored_event_count(&first, &reference), Some(total));
        }
    }
    let rows = first
        .lookup_rows(&key, &sid, std::slice::from_ref(&reference))
        .await;
    assert_eq!(rows[0]["eventCount"], json!(total), "{rows:?}");
    assert!(rows[0]["scoreBand"].is_string(), "{rows:?}");
}

#[tokio::test]
async fn a_session_whose_events_sit_in_a_hung_instance_is_deferred_then_scored_whole() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
        // Nothing reaches the lake by itself during the test: only a flush someone asks for.
        "--flush-interval-ms",
        "600000",
        "--fleet-flush-wait-secs",
        "1",
    ];
    let first = TestServer::start_scale_out(&args).await;
    let second = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "deferred", "Deferred").await;
    let sid = survey.survey_id.clone();

    // Acknowledged by the second instance, counted in the catalog, then the instance hangs
    // with the events in its log.
    let (reference, identifier, events) = human_session("hung", 11);
    let total = events.len() as u64;
    post_in_batches(&second, &survey.tracking_key, &identifier, &events).await;
    first
        .lookup_until_counts(
            &key,
            &sid,
            &[(reference.clone(), total)],
            Duration::from_secs(10),
        )
        .await;
    second.pause();

    // The run asks the hung instance to flush, waits its second, and defers the session.
    let done = run_to_end(&first, &key, &sid, None).await;
    second.resume();
    assert_eq!(
        (&done["status"], &done["scored"], &done["deferred"]),
        (&json!("completed"), &json!(0), &json!(1)),
        "{done}"
    );
    let reason = done["deferredReason"].as_str().expect("a reason");
    let second_id = std::fs::read_to_string(second.data_dir().join("instance-id")).expect("id");
    assert!(
        reason.contains("1 session has") && reason.contains(second_id.trim()),
        "{reason}"
    );
    assert_eq!(scored_event_count(&first, &reference), None);

    // Back, the instance answers the flush the run asked for (late), and the next run scores the
    // session on all its events.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let flushed = series_sum(
            &scrape(&second).await,
            "telltale_lake_flushed_events_total",
            &[],
        );
        if flushed >= total as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second instance never flushed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = run_to_end(&first, &key, &sid, None).await;
    assert_eq!(
        (&again["status"], &again["scored"], &again["deferred"]),
        (&json!("completed"), &json!(1), &json!(0)),
        "{again}"
    );
    assert_eq!(scored_event_count(&first, &reference), Some(total));
}

#[tokio::test]
async fn a_killed_instance_defers_its_sessions_until_it_is_forgotten() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
        "--flush-interval-ms",
        "600000",
        "--fleet-flush-wait-secs",
        "2",
        "--instance-lease-secs",
        "3",
    ];
    let first = TestServer::start_scale_out(&args).await;
    let mut second = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "forgotten", "Forgotten").await;
    let sid = survey.survey_id.clone();
    let (reference, identifier, events) = human_session("lost", 13);
    let total = events.len() as u64;
    let (early, late) = events.split_at(events.len() / 2);
    post_in_batches(&second, &survey.tracking_key, &identifier, early).await;
    let early_count = early.len() as u64;
    first
        .lookup_until_counts(
            &key,
            &sid,
            &[(reference.clone(), early_count)],
            Duration::from_secs(10),
        )
        .await;
    // A run while the second instance answers: it flushes, and the early half is scored whole.
    let done = run_to_end(&first, &key, &sid, None).await;
    assert_eq!(
        (&done["scored"], &done["deferred"]),
        (&json!(1), &json!(0)),
        "{done}"
    );
    assert_eq!(scored_event_count(&first, &reference), Some(early_count));

    // The late half is acknowledged and counted, then the instance dies with it in its log.
    post_in_batches(&second, &survey.tracking_key, &identifier, late).await;
    first
        .lookup_until_counts(
            &key,
            &sid,
            &[(reference.clone(), total)],
            Duration::from_secs(10),
        )
        .await;
    let second_id = std::fs::read_to_string(second.data_dir().join("instance-id")).expect("id");
    let second_id = second_id.trim().to_owned();
    second.kill_hard();
    tokio::time::sleep(Duration::from_secs(4)).await;

    // Silent past its lease, it is asked nothing; but it stopped without leaving, and its log
    // replays when it starts again: the session waits for it, named.
    let done = run_to_end(&first, &key, &sid, None).await;
    assert_eq!(
        (&done["status"], &done["scored"], &done["deferred"]),
        (&json!("completed"), &json!(0), &json!(1)),
        "{done}"
    );
    let reason = done["deferredReason"].as_str().expect("a reason");
    assert!(reason.contains(&second_id), "{reason}");

    // A running instance cannot be forgotten; the dead one can, once.
    let first_id = std::fs::read_to_string(first.data_dir().join("instance-id")).expect("id");
    let refused = first.cli(&[
        "forget-instance",
        first_id.trim(),
        "--instance-lease-secs",
        "3",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("within its lease"), "{stderr}");
    let forget = [
        "forget-instance",
        &second_id,
        "--instance-lease-secs",
        "3",
        "--json",
    ];
    let forgotten = first.cli_json(&forget);
    assert_eq!(forgotten["alreadyLeft"], json!(false), "{forgotten}");
    assert_eq!(first.cli_json(&forget)["alreadyLeft"], json!(true));

    // Nobody can deliver the late half now: the session is scored on what the lake holds, and
    // the run after that does not plan it again for events that never come.
    let done = run_to_end(&first, &key, &sid, None).await;
    assert_eq!(
        (&done["status"], &done["scored"], &done["deferred"]),
        (&json!("completed"), &json!(1), &json!(0)),
        "{done}"
    );
    assert_eq!(scored_event_count(&first, &reference), Some(early_count));
    let done = run_to_end(&first, &key, &sid, None).await;
    assert_eq!(
        (&done["scored"], &done["skipped"], &done["deferred"]),
        (&json!(0), &json!(1), &json!(0)),
        "{done}"
    );
}

/// A desk link and a review link made with `key` on `maker` for the session `reference` (paths
/// from the service's root, to be opened on any instance).
async fn links_of(maker: &TestServer, key: &str, survey_id: &str, reference: &str) -> [String; 2] {
    let base = format!("/integrations/v1/surveys/{survey_id}");
    let post = |path: String| {
        let request = maker.client().post(maker.url(&path)).bearer_auth(key);
        crate::harness::send(request)
    };
    let desk = post(format!("{base}/desk-links")).await;
    assert_eq!(desk.status, 201, "{}", desk.text);
    let review = post(format!(
        "{base}/sessions/by-reference/{reference}/evidence-links"
    ))
    .await;
    assert_eq!(review.status, 201, "{}", review.text);
    [desk, review].map(|reply| {
        let url = reply.json()["data"]["url"]
            .as_str()
            .expect("url")
            .to_owned();
        url.strip_prefix(maker.base_url())
            .expect("a link of the maker's address")
            .to_owned()
    })
}

/// Waits (at most a second) until every one of `paths` answers 404 on every instance.
async fn links_die_within_a_second(instances: &[&TestServer], paths: &[String], why: &str) {
    let started = Instant::now();
    for path in paths {
        for instance in instances {
            loop {
                let status = instance.get(path).await.status;
                if status == 404 {
                    break;
                }
                assert_eq!(status, 200, "{path} on {}", instance.base_url());
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "{path} still opens {:?} after {why}",
                    started.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test]
async fn links_open_on_every_instance_and_die_with_their_key_and_organization() {
    let args = ["--api-rate-per-minute", NO_API_LIMIT];
    let first = TestServer::start_scale_out(&args).await;
    let second = TestServer::start_sharing(&first, &args).await;
    // An organization of the test's own, so that deleting it leaves the bootstrap key alone.
    let org = first.create_org("Links");
    let owner = first.create_key(&org, "owner", None);
    let survey = first.provision_ok(&owner.key, "links", "Links").await;
    let sid = survey.survey_id.clone();
    let reference = new_uuid();
    let events = send_session(&first, &survey, &reference, None, 2, 20).await;
    first
        .lookup_until_counts(
            &owner.key,
            &sid,
            &[(reference.clone(), events)],
            Duration::from_secs(10),
        )
        .await;

    // Made on the first instance, the links open on the second: one secret for the fleet.
    let revoked = first.create_key(&org, "revoked", Some("sessions:read"));
    let paths = links_of(&first, &revoked.key, &sid, &reference).await;
    for path in &paths {
        for instance in [&first, &second] {
            let reply = instance.get(path).await;
            assert_eq!(
                reply.status,
                200,
                "{path} on {}: {}",
                instance.base_url(),
                reply.text
            );
        }
    }
    // The key is revoked (on the command line, as an operator would): both links die at once.
    first.cli_ok(&["key", "revoke", &revoked.prefix]);
    links_die_within_a_second(&[&first, &second], &paths, "the key's revocation").await;

    // The organization is deleted: the links of its other keys die at once too.
    let reader = first.create_key(&org, "reader", Some("sessions:read"));
    let paths = links_of(&second, &reader.key, &sid, &reference).await;
    for path in &paths {
        assert_eq!(first.get(path).await.status, 200, "{path}");
    }
    first.cli_ok(&["org", "delete", &org]);
    links_die_within_a_second(&[&first, &second], &paths, "the organization's deletion").await;
}

#[tokio::test]
async fn an_erasure_blocked_by_an_instance_that_cannot_purge_says_which_and_why() {
    if !cfg!(feature = "failpoints") {
        eprintln!("skipped: needs the failpoints feature (.ci/run builds with it)");
        return;
    }
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--instance-lease-secs",
        "3",
    ];
    let first = TestServer::start_scale_out(&args).await;
    // The second instance's every purge fails, as a log whose consumers cannot catch up does.
    let second = TestServer::start_sharing_with_env(
        &first,
        &args,
        &[("FAILPOINTS", "telltale-purge=return")],
    )
    .await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "blocked", "Blocked").await;
    let sid = survey.survey_id.clone();
    let x = new_uuid();
    let events = send_session(&second, &survey, &x, None, 2, 20).await;
    first
        .lookup_until_counts(&key, &sid, &[(x.clone(), events)], Duration::from_secs(10))
        .await;
    let second_id = std::fs::read_to_string(second.data_dir().join("instance-id")).expect("id");
    let second_id = second_id.trim();

    let requested = Instant::now();
    let reply = request_deletion(&first, &key, &sid, &x).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    // Within one lease (3 s) the deletion names the instance and its purge's error, and it
    // stays pending: a live instance that cannot purge is waited for, never fenced.
    let waiting = loop {
        let deletion = crate::deletion::get_deletion(&first, &key, &sid, &x)
            .await
            .json()["data"]
            .clone();
        if deletion["waitingOn"] == json!(format!("instance {second_id}"))
            && deletion["waitReason"]
                .as_str()
                .is_some_and(|reason| reason.contains("cannot purge its log"))
        {
            break deletion;
        }
        assert_eq!(deletion["status"], "pending", "{deletion}");
        assert!(
            requested.elapsed() < Duration::from_secs(3),
            "the deletion does not say why it waits: {deletion}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (&waiting["status"], &waiting["attempts"]),
        (&json!("pending"), &json!(0)),
        "{waiting}"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = crate::deletion::get_deletion(&first, &key, &sid, &x)
        .await
        .json()["data"]
        .clone();
    assert_eq!(still["status"], "pending", "past the lease: {still}");
    // Whichever instance works it counts it among the deletions waiting on an instance.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut waiting = 0.0;
        for instance in [&first, &second] {
            waiting += series_sum(
                &scrape(instance).await,
                "telltale_deletions_waiting",
                &[("on", "instance")],
            );
        }
        if waiting >= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no instance counts the waiting deletion"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
