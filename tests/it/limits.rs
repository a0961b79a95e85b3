//! The server's own bounds under abuse: clients sending headers a byte at a time are cut off at
//! the header deadline, connections past the cap get 503 with `Retry-After` at once, health
//! answers throughout, and the server's memory stays small.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{TestServer, batch, now_millis, pointermove};

fn address(server: &TestServer) -> String {
    server.base_url().trim_start_matches("http://").to_owned()
}

/// Sends a request head one header line every 200 ms, never finishing it; returns how long the
/// server let the connection live.
async fn slow_headers(address: String) -> Duration {
    let started = Instant::now();
    let Ok(mut stream) = TcpStream::connect(address).await else {
        return Duration::ZERO;
    };
    if stream
        .write_all(b"POST /event/0123456789abcdef01234567/x HTTP/1.1\r\nHost: t\r\n")
        .await
        .is_err()
    {
        return started.elapsed();
    }
    let mut buffer = [0u8; 256];
    for i in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if stream
            .write_all(format!("X-Slow-{i}: a\r\n").as_bytes())
            .await
            .is_err()
        {
            break;
        }
        // The server closing shows as end of stream (or a reset) on a read that does not wait.
        let read = tokio::time::timeout(Duration::from_millis(1), stream.read(&mut buffer)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            break;
        }
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_connection_floods_stay_bounded() {
    // A 3 s header deadline: long enough that the flood's 200 idle connections below are all
    // still open (holding the cap) when the extra ones arrive, on a machine busy with the rest of
    // the suite (with 1 s, the first of them were cut off first and freed slots).
    let server =
        TestServer::start_with(&["--header-timeout-secs", "3", "--max-connections", "200"]).await;

    // Slowloris: 150 connections sending headers slowly are all cut off near the deadline.
    let slow: Vec<_> = (0..150)
        .map(|_| tokio::spawn(slow_headers(address(&server))))
        .collect();
    let mut peak = server.rss_mib();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let health = server.get("/status/health").await;
        assert_eq!(health.status, 200, "health answers during the slow clients");
        peak = peak.max(server.rss_mib());
    }
    for task in slow {
        let lived = task.await.expect("slow client");
        assert!(
            lived < Duration::from_secs(6),
            "a slow-header connection lived {lived:?}"
        );
    }

    // A flood past the cap: the connections over it are answered 503 with Retry-After at once.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(address(&server)).await.expect("connect"));
    }
    let mut refused = 0;
    for _ in 0..20 {
        let mut stream = TcpStream::connect(address(&server)).await.expect("connect");
        let mut answer = vec![0u8; 512];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_secs(1), stream.read(&mut answer)).await
        {
            let text = String::from_utf8_lossy(&answer[..n]).to_lowercase();
            if text.starts_with("http/1.1 503") && text.contains("retry-after: 1") {
                refused += 1;
            }
        }
    }
    assert!(
        refused >= 15,
        "{refused} of 20 connections past the cap got a 503"
    );
    peak = peak.max(server.rss_mib());
    // The idle ones hit the header deadline too, and the server serves again.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let health = server.get("/status/health").await;
    assert_eq!(health.status, 200);
    drop(idle);
    assert!(peak < 300, "server RSS peaked at {peak} MiB");
}

/// Sends a collector request declaring a 1 MiB body and all of it but the last byte, then
/// waits for the answer; returns its status line (None when the connection closed first).
async fn withheld_body(
    address: String,
    path: String,
    body: std::sync::Arc<Vec<u8>>,
) -> Option<String> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len() + 1
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    // A refused request is answered while its body is still going out: read and write at once.
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(&body).await;
        // Hold the connection (and the last byte) until the server gives up on it.
        tokio::time::sleep(Duration::from_secs(20)).await;
        drop(writer);
    });
    let mut answer = vec![0u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(15), reader.read(&mut answer)).await;
    writing.abort();
    match read {
        Ok(Ok(n)) if n > 0 => String::from_utf8_lossy(&answer[..n])
            .lines()
            .next()
            .map(str::to_owned),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_floods_are_refused_past_the_bytes_in_flight_and_cut_off_at_the_body_deadline() {
    // 8 MiB of bodies at once; each client gets 2 s to send its body.
    let server = TestServer::start_with(&[
        "--collector-bytes-in-flight",
        "8388608",
        "--body-timeout-secs",
        "2",
        "--collector-ip-rate",
        "0",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "flood", "Flood").await;
    let body = std::sync::Arc::new(vec![b' '; 1024 * 1024 - 1]);

    // 300 clients each send 1 MiB but its last byte: 300 MiB the server would hold unbounded.
    let clients: Vec<_> = (0..300)
        .map(|i| {
            let path = format!("/event/{}/flood-{i}", survey.tracking_key);
            tokio::spawn(withheld_body(
                address(&server),
                path,
                std::sync::Arc::clone(&body),
            ))
        })
        .collect();
    let mut peak = server.rss_mib();
    let started = Instant::now();
    while clients.iter().any(|client| !client.is_finished())
        && started.elapsed() < Duration::from_secs(20)
    {
        let health = server.get("/status/health").await;
        assert_eq!(health.status, 200, "health answers during the flood");
        peak = peak.max(server.rss_mib());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut unavailable = 0;
    let mut timed_out = 0;
    for client in clients {
        match client.await.expect("client").as_deref() {
            Some("HTTP/1.1 503 Service Unavailable") => unavailable += 1,
            Some("HTTP/1.1 408 Request Timeout") => timed_out += 1,
            other => panic!("a withheld body was answered {other:?}"),
        }
    }
    // At most 8 bodies fit the budget at once; those wait out the deadline, the rest are refused
    // from the head. Their permits return, so a later client may be admitted in turn.
    assert!(
        timed_out >= 1,
        "{timed_out} timed out, {unavailable} refused"
    );
    assert!(
        unavailable >= 250,
        "{timed_out} timed out, {unavailable} refused"
    );
    assert!(peak < 300, "server RSS peaked at {peak} MiB");

    // The service takes batches again.
    let reply = server
        .collect(
            &survey.tracking_key,
            "after-the-flood",
            Some("application/json"),
            batch(&[pointermove(now_millis(), 1, 2)]),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}
