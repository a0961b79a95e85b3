//! Two `telltale serve` instances on their own data dirs (and logs) sharing one PostgreSQL
//! catalog and one S3 bucket (moto), as behind a load balancer: what one acknowledges the
//! other looks up, the API limit holds for both together, one run per survey across both, a
//! dead instance's run finished by the other, and a deletion honoured by both. These run on
//! the scale-out stores whatever `TELLTALE_IT_STORES` says.

use std::time::{Duration, Instant};

use scorer::synthetic::Behaviour;
use serde_json::json;

use crate::deletion::{
    get_deletion, lake_rows_mentioning, request_deletion, send_session, wait_deletion_done,
};
use crate::harness::{TestServer, batch, new_uuid, now_millis, pointermove};
use crate::scoring::{
    HAND_SET_MODEL, NO_API_LIMIT, post_session, start_run, wait_finished, wait_scored,
};

#[tokio::test]
async fn two_instances_share_sessions_runs_and_deletions() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
        // Slow runs, so that one can be caught in the middle; a short lease, so the survivor
        // takes it over within seconds.
        "--scoring-chunk-sessions",
        "1",
        "--scoring-pause-ms",
        "400",
        "--scoring-lease-secs",
        "2",
    ];
    let mut first = TestServer::start_scale_out(&args).await;
    let mut second = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "fleet", "Fleet").await;

    // Batches acknowledged by either instance show in lookup on the other within 1 s (plus
    // the polling here).
    let mut expected = Vec::new();
    for seed in 0..6 {
        let instance = if seed % 2 == 0 { &first } else { &second };
        let (reference, count) = post_session(instance, &survey, Behaviour::Human, seed).await;
        expected.push((reference, count as u64));
    }
    let acknowledged = Instant::now();
    for (reader, writer_parity) in [(&second, 0), (&first, 1)] {
        let written: Vec<(String, u64)> = expected
            .iter()
            .enumerate()
            .filter(|(index, _)| index % 2 == writer_parity)
            .map(|(_, pair)| pair.clone())
            .collect();
        let rows = reader
            .lookup_until_counts(&key, &survey.survey_id, &written, Duration::from_secs(5))
            .await;
        for (row, (reference, count)) in rows.iter().zip(&written) {
            assert_eq!(row["externalReference"], json!(reference), "{rows:?}");
            assert_eq!(row["eventCount"], json!(count), "{rows:?}");
        }
    }
    let visible_after = acknowledged.elapsed();
    assert!(
        visible_after < Duration::from_secs(3),
        "cross-instance visibility took {visible_after:?}"
    );

    // Concurrent starts on both instances: one active run.
    let starts = (0..8).map(|index| {
        let instance = if index % 2 == 0 { &first } else { &second };
        start_run(instance, &key, &survey.survey_id, None)
    });
    let replies = futures::future::join_all(starts).await;
    let ids: Vec<String> = replies
        .iter()
        .map(|reply| {
            assert_eq!(reply.status, 202, "{}", reply.text);
            reply.json()["data"]["id"].as_str().expect("id").to_owned()
        })
        .collect();
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
    let run_id = ids[0].clone();
    let active = first.catalog_sql(&format!(
        "SELECT count(*) FROM scoring_runs WHERE survey_id = '{}' AND status = 'running'",
        survey.survey_id
    ));
    assert_eq!(active.trim(), "1");

    // The instance working the run dies mid-run; the other finishes it.
    let running = wait_scored(&first, &key, &survey.survey_id, &run_id, 1).await;
    assert_eq!(running["status"], "running", "{running}");
    let owner = first.catalog_sql(&format!(
        "SELECT owner FROM scoring_runs WHERE id = '{run_id}'"
    ));
    let first_id = std::fs::read_to_string(first.data_dir().join("instance-id")).expect("id");
    let second_id = std::fs::read_to_string(second.data_dir().join("instance-id")).expect("id");
    let (dead, survivor) = if owner.trim() == first_id.trim() {
        (&mut first, &mut second)
    } else {
        assert_eq!(
            owner.trim(),
            second_id.trim(),
            "the run's owner is an instance"
        );
        (&mut second, &mut first)
    };
    dead.kill_hard();
    let done = wait_finished(survivor, &key, &survey.survey_id, &run_id).await;
    assert_eq!(
        (
            &done["status"],
            &done["total"],
            &done["scored"],
            &done["failed"]
        ),
        (&json!("completed"), &json!(6), &json!(6), &json!(0)),
        "{done}"
    );
    let references: Vec<String> = expected.iter().map(|(r, _)| r.clone()).collect();
    let rows = survivor
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    assert!(
        rows.iter().all(|row| row["scoreBand"] == "human-like"),
        "{rows:?}"
    );
    dead.restart().await;

    // A deletion requested on one instance completes, and both refuse the session's late
    // events.
    let deleted = references[0].clone();
    let reply = request_deletion(&first, &key, &survey.survey_id, &deleted).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let deletion = wait_deletion_done(&second, &key, &survey.survey_id, &deleted).await;
    assert_eq!(deletion["status"], "completed", "{deletion}");
    for instance in [&first, &second] {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let reply = instance
                .collect(
                    &survey.tracking_key,
                    &deleted,
                    Some("application/json"),
                    batch(&[pointermove(now_millis(), 1, 1)]),
                )
                .await;
            if reply.status == 202 {
                assert_eq!(
                    reply.json(),
                    json!({ "success": true, "count": 1, "deleted": true })
                );
                break;
            }
            assert_eq!(reply.status, 201, "{}", reply.text);
            assert!(
                Instant::now() < deadline,
                "{} still stores the deleted session's events",
                instance.base_url()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let rows = second
        .lookup_rows(&key, &survey.survey_id, std::slice::from_ref(&deleted))
        .await;
    assert_eq!(
        (
            &rows[0]["captured"],
            &rows[0]["eventCount"],
            &rows[0]["humanScorePercent"]
        ),
        (&json!(false), &json!(0), &serde_json::Value::Null),
        "nothing of the deleted session is left to look up: {rows:?}"
    );
}

#[tokio::test]
async fn the_api_limit_holds_for_the_fleet_together() {
    let first = TestServer::start_scale_out(&[]).await;
    let second = TestServer::start_sharing(&first, &[]).await;
    let key = first.key().to_owned();
    // 130 requests with one key, spread over both instances, all within the minute.
    let requests = (0..130).map(|index| {
        let instance = if index % 2 == 0 { &first } else { &second };
        instance.context(&key)
    });
    let replies = futures::future::join_all(requests).await;
    let accepted = replies.iter().filter(|reply| reply.status == 200).count();
    let limited: Vec<_> = replies.iter().filter(|reply| reply.status == 429).collect();
    assert_eq!(
        accepted, 120,
        "at most 120 per key per minute over both instances"
    );
    assert_eq!(limited.len(), 10);
    for reply in limited {
        let retry_after: u64 = reply
            .header("retry-after")
            .expect("Retry-After")
            .parse()
            .expect("whole seconds");
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        assert!(reply.json()["error"].is_string());
    }
}

/// The catalog tables holding `needle` (any letter case) in any column of any row.
fn catalog_tables_holding(server: &TestServer, needle: &str) -> Vec<String> {
    let tables = server.catalog_sql(&format!(
        "SELECT table_name FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
           AND lower(query_to_xml(format('SELECT * FROM %I', table_name), true, false, '')::text)
               LIKE '%{}%'
         ORDER BY table_name",
        needle.to_lowercase()
    ));
    tables.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn a_fleet_deletion_completes_once_every_live_instance_has_purged_its_log() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--instance-lease-secs",
        "3",
    ];
    let first = TestServer::start_scale_out(&args).await;
    let second = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "erase", "Erase").await;
    let sid = survey.survey_id.clone();

    // Session x on both instances (a second tab of it on the second); session y on the second
    // only; a session that stays.
    let (x, x_tab, y, kept) = (
        new_uuid(),
        format!("tab-{}", &new_uuid()[..8]),
        new_uuid(),
        new_uuid(),
    );
    let x_events = send_session(&first, &survey, &x, None, 2, 20).await
        + send_session(&second, &survey, &x, None, 2, 20).await
        + send_session(&second, &survey, &x_tab, Some(&x), 2, 20).await;
    let y_events = send_session(&second, &survey, &y, None, 2, 20).await;
    let kept_events = send_session(&first, &survey, &kept, None, 2, 20).await;
    first
        .lookup_until_counts(
            &key,
            &sid,
            &[
                (x.clone(), x_events),
                (y.clone(), y_events),
                (kept.clone(), kept_events),
            ],
            Duration::from_secs(10),
        )
        .await;
    for needle in [&x, &x_tab, &y] {
        assert!(
            second.log_occurrences(needle) > 0,
            "the second instance's log holds {needle} before the deletion"
        );
    }

    // Deleted through the first instance: when it reports completed, no instance's log, no
    // lake file and no catalog row holds the session (the reference stays in the tombstone
    // and the deletion record only).
    let reply = request_deletion(&first, &key, &sid, &x).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = wait_deletion_done(&first, &key, &sid, &x).await;
    assert_eq!(done["status"], "completed", "{done}");
    for instance in [&first, &second] {
        for needle in [&x, &x_tab] {
            assert_eq!(
                instance.log_occurrences(needle),
                0,
                "{needle} is still in the log of {}",
                instance.base_url()
            );
        }
    }
    let mentions = lake_rows_mentioning(&first, &[&x, &x_tab]);
    assert!(mentions.is_empty(), "{mentions:?}");
    assert_eq!(
        catalog_tables_holding(&first, &x),
        ["session_deletions", "tombstones"]
    );
    assert!(catalog_tables_holding(&first, &x_tab).is_empty());
    // The scan finds what is there: the kept session's row (and perhaps a file's session range).
    assert!(
        catalog_tables_holding(&first, &kept).contains(&"sessions".to_owned()),
        "{:?}",
        catalog_tables_holding(&first, &kept)
    );

    // The second instance hangs: a deletion waits for it while its lease runs (3 s since it
    // last reported), then completes without it; back, it purges its log on its own.
    second.pause();
    let paused = Instant::now();
    let reply = request_deletion(&first, &key, &sid, &y).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let waiting = get_deletion(&first, &key, &sid, &y).await.json()["data"].clone();
    assert_eq!(waiting["status"], "pending", "{waiting}");
    let done = wait_deletion_done(&first, &key, &sid, &y).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        paused.elapsed() >= Duration::from_secs(2),
        "completed {:?} after the pause, within the lease",
        paused.elapsed()
    );
    second.resume();
    let deadline = Instant::now() + Duration::from_secs(10);
    while second.log_occurrences(&y) > 0 {
        assert!(
            Instant::now() < deadline,
            "the second instance did not purge its log after it resumed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mentions = lake_rows_mentioning(&first, &[&y]);
    assert!(mentions.is_empty(), "{mentions:?}");
    assert_eq!(second.get("/status/health").await.status, 200);
}

/// Three instances flush into the same Delta tables on S3 (moto) at once, every 100 ms, while
/// the background compaction of each rewrites what the others wrote: commits race on the
/// bucket's conditional PUTs, and the events table ends with every acknowledged event exactly
/// once, each instance's log position recorded as its own application transaction.
#[tokio::test]
async fn three_instances_commit_to_one_lake_concurrently() {
    let args = [
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--flush-interval-ms",
        "100",
        "--compaction-interval-secs",
        "1",
        "--compaction-target-rows",
        "400",
    ];
    let first = TestServer::start_scale_out(&args).await;
    let second = TestServer::start_sharing(&first, &args).await;
    let third = TestServer::start_sharing(&first, &args).await;
    let key = first.key().to_owned();
    let survey = first.provision_ok(&key, "delta-fleet", "Delta fleet").await;
    let instances = [&first, &second, &third];

    // Each instance gets its own sessions, 40 batches of 10 events each over two seconds, all
    // three at once: several flushes each, racing for the next log version.
    let started = now_millis();
    let sends = instances.iter().enumerate().map(|(index, server)| {
        let tracking = survey.tracking_key.clone();
        async move {
            let mut sent = Vec::new();
            for round in 0..40 {
                let identifier = format!("fleet-{index}-{}", round % 5);
                let events: Vec<String> = (0..10)
                    .map(|i| pointermove(started + i64::from(round * 10 + i), i, round))
                    .collect();
                server
                    .collect_ok(&tracking, &identifier, &batch(&events), 10)
                    .await;
                sent.push(identifier);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            sent
        }
    });
    let sent: Vec<Vec<String>> = futures::future::join_all(sends).await;
    let mut expected = std::collections::BTreeMap::new();
    for identifier in sent.into_iter().flatten() {
        *expected.entry(identifier).or_insert(0u64) += 10;
    }

    // Stopped one by one: each flushes what it holds. Compactions may still be racing.
    let mut servers = [first, second, third];
    for server in servers.iter_mut().rev() {
        server.terminate_ok().await;
    }
    let reader = &servers[0];
    let lake = reader.lake_dir();
    let live: Vec<String> = crate::harness::live_files_at(&lake, "events")
        .into_iter()
        .map(|(path, _)| format!("'{}/{path}'", lake.display()))
        .collect();
    let rows = crate::harness::duckdb_query(&format!(
        "SELECT CAST(session_id AS VARCHAR) AS session, count(*) AS n
         FROM read_parquet([{}]) GROUP BY 1 ORDER BY 1",
        live.join(", ")
    ));
    let found: std::collections::BTreeMap<String, u64> = rows
        .iter()
        .map(|row| {
            (
                row["session"].as_str().expect("session").to_owned(),
                row["n"].as_u64().expect("count"),
            )
        })
        .collect();
    assert_eq!(found, expected, "every acknowledged event exactly once");

    // Each instance's flushes carry its own application transaction, and the commits of the
    // three went into one log: at least two flush commits each (how many more depends on the
    // machine's speed: 13-20 commits in all were seen).
    let mut commits_per_app = std::collections::BTreeMap::<String, usize>::new();
    for entry in std::fs::read_dir(lake.join("events/_delta_log")).expect("the events log") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|ext| ext == "json") {
            let text = std::fs::read_to_string(&path).expect("a commit");
            for line in text.lines() {
                let action: serde_json::Value = serde_json::from_str(line).expect("an action");
                if let Some(app) = action["txn"]["appId"].as_str() {
                    *commits_per_app.entry(app.to_owned()).or_default() += 1;
                }
            }
        }
    }
    assert_eq!(
        commits_per_app.len(),
        3,
        "one application transaction per instance: {commits_per_app:?}"
    );
    assert!(
        commits_per_app.values().all(|commits| *commits >= 2),
        "each instance committed several flushes: {commits_per_app:?}"
    );
}
