//! CPU per collector batch, stage by stage: `cargo bench --workspace --bench batch_stages`.
//!
//! The same 20-event `pointermove` bodies as `benches/collector_load.rs`, through each piece of
//! work a batch costs the server apart from HTTP and the log's fsync: validation on the request
//! path, the statistics pass, and the flusher's decoding, column building and Parquet encoding.
//! Criterion times one batch per iteration, cycling through 4000 bodies (about 8 MiB, a quarter
//! of a default flush); the builders finish a record batch every 4000 appends, as a flush of
//! that size does, and `encode` writes those 4000 batches as one Parquet file per iteration.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

use ingest::batch;
use ingest::event_row;
use ingest::events_batch::EventsBatchBuilder;
use lake::TableKind;
use lake::tables::encode;

const EVENTS_PER_BATCH: usize = 20;
const BATCHES: usize = 4000;

fn bodies() -> Vec<Vec<u8>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut next = move || rng.next_u64();
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

fn stages(c: &mut Criterion) {
    let bodies = bodies();
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    println!(
        "batch_stages: {BATCHES} batches of {EVENTS_PER_BATCH} pointermove events, {} bytes each on average",
        bytes / BATCHES
    );
    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(1));
    let mut next = 0;
    let mut body = move || {
        next = (next + 1) % BATCHES;
        next
    };

    group.bench_function("validate", |b| {
        b.iter(|| batch::count_batch_events(black_box(&bodies[body()])).expect("valid"))
    });
    // What the statistics consumer does with a batch: read its times, fold count, first and last.
    group.bench_function("statistics", |b| {
        b.iter(|| {
            let events = event_row::stats_events(black_box(&bodies[body()])).expect("valid");
            let (first, last) = events
                .iter()
                .fold((i64::MAX, i64::MIN), |(first, last), event| {
                    let time = event_row::plausible_time(event.event_time, 1_763_000_000_000);
                    (first.min(time), last.max(time))
                });
            (events.len(), first, last)
        })
    });
    group.bench_function("decode", |b| {
        b.iter(|| event_row::decode_batch(black_box(&bodies[body()])).expect("valid"))
    });
    let decoded: Vec<_> = bodies
        .iter()
        .map(|body| event_row::decode_batch(body).expect("valid"))
        .collect();
    let mut builder = EventsBatchBuilder::new();
    let mut appended = 0;
    group.bench_function("build", |b| {
        b.iter_batched(
            body,
            |index| {
                builder.append_batch(
                    "00112233445566778899aabb",
                    &format!("session-{}", index / 50),
                    None,
                    1_763_000_000_000,
                    &decoded[index],
                );
                appended += 1;
                if appended == BATCHES {
                    appended = 0;
                    Some(builder.finish().expect("batch"))
                } else {
                    None
                }
            },
            BatchSize::SmallInput,
        )
    });

    let mut builder = EventsBatchBuilder::new();
    for (index, events) in decoded.iter().enumerate() {
        builder.append_batch(
            "00112233445566778899aabb",
            &format!("session-{}", index / 50),
            None,
            1_763_000_000_000,
            events,
        );
    }
    let record_batch = builder.finish().expect("batch");
    let file_bytes = encode(TableKind::Events, &record_batch)
        .expect("encode")
        .len();
    println!(
        "batch_stages: Parquet {:.2} bytes/event",
        file_bytes as f64 / (BATCHES * EVENTS_PER_BATCH) as f64
    );
    group.throughput(Throughput::Elements(BATCHES as u64));
    group.sample_size(20);
    group.bench_function("encode", |b| {
        b.iter(|| encode(TableKind::Events, black_box(&record_batch)).expect("encode"))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = batch_stages;
    config = config();
    targets = stages
}
criterion_main!(batch_stages);
