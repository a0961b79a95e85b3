//! CPU per collector batch, stage by stage: `cargo bench -p ingest --bench batch_stages`.
//!
//! The same 20-event `pointermove` bodies as `benches/collector_load.rs`, through each piece of
//! work a batch costs the server apart from HTTP and the log's fsync: validation on the request
//! path, the statistics pass, and the flusher's decoding, column building and Parquet encoding.
//! Reports microseconds per batch for each stage (median of `BENCH_ROUNDS`, default 7, rounds of
//! 4000 batches: about 8 MiB of bodies, a quarter of a default flush).

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use ingest::batch;
use ingest::event_row;
use ingest::events_batch::EventsBatchBuilder;
use lake::TableKind;
use lake::tables::encode;

const EVENTS_PER_BATCH: usize = 20;
const BATCHES: usize = 4000;

fn bodies() -> Vec<Vec<u8>> {
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let (mut x, mut y, mut t) = (500_i64, 400_i64, 1_763_000_000_000_i64);
    (0..BATCHES)
        .map(|_| {
            let mut body = String::from("{\"events\":[");
            for index in 0..EVENTS_PER_BATCH {
                x = (x + (next() % 13) as i64 - 6).clamp(0, 1920);
                y = (y + (next() % 13) as i64 - 6).clamp(0, 1080);
                t += 16 + (next() % 7) as i64 - 3;
                if index > 0 {
                    body.push(',');
                }
                let _ = write!(
                    body,
                    "{{\"type\":\"pointermove\",\"timestamp\":{t},\"data\":{{\"x\":{x},\"y\":{y},\"pointerType\":\"mouse\",\"trusted\":true}}}}"
                );
            }
            body.push_str("]}");
            body.into_bytes()
        })
        .collect()
}

/// Median microseconds per batch of `stage` over the rounds.
fn measure(rounds: usize, mut stage: impl FnMut()) -> f64 {
    let mut per_batch: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            stage();
            start.elapsed().as_secs_f64() * 1e6 / BATCHES as f64
        })
        .collect();
    per_batch.sort_by(f64::total_cmp);
    per_batch[rounds / 2]
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(7);
    let bodies = bodies();
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    println!(
        "{BATCHES} batches of {EVENTS_PER_BATCH} pointermove events, {} bytes each on average; \
         microseconds per batch, median of {rounds} rounds:",
        bytes / BATCHES
    );

    let validate = measure(rounds, || {
        for body in &bodies {
            black_box(batch::count_batch_events(body).expect("valid"));
        }
    });
    // What the statistics consumer does with a batch: read its times, fold count, first and last.
    let stats = measure(rounds, || {
        for body in &bodies {
            let events = event_row::stats_events(body).expect("valid");
            let (first, last) = events
                .iter()
                .fold((i64::MAX, i64::MIN), |(first, last), event| {
                    let time = event_row::plausible_time(event.event_time, 1_763_000_000_000);
                    (first.min(time), last.max(time))
                });
            black_box((events.len(), first, last));
        }
    });
    let decode = measure(rounds, || {
        for body in &bodies {
            black_box(event_row::decode_batch(body).expect("valid"));
        }
    });
    let mut builder = EventsBatchBuilder::new();
    let append_all = |builder: &mut EventsBatchBuilder| {
        for (index, body) in bodies.iter().enumerate() {
            builder.append_batch(
                "00112233445566778899aabb",
                &format!("session-{}", index / 50),
                None,
                1_763_000_000_000,
                &event_row::decode_batch(body).expect("valid"),
            );
        }
    };
    let build = measure(rounds, || {
        append_all(&mut builder);
        black_box(builder.finish().expect("batch"));
    }) - decode;
    append_all(&mut builder);
    let record_batch = builder.finish().expect("batch");
    let mut file_bytes = 0;
    let encode = measure(rounds, || {
        let encoded = encode(TableKind::Events, &record_batch).expect("encode");
        file_bytes = encoded.len();
        black_box(encoded);
    });

    let total = validate + stats + decode + build + encode;
    for (stage, micros) in [
        ("validate (request path)", validate),
        ("statistics pass", stats),
        ("flusher: decode events", decode),
        ("flusher: Arrow builders", build),
        ("flusher: Parquet encode", encode),
        ("total", total),
    ] {
        println!("  {stage:<26} {micros:>7.2} us");
    }
    println!(
        "  Parquet: {:.2} bytes/event",
        file_bytes as f64 / (BATCHES * EVENTS_PER_BATCH) as f64
    );
}
