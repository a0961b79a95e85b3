//! Surveys for the benchmarks: generated sessions posted through the collector as the embed
//! sends them, and scoring runs started and polled to their end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use scorer::synthetic::{Behaviour, Rng, session};
use serde_json::Value;

use super::Server;

/// Events per collector request (the collector takes up to 1000).
pub(crate) const EVENTS_PER_REQUEST: usize = 250;

/// One generated session: its identifier (also its reference) and its events' JSON.
pub(crate) fn generated_session(index: u64, small: bool) -> (String, Vec<String>) {
    let mut rng = Rng::new(index);
    let reference = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        rng.next_u64() as u32,
        rng.next_u64() as u16,
        rng.next_u64() & 0xfff,
        rng.next_u64() & 0xfff,
        rng.next_u64() & 0xffff_ffff_ffff
    );
    let behaviour = match index % 10 {
        0 => Behaviour::NaiveBot,
        1 => Behaviour::StealthBot,
        _ => Behaviour::Human,
    };
    let t0 = 1_763_800_000_000 + (index as i64 % 100_000) * 1000;
    let mut events = session(behaviour, &reference, &reference, t0, 1, index);
    if small {
        events.truncate(5);
    }
    (reference, events)
}

/// Posts `events` as one collector batch to `url`; returns how many times the collector asked
/// to back off. 503 is its back-pressure while the flusher catches up: wait and send the same
/// batch again, as the embed does.
pub(crate) async fn send_batch(
    client: &reqwest::Client,
    url: &str,
    events: &[String],
) -> anyhow::Result<u64> {
    let body = format!(r#"{{"events":[{}]}}"#, events.join(","));
    let mut waits = 0;
    loop {
        let reply = client
            .post(url)
            .header("content-type", "text/plain")
            .body(body.clone())
            .send()
            .await?;
        match reply.status().as_u16() {
            201 => return Ok(waits),
            503 => {
                waits += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            status => bail!("collector answered {status}"),
        }
    }
}

/// Posts generated sessions `first..` until `enough(sessions, events)`; returns (sessions,
/// events, references).
pub(crate) async fn load_survey(
    client: &reqwest::Client,
    server: &Server,
    tracking_key: &str,
    connections: usize,
    first: u64,
    small: bool,
    enough: impl Fn(u64, u64) -> bool + Send + Sync + 'static,
) -> anyhow::Result<(u64, u64, Vec<String>)> {
    let next = Arc::new(AtomicU64::new(first));
    let events_sent = Arc::new(AtomicU64::new(0));
    let sessions_sent = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let backpressure = Arc::new(AtomicU64::new(0));
    let enough = Arc::new(enough);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (client, next, events_sent, sessions_sent, done, enough, backpressure) = (
            client.clone(),
            next.clone(),
            events_sent.clone(),
            sessions_sent.clone(),
            done.clone(),
            enough.clone(),
            backpressure.clone(),
        );
        let base = format!("{}/event/{tracking_key}", server.base);
        tasks.push(tokio::spawn(async move {
            let mut references = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let (reference, events) = generated_session(index, small);
                let url = format!("{base}/{reference}");
                for chunk in events.chunks(EVENTS_PER_REQUEST) {
                    let waits = send_batch(&client, &url, chunk).await?;
                    backpressure.fetch_add(waits, Ordering::Relaxed);
                }
                references.push(reference);
                let events = events_sent.fetch_add(events.len() as u64, Ordering::Relaxed)
                    + events.len() as u64;
                let sessions = sessions_sent.fetch_add(1, Ordering::Relaxed) + 1;
                if enough(sessions, events) {
                    done.store(true, Ordering::Relaxed);
                }
            }
            Ok::<_, anyhow::Error>(references)
        }));
    }
    let mut references = Vec::new();
    for task in tasks {
        references.extend(task.await??);
    }
    let waits = backpressure.load(Ordering::Relaxed);
    if waits > 0 {
        println!("  (the collector asked to back off {waits} times while the flusher caught up)");
    }
    Ok((
        sessions_sent.load(Ordering::Relaxed),
        events_sent.load(Ordering::Relaxed),
        references,
    ))
}

/// Starts a run and polls it to its end; returns the run and the wall time.
pub(crate) async fn score(
    client: &reqwest::Client,
    server: &Server,
    survey: &str,
) -> anyhow::Result<(Value, Duration)> {
    let started = Instant::now();
    let url = format!(
        "{}/integrations/v1/surveys/{survey}/scoring-runs",
        server.base
    );
    let run: Value = client
        .post(&url)
        .bearer_auth(&server.key)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = run["data"]["id"].as_str().context("run id")?.to_owned();
    loop {
        let run: Value = client
            .get(format!("{url}/{id}"))
            .bearer_auth(&server.key)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        if run["data"]["status"] != "running" {
            return Ok((run["data"].clone(), started.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
