//! Starts that meet trouble half-way (issue 70): a start whose catalog is down takes its address
//! and answers 503 (liveness 200, readiness 503) until the catalog is back; a step that fails
//! after the log was opened releases the log before the start tries again, so the server serves
//! within seconds of the store's return; a start that cannot succeed exits non-zero with its
//! reason instead of answering 503 for good.

use std::time::{Duration, Instant};

use crate::harness::TestServer;
use crate::stores::{PrivatePostgres, ScaleOutStores, start_moto};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_step_that_fails_once_after_the_catalog_returns_does_not_wedge_the_server() {
    if !cfg!(feature = "failpoints") {
        eprintln!("skipped: needs the failpoints feature (.ci/run builds with it)");
        return;
    }
    let postgres = PrivatePostgres::create();
    let moto = start_moto();
    let scratch = TestServer::new_root();
    let stores = ScaleOutStores::create_with(scratch.path(), &postgres.url(), &moto.endpoint).await;
    postgres.stop();
    let mut server = TestServer::start_on_stores(
        scratch,
        stores,
        &[],
        &[("FAILPOINTS", "telltale-start-after-log=1*return")],
    )
    .await;
    // Down: the process is live, not ready, and every other answer a 503 to retry.
    assert_eq!(server.get("/status/live").await.status, 200);
    let ready = server.get("/status/ready").await;
    assert_eq!(ready.status, 503, "{}", ready.text);
    assert!(ready.header("retry-after").is_some());

    postgres.start();
    let back = Instant::now();
    // The first start after the catalog's return fails once after opening the log; the next
    // one must find the log free.
    loop {
        if !server.is_running() {
            panic!(
                "the server exited instead of starting again\n{}",
                server.logs()
            );
        }
        let ready = server.get("/status/ready").await;
        if ready.status == 200 {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "not ready 30 s after the catalog returned: {}\n{}",
            ready.text,
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        server.logs().contains("fail point"),
        "the start step failed once first"
    );
    let served = server.get("/status/").await;
    assert_eq!(served.status, 200, "{}", served.text);
    server.terminate_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_that_cannot_succeed_exits_with_its_reason() {
    // At once: a model file that cannot be read is nothing a wait would mend.
    let root = TestServer::new_root();
    let output = TestServer::cli_on(
        root.path(),
        None,
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--model",
            "/nonexistent/model.json",
        ],
    );
    assert!(!output.status.success(), "{:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/model.json"), "{stderr}");

    // Once the catalog is back: a review secret file that is no secret. The server waited for
    // the catalog answering 503, then ends with the reason instead of answering 503 for good.
    let postgres = PrivatePostgres::create();
    let moto = start_moto();
    let scratch = TestServer::new_root();
    let stores = ScaleOutStores::create_with(scratch.path(), &postgres.url(), &moto.endpoint).await;
    std::fs::create_dir_all(scratch.path().join("data")).expect("data dir");
    std::fs::write(scratch.path().join("data/review-secret"), "short").expect("secret");
    postgres.stop();
    let mut server = TestServer::start_on_stores(scratch, stores, &[], &[]).await;
    assert_eq!(server.get("/status/ready").await.status, 503);
    postgres.start();
    let status = server.wait_exit(Duration::from_secs(30)).await;
    assert!(!status.success(), "{status}");
    assert!(
        server.logs().contains("review secret file"),
        "the reason is logged\n{}",
        server.logs()
    );
}
