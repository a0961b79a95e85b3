//! 120 integration requests per key per minute, then 429 with `Retry-After`.

use crate::harness::{TestServer, assert_error};

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
