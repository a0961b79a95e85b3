//! In-process rate limiters.
//!
//! - [`SlidingWindow`]: at most N requests per key in any rolling window (the integration API's
//!   120 per key per minute). It remembers the time of each accepted request, so `Retry-After`
//!   is exact: the whole seconds until the oldest one leaves the window.
//! - [`TokenBuckets`]: a steady rate with bursts, per key (the collector's per-IP and
//!   per-identifier limits), sharded to keep the hot path uncontended.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Allows `limit` requests per key in any window of `window`.
#[derive(Debug)]
pub struct SlidingWindow {
    limit: usize,
    window: Duration,
    accepted: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl SlidingWindow {
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit: limit as usize,
            window,
            accepted: Mutex::new(HashMap::new()),
        }
    }

    /// Records a request at `now` if it is allowed; otherwise returns how long until one would be.
    /// Refused requests are not recorded, so they do not extend the wait.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut accepted = self.accepted.lock();
        if accepted.len() > 10_000 {
            let window = self.window;
            accepted.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|last| now.duration_since(*last) < window)
            });
        }
        let times = accepted.entry(key.to_owned()).or_default();
        while times
            .front()
            .is_some_and(|first| now.duration_since(*first) >= self.window)
        {
            times.pop_front();
        }
        if times.len() < self.limit {
            times.push_back(now);
            return Ok(());
        }
        let oldest = times.front().copied().unwrap_or(now);
        Err((oldest + self.window).saturating_duration_since(now))
    }
}

/// Whole seconds to wait, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

const SHARDS: usize = 16;
/// Past this many keys in a shard, keys whose bucket has refilled are forgotten. Buckets refill
/// within seconds, so the maps hold roughly the keys active in the last few seconds.
const MAX_KEYS_PER_SHARD: usize = 4096;

/// Token buckets per key: `rate` tokens a second, holding at most `burst`.
#[derive(Debug)]
pub struct TokenBuckets<K> {
    rate: f64,
    burst: f64,
    shards: Vec<Mutex<HashMap<K, Bucket>>>,
}

impl<K: Hash + Eq + Clone> TokenBuckets<K> {
    pub fn new(rate_per_second: u32, burst: u32) -> Self {
        Self {
            rate: f64::from(rate_per_second.max(1)),
            burst: f64::from(burst.max(1)),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    /// Takes a token for `key`, or returns how long until one is available.
    pub fn check(&self, key: &K, now: Instant) -> Result<(), Duration> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let shard = &self.shards[(hasher.finish() as usize) % SHARDS];
        let mut buckets = shard.lock();
        if buckets.len() > MAX_KEYS_PER_SHARD {
            // Forget keys whose bucket has refilled: they are indistinguishable from new ones.
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, bucket| {
                bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window_allows_the_limit_then_reports_the_exact_wait() {
        let limiter = SlidingWindow::new(3, Duration::from_secs(60));
        let start = Instant::now();
        for i in 0..3 {
            assert!(limiter.check("k", start + Duration::from_secs(i)).is_ok());
        }
        let wait = limiter
            .check("k", start + Duration::from_secs(10))
            .expect_err("limited");
        assert_eq!(wait, Duration::from_secs(50));
        assert_eq!(retry_after_secs(wait), 50);
        assert!(
            limiter
                .check("other", start + Duration::from_secs(10))
                .is_ok()
        );
        assert!(limiter.check("k", start + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }

    #[test]
    fn token_buckets_refill_at_the_rate() {
        let buckets = TokenBuckets::new(10, 2);
        let start = Instant::now();
        assert!(buckets.check(&"a", start).is_ok());
        assert!(buckets.check(&"a", start).is_ok());
        let wait = buckets.check(&"a", start).expect_err("empty");
        assert!(wait <= Duration::from_millis(100));
        assert!(
            buckets
                .check(&"a", start + Duration::from_millis(100))
                .is_ok()
        );
        assert!(buckets.check(&"b", start).is_ok());
    }
}
