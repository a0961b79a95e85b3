//! In-process rate limiters.
//!
//! - [`SlidingWindow`]: at most N requests per key in any rolling window (the integration API's
//!   120 per key per minute). It remembers the time of each accepted request, so `Retry-After`
//!   is exact: the whole seconds until the oldest one leaves the window.
//! - [`TokenBuckets`]: a steady rate with bursts, per key (the collector's per-IP and
//!   per-identifier limits), sharded to keep the hot path uncontended.
//! - [`NewSessions`]: a cap on browser-session identifiers a survey may start per minute. It
//!   remembers the identifiers seen recently, so only a session's first request (or its first
//!   after [`SESSION_IDLE`] of silence) spends from the survey's budget.

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

    /// Whether a request of `key` at `now` would be allowed, recording nothing: `Err` is how
    /// long until one would be. With [`SlidingWindow::record`], a limit on what happens to a
    /// request (failed authentications) rather than on the requests themselves.
    pub fn peek(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let accepted = self.accepted.lock();
        let Some(times) = accepted.get(key) else {
            return Ok(());
        };
        let live = times
            .iter()
            .filter(|time| now.duration_since(**time) < self.window);
        let count = live.clone().count();
        if count < self.limit {
            return Ok(());
        }
        let oldest = live.min().copied().unwrap_or(now);
        Err((oldest + self.window).saturating_duration_since(now))
    }

    /// Records one event of `key` at `now`, however many the window holds.
    pub fn record(&self, key: &str, now: Instant) {
        let mut accepted = self.accepted.lock();
        self.forget_idle(&mut accepted, now);
        let times = accepted.entry(key.to_owned()).or_default();
        while times
            .front()
            .is_some_and(|first| now.duration_since(*first) >= self.window)
        {
            times.pop_front();
        }
        // Bounded: more than the limit never changes an answer.
        if times.len() >= self.limit.max(1) {
            times.pop_front();
        }
        times.push_back(now);
    }

    /// Records a request at `now` if it is allowed; otherwise returns how long until one would be.
    /// Refused requests are not recorded, so they do not extend the wait.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut accepted = self.accepted.lock();
        self.forget_idle(&mut accepted, now);
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

impl SlidingWindow {
    /// Past 10,000 keys, forgets those with nothing in the window.
    fn forget_idle(&self, accepted: &mut HashMap<String, VecDeque<Instant>>, now: Instant) {
        if accepted.len() > 10_000 {
            let window = self.window;
            accepted.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|last| now.duration_since(*last) < window)
            });
        }
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

/// A session silent this long counts as new again when it comes back. The embed sends at least
/// every two seconds while the respondent acts, so a live session stays known.
pub const SESSION_IDLE: Duration = Duration::from_secs(10 * 60);

/// How often a survey's remembered identifiers are swept of idle ones.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Per survey: the identifiers seen within [`SESSION_IDLE`] and a token bucket of `per_minute`
/// new ones. Memory is bounded by the cap itself: a survey remembers at most about
/// `per_minute * (SESSION_IDLE + SWEEP_EVERY) / 1 min` identifiers.
#[derive(Debug)]
pub struct NewSessions<K> {
    per_minute: f64,
    shards: Vec<Mutex<HashMap<K, SurveySessions>>>,
}

#[derive(Debug)]
struct SurveySessions {
    seen: HashMap<Box<str>, Instant>,
    tokens: f64,
    updated: Instant,
    swept: Instant,
}

impl<K: Hash + Eq + Clone> NewSessions<K> {
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: f64::from(per_minute.max(1)),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    /// Admits a request of `identifier` for `survey`: a known identifier always, a new one if the
    /// survey's budget has a token; otherwise returns how long until it will.
    pub fn check(&self, survey: &K, identifier: &str, now: Instant) -> Result<(), Duration> {
        let mut hasher = DefaultHasher::new();
        survey.hash(&mut hasher);
        let mut surveys = self.shards[(hasher.finish() as usize) % SHARDS].lock();
        let sessions = surveys
            .entry(survey.clone())
            .or_insert_with(|| SurveySessions {
                seen: HashMap::new(),
                tokens: self.per_minute,
                updated: now,
                swept: now,
            });
        if now.saturating_duration_since(sessions.swept) >= SWEEP_EVERY {
            sessions
                .seen
                .retain(|_, last| now.saturating_duration_since(*last) < SESSION_IDLE);
            sessions.swept = now;
        }
        if let Some(last) = sessions.seen.get_mut(identifier)
            && now.saturating_duration_since(*last) < SESSION_IDLE
        {
            *last = now;
            return Ok(());
        }
        let rate = self.per_minute / 60.0;
        let elapsed = now
            .saturating_duration_since(sessions.updated)
            .as_secs_f64();
        sessions.tokens = (sessions.tokens + elapsed * rate).min(self.per_minute);
        sessions.updated = now;
        if sessions.tokens < 1.0 {
            return Err(Duration::from_secs_f64((1.0 - sessions.tokens) / rate));
        }
        sessions.tokens -= 1.0;
        sessions.seen.insert(identifier.into(), now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_recorded_events_is_peeked_without_counting_the_peek() {
        let limiter = SlidingWindow::new(2, Duration::from_secs(60));
        let start = Instant::now();
        for _ in 0..5 {
            assert!(limiter.peek("ip", start).is_ok(), "a peek records nothing");
        }
        limiter.record("ip", start);
        assert!(limiter.peek("ip", start).is_ok());
        limiter.record("ip", start + Duration::from_secs(10));
        assert_eq!(
            limiter.peek("ip", start + Duration::from_secs(20)),
            Err(Duration::from_secs(40))
        );
        assert!(limiter.peek("other", start).is_ok(), "per key");
        // The first event leaves the window; one more recorded keeps it full.
        assert!(limiter.peek("ip", start + Duration::from_secs(61)).is_ok());
        limiter.record("ip", start + Duration::from_secs(61));
        assert!(limiter.peek("ip", start + Duration::from_secs(62)).is_err());
    }

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

    #[test]
    fn new_sessions_spend_the_budget_once_and_known_ones_never() {
        let sessions = NewSessions::new(3);
        let start = Instant::now();
        for id in ["a", "b", "c"] {
            assert!(sessions.check(&"s", id, start).is_ok());
        }
        let wait = sessions.check(&"s", "d", start).expect_err("budget spent");
        assert_eq!(retry_after_secs(wait), 20, "one token every 20 s");
        // Known identifiers keep being admitted; another survey has its own budget.
        for _ in 0..100 {
            assert!(sessions.check(&"s", "a", start).is_ok());
        }
        assert!(sessions.check(&"t", "d", start).is_ok());
        assert!(
            sessions
                .check(&"s", "d", start + Duration::from_secs(20))
                .is_ok()
        );
        // A session idle past SESSION_IDLE is new again (and the budget has refilled by then).
        let later = start + SESSION_IDLE + Duration::from_secs(21);
        for id in ["b", "c", "e"] {
            assert!(sessions.check(&"s", id, later).is_ok());
        }
        assert!(sessions.check(&"s", "f", later).is_err());
        assert!(sessions.check(&"s", "a", later).is_err(), "a was idle");
    }
}
