//! The review page in real Chromium (tests/browser/review.js): a session recorded through the
//! embed on the demo survey, scored, opened through a signed link. The drawn path replays every
//! recorded move within a pixel, the replay keeps the recorded time, the reasons are the score's,
//! and a tampered, expired, other session's or erased session's link is 404.

use std::process::Command;
use std::time::Duration;

use scorer::evidence::{PATH_TOLERANCE_PX, replay_position};
use serde_json::{Value, json};

use crate::browser::browser_session;
use crate::harness::{Reply, TestServer, assert_error, duckdb_query, new_uuid, send};

fn open_in_browser(url: &str) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    let output = Command::new("node")
        .arg("review.js")
        .current_dir(dir)
        .env("URL", url)
        .output()
        .expect("run node (Node.js is required)");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

async fn create_link(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    reference: &str,
    body: Option<Value>,
) -> Reply {
    let mut request = server
        .client()
        .post(server.url(&format!(
            "/integrations/v1/surveys/{survey_id}/sessions/by-reference/{reference}/evidence-links"
        )))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    send(request).await
}

async fn link(server: &TestServer, key: &str, survey_id: &str, reference: &str) -> String {
    let reply = create_link(server, key, survey_id, reference, None).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["data"]["url"]
        .as_str()
        .expect("url")
        .to_owned()
}

#[tokio::test]
async fn a_recorded_session_is_replayed_through_a_signed_link() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "review", "Review").await;
    let reference = new_uuid();
    let report = browser_session(
        &server,
        &survey.tracking_key,
        &reference,
        "fine",
        "blue",
        "up",
    );
    assert_eq!(report["finished"], true, "{report}");
    let sent = report["sentEvents"].as_u64().expect("sentEvents");
    server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(reference.clone(), sent)],
            Duration::from_secs(15),
        )
        .await;
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");

    let url = link(&server, &key, &survey.survey_id, &reference).await;
    assert!(url.starts_with(server.base_url()), "{url}");
    let page = open_in_browser(&url);
    assert_eq!(page["status"], 200, "{page}");
    let headers = &page["headers"];
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    let policy = headers["content-security-policy"].as_str().expect("CSP");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert_eq!(page["outside"], json!([]), "no third-party request");
    assert_eq!(
        page["violations"],
        json!([]),
        "the page keeps to its policy"
    );
    assert_eq!(page["focused"], "play", "the first Tab reaches the replay");

    // The drawn strokes replay every move the lake holds within a pixel, at its time.
    let moves = duckdb_query(&format!(
        "SELECT epoch_ms(event_time) AS t, x, y FROM read_parquet({}) \
         WHERE type = 'pointermove' AND session_id IN \
           (SELECT session_id FROM read_parquet({}) WHERE reference = '{reference}') \
         ORDER BY t",
        server.events_files(),
        server.events_files()
    ));
    // Presses are drawn apart from the strokes: the moves are what the strokes replay.
    let moves: Vec<(i64, f64, f64)> = moves
        .iter()
        .filter(|row| !row["x"].is_null())
        .map(|row| {
            (
                row["t"].as_i64().expect("t"),
                row["x"].as_f64().expect("x"),
                row["y"].as_f64().expect("y"),
            )
        })
        .collect();
    let strokes: Vec<Vec<[i64; 3]>> = page["strokes"]
        .as_array()
        .expect("strokes")
        .iter()
        .map(|stroke| serde_json::from_value(stroke["points"].clone()).expect("points"))
        .collect();
    assert!(!strokes.is_empty(), "{page}");
    let evidence = send(
        server
            .client()
            .get(server.url(&format!(
                "/integrations/v1/surveys/{}/sessions/by-reference/{reference}/evidence",
                survey.survey_id
            )))
            .bearer_auth(&key),
    )
    .await
    .json();
    let started = evidence["data"]["timeline"]["startedAt"]
        .as_i64()
        .expect("startedAt");
    let mut checked = 0;
    for (t, x, y) in &moves {
        let t = t - started;
        let Some(stroke) = strokes.iter().find(|points| {
            points.first().is_some_and(|p| p[0] <= t) && points.last().is_some_and(|p| p[0] >= t)
        }) else {
            continue; // a lone move between strokes' ends
        };
        let (px, py) = replay_position(stroke, t).expect("position");
        let off = (px - x).hypot(py - y);
        assert!(
            off <= PATH_TOLERANCE_PX + 0.5,
            "the move at {t} ms is drawn {off} px off"
        );
        checked += 1;
    }
    assert!(checked > 20, "{checked} moves checked");

    // Replayed at 1x for 1.5 s of wall time: the replay clock kept the recorded time.
    let replay = &page["replay"];
    let drift =
        replay["wallMs"].as_f64().expect("wall") - replay["replayedMs"].as_f64().expect("replayed");
    assert!(
        drift.abs() <= 50.0,
        "the replay drifted {drift} ms: {replay}"
    );

    // The reasons shown are the score's.
    assert_eq!(
        page["reasons"], evidence["data"]["score"]["reasons"],
        "{page}"
    );
    let band = evidence["data"]["score"]["scoreBand"]
        .as_str()
        .expect("band");
    assert!(page["verdict"].as_str().expect("verdict").starts_with(band));
}

