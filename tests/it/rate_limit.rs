//! 120 integration requests per key per minute, then 429 with `Retry-After`; the collector's
//! per-survey request rate and new-session budget.

use crate::harness::{TestServer, assert_error, batch, now_millis, pointermove};

#[tokio::test]
async fn the_121st_request_of_a_key_in_a_minute_gets_429_with_retry_after() {
    // The default limit (no --api-rate-per-minute).
    let server = TestServer::start().await;
    let org = server.default_org().await; // request 1 of the bootstrap key
    let limited = server.create_key(&org, "limited", None);
    let bystander = server.create_key(&org, "bystander", None);

    // Refused requests (unknown keys) do not count towards anyone's limit.
    for _ in 0..5 {
        assert_error(
            &server
                .context(&format!("{}_{}", limited.prefix, "0".repeat(64)))
                .await,
            401,
        );
    }

    for request in 1..=120 {
        let reply = server.context(&limited.key).await;
        assert_eq!(
            reply.status, 200,
            "request {request} of 120 was refused: {}",
            reply.text
        );
    }
    let refused = server.context(&limited.key).await;
    assert_error(&refused, 429);
    let retry_after = refused
        .header("retry-after")
        .expect("429 carries Retry-After");
    let seconds: u64 = retry_after
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After {retry_after:?} is not whole seconds"));
    assert!(
        (1..=60).contains(&seconds),
        "Retry-After {seconds} is outside 1..=60"
    );

    // The limit applies to every integration endpoint of that key.
    let provision = server
        .provision(&limited.key, "limited", r#"{"name":"x"}"#)
        .await;
    assert_error(&provision, 429);
    assert!(provision.header("retry-after").is_some());

    // Other keys, including another key of the same organization, are unaffected.
    let reply = server.context(&bystander.key).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = server.context(server.key()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);

    // The collector and the status endpoints are not integration endpoints.
    assert_eq!(server.get("/status/health").await.status, 200);
}

#[tokio::test]
async fn a_survey_gets_a_request_rate_and_a_budget_of_new_sessions() {
    let server = TestServer::start_with(&[
        "--collector-new-sessions-per-minute",
        "5",
        "--collector-survey-rate",
        "5",
    ])
    .await;
    let key = server.key().to_owned();
    let busy = server.provision_ok(&key, "busy", "Busy").await;
    let other = server.provision_ok(&key, "other", "Other").await;
    let body = batch(&[pointermove(now_millis(), 1, 2)]);

    // Five new sessions are admitted, the sixth waits about 12 s (one every 60 / 5 s).
    for i in 0..5 {
        server
            .collect_ok(&busy.tracking_key, &format!("s{i}"), &body, 1)
            .await;
    }
    let refused = server
        .collect(
            &busy.tracking_key,
            "s5",
            Some("application/json"),
            body.clone(),
        )
        .await;
    assert_error(&refused, 429);
    let wait: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After in whole seconds");
    assert!((1..=12).contains(&wait), "Retry-After {wait}");
    // Sessions already known go on; another survey has its own budget.
    server.collect_ok(&busy.tracking_key, "s0", &body, 1).await;
    server.collect_ok(&other.tracking_key, "s5", &body, 1).await;

    // The survey's request rate (5 a second, bursts of 10) holds across its sessions, known or
    // not, and leaves the other survey alone.
    let mut refused = 0;
    for i in 0..60 {
        let reply = server
            .collect(
                &busy.tracking_key,
                &format!("s{}", i % 5),
                Some("application/json"),
                body.clone(),
            )
            .await;
        match reply.status {
            201 => {}
            429 => {
                assert!(reply.header("retry-after").is_some());
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", reply.text),
        }
    }
    assert!(refused >= 10, "only {refused} of 60 requests were refused");
    server.collect_ok(&other.tracking_key, "s6", &body, 1).await;
}

#[tokio::test]
async fn guessed_keys_and_signed_link_floods_are_refused_before_the_catalog_is_asked() {
    let server =
        TestServer::start_with(&["--failed-auth-per-minute", "5", "--signed-link-rate", "5"]).await;
    let key = server.key().to_owned();
    // Well-formed guesses: each is looked up and refused (401) until the address has failed
    // five times in the minute; then 429 before any lookup, the real key's too.
    let prefix = key.split('_').nth(1).expect("a prefix");
    let guess = format!("tt_{prefix}_{}", "0".repeat(64));
    for _ in 0..5 {
        let reply = server.context(&guess).await;
        assert_error(&reply, 401);
    }
    let refused = server.context(&guess).await;
    assert_error(&refused, 429);
    let wait: u64 = refused
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=60).contains(&wait), "{wait}");
    assert_error(&server.context(&key).await, 429);
    // A malformed key is refused without a lookup and counts nothing.
    assert_error(&server.context("tt_nope").await, 401);

    // Signed links: a flood of forged ones from one address gets 429 past the rate, with no
    // key lookup behind either answer.
    let survey = "0123456789abcdef01234567";
    let mut statuses = Vec::new();
    for _ in 0..40 {
        let path = format!("/desk/{survey}?key=0a1b2c3d4e&expires=1&sig=00");
        statuses.push(server.get(&path).await.status);
    }
    assert_eq!(statuses[0], 404, "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(
        statuses.iter().all(|status| [404, 429].contains(status)),
        "{statuses:?}"
    );
}
