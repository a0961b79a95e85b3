//! The time-bounded fuzz runs' engine, shared by every fuzz target (included with `#[path]`).
//!
//! A target is a check over bytes. [`run`] first replays every file of the target's corpus
//! (`tests/fuzz/corpus/<target>/`, kept in the repository: seeds and every input that once
//! failed), then, until its time budget is spent, checks mutants of corpus entries: bytes
//! flipped, inserted, deleted, duplicated, tokens from the target's dictionary spliced in, and
//! two entries crossed. It is not coverage-guided (cargo-fuzz and libFuzzer need a nightly
//! toolchain, which this project's machines cannot fetch); the corpus and the dictionary carry
//! the structure instead.
//!
//! Environment: `TELLTALE_FUZZ_SECS` (budget per target, default 3), `TELLTALE_FUZZ_SEED`
//! (replays one run; the seed is printed when a check fails).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use sha2::Digest;

/// xoshiro256++: fast, and reproducible from its seed.
pub(crate) struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next() % bound as u64) as usize
        }
    }
}

/// Every file of a corpus folder, in name order.
pub(crate) fn corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut entries: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading the corpus {}: {error}", dir.display()))
        .flatten()
        .filter(|entry| entry.path().is_file())
        .map(|entry| {
            let bytes = std::fs::read(entry.path()).expect("read a corpus file");
            (entry.path(), bytes)
        })
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "the corpus {} is empty", dir.display());
    entries
}

/// One mutant of `input`: one to four mutations stacked.
pub(crate) fn mutate(
    rng: &mut Rng,
    input: &[u8],
    corpus: &[Vec<u8>],
    dictionary: &[&[u8]],
) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(8) {
            0 if !out.is_empty() => {
                let at = rng.below(out.len());
                out[at] ^= 1 << rng.below(8);
            }
            1 => out.insert(at, rng.next() as u8),
            2 if !out.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(64)).min(out.len());
                let copy = out[start..end].to_vec();
                out.splice(at..at, copy);
            }
            4 | 5 if !dictionary.is_empty() => {
                let token = dictionary[rng.below(dictionary.len())];
                out.splice(at..at, token.iter().copied());
            }
            6 if !dictionary.is_empty() && !out.is_empty() => {
                // Replace a run of bytes by a token.
                let end = (at + rng.below(8)).min(out.len());
                let token = dictionary[rng.below(dictionary.len())];
                out.splice(at.min(end)..end, token.iter().copied());
            }
            _ if !corpus.is_empty() => {
                // Cross over: this input's head with another entry's tail.
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                out.truncate(at);
                out.extend_from_slice(&other[from..]);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out
}

/// Tokens of JSON and of the embed's event vocabulary, spliced into mutants of JSON inputs.
pub(crate) const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"false",
    b"-0",
    b"1e999",
    b"-1.5e-7",
    b"9223372036854775808",
    b"\"type\"",
    b"\"timestamp\"",
    b"\"data\"",
    b"\"x\"",
    b"\"y\"",
    b"\"events\"",
    b"\"pointermove\"",
    b"\"keyup\"",
    b"\"session\"",
    b"\"interviewId\"",
    b"\"holdMs\"",
    b"\"trusted\"",
    b" ",
    b"\t",
    b"\xef\xbb\xbf",
    b"\xff",
];

/// The budget per target.
pub(crate) fn budget() -> Duration {
    let secs = std::env::var("TELLTALE_FUZZ_SECS")
        .ok()
        .and_then(|value| value.parse::<f64>().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs.max(0.0))
}

fn seed() -> u64 {
    std::env::var("TELLTALE_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |elapsed| elapsed.as_nanos() as u64)
        })
}

/// What a run did, for the test to assert it did enough.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) seed: u64,
    pub(crate) corpus: usize,
    pub(crate) mutants: u64,
}

/// Replays the corpus of `target` under `corpus_root`, then checks mutants until the budget is
/// spent. A failing input is written to `$TMPDIR/telltale-fuzz-failures/` (to be added to the
/// corpus once fixed) and the run panics with the seed that reproduces it.
pub(crate) fn run(
    target: &str,
    corpus_root: &Path,
    dictionary: &[&[u8]],
    mut check: impl FnMut(&[u8]) -> Result<(), String>,
) -> Report {
    let entries = corpus(&corpus_root.join(target));
    for (path, bytes) in &entries {
        if let Err(failure) = check(bytes) {
            panic!(
                "fuzz target {target}: corpus file {} fails: {failure}",
                path.display()
            );
        }
    }
    let inputs: Vec<Vec<u8>> = entries.into_iter().map(|(_, bytes)| bytes).collect();
    let seed = seed();
    let mut rng = Rng::new(seed);
    let deadline = Instant::now() + budget();
    let mut mutants = 0u64;
    while Instant::now() < deadline {
        let base = &inputs[rng.below(inputs.len())];
        let mutant = mutate(&mut rng, base, &inputs, dictionary);
        mutants += 1;
        if let Err(failure) = check(&mutant) {
            let saved = save_failure(target, &mutant);
            panic!(
                "fuzz target {target} failed on mutant {mutants} of seed {seed} \
                 (TELLTALE_FUZZ_SEED={seed} replays the run; input saved to {saved}): {failure}\n\
                 input: {:?}",
                String::from_utf8_lossy(&mutant)
            );
        }
    }
    eprintln!(
        "fuzz target {target}: {} corpus files and {mutants} mutants checked (seed {seed})",
        inputs.len()
    );
    Report {
        seed,
        corpus: inputs.len(),
        mutants,
    }
}

fn save_failure(target: &str, input: &[u8]) -> String {
    let dir = std::env::temp_dir().join("telltale-fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let hash = hex::encode(&sha2::Sha256::digest(input)[..8]);
    let path = dir.join(format!("{target}-{hash}"));
    match std::fs::write(&path, input) {
        Ok(()) => path.display().to_string(),
        Err(error) => format!("(not saved: {error})"),
    }
}