#[tokio::test]
async fn tampered_expired_foreign_and_erased_links_are_404() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "review-links", "Links").await;
    let mut references = Vec::new();
    for seed in 0..2 {
        let (reference, _) = crate::scoring::post_session(
            &server,
            &survey,
            scorer::synthetic::Behaviour::Human,
            seed,
        )
        .await;
        references.push(reference);
    }
    let get = |url: String| {
        let client = server.client().clone();
        async move { send(client.get(url)).await }
    };
    // Links of sessions the catalog and the lake have: wait for the statistics (every 200 ms)
    // and the flush.
    for reference in &references[1..] {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while create_link(&server, &key, &survey.survey_id, reference, None)
            .await
            .status
            != 201
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{reference} never linked"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let url = loop {
        let reply = create_link(&server, &key, &survey.survey_id, &references[0], None).await;
        if reply.status == 404 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        assert_eq!(reply.status, 201, "{}", reply.text);
        let url = reply.json()["data"]["url"]
            .as_str()
            .expect("url")
            .to_owned();
        if get(url.clone()).await.status == 200
            && get(url.replace("?", "/evidence?")).await.status == 200
        {
            break url;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let page = get(url.clone()).await;
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));

    // Tampered: one character of the signature, the expiry, or the reference changed.
    let sig_at = url.find("sig=").expect("sig") + 4;
    let mut tampered = url.clone().into_bytes();
    tampered[sig_at] = if tampered[sig_at] == b'0' { b'1' } else { b'0' };
    let tampered = String::from_utf8(tampered).expect("utf-8");
    for bad in [
        tampered,
        url.replace("expires=", "expires=1"),
        url.replace(&references[0], &references[1]),
        url.replace(&survey.survey_id, "0123456789abcdef01234567"),
        url.split('?').next().expect("path").to_owned(),
    ] {
        assert_error(&get(bad.clone()).await, 404);
        assert_error(&get(bad.replace("?", "/evidence?")).await, 404);
    }

    // Expired: a link of one second, a little later.
    let short = create_link(
        &server,
        &key,
        &survey.survey_id,
        &references[1],
        Some(json!({"expiresInSeconds": 1})),
    )
    .await;
    assert_eq!(short.status, 201, "{}", short.text);
    let short = short.json()["data"]["url"]
        .as_str()
        .expect("url")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_error(&get(short).await, 404);

    // Bad requests for links.
    for body in [
        json!({"expiresInSeconds": 0}),
        json!({"expiresInSeconds": 3601}),
        json!({"x": 1}),
    ] {
        let reply = create_link(&server, &key, &survey.survey_id, &references[1], Some(body)).await;
        assert_error(&reply, 400);
    }
    assert_error(
        &create_link(&server, &key, &survey.survey_id, &new_uuid(), None).await,
        404,
    );

    // Erased: the link of a session whose deletion was requested is 404 at once.
    let deleted = send(
        server
            .client()
            .delete(server.url(&format!(
                "/integrations/v1/surveys/{}/sessions/by-reference/{}",
                survey.survey_id, references[0]
            )))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(deleted.status, 202, "{}", deleted.text);
    assert_error(&get(url.clone()).await, 404);
    assert_error(&get(url.replace("?", "/evidence?")).await, 404);
}
