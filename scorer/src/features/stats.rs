//! Small statistics over feature samples: means, spreads, ratios, rates of change.

use crate::trace::TraceEvent;

/// The most events within any window of `window_ms` (events in time order).
pub(super) fn max_per_window(events: &[TraceEvent], window_ms: i64) -> usize {
    let mut best = 0;
    let mut start = 0;
    for end in 0..events.len() {
        while events[end].t - events[start].t >= window_ms {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// Rate of change between consecutive `(t, value)` samples.
pub(super) fn derivative(samples: &[(i64, f64)]) -> Vec<(i64, f64)> {
    derivatives(samples).collect()
}

pub(super) fn derivatives(samples: &[(i64, f64)]) -> impl Iterator<Item = (i64, f64)> + '_ {
    samples
        .windows(2)
        .filter(|pair| pair[1].0 > pair[0].0)
        .map(|pair| {
            (
                pair[1].0,
                (pair[1].1 - pair[0].1) / (pair[1].0 - pair[0].0) as f64,
            )
        })
}

pub(super) fn wrap_angle(angle: f64) -> f64 {
    use std::f64::consts::PI;
    let mut a = angle;
    while a > PI {
        a -= 2.0 * PI;
    }
    while a < -PI {
        a += 2.0 * PI;
    }
    a
}

pub(super) fn count(events: &[TraceEvent], predicate: impl Fn(&TraceEvent) -> bool) -> f64 {
    events.iter().filter(|e| predicate(e)).count() as f64
}

pub(super) fn indicator(value: bool) -> f64 {
    if value { 1.0 } else { 0.0 }
}

pub(super) fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { f64::NAN }
}

pub(super) fn mean(values: &[f64]) -> f64 {
    mean_of(values.iter().copied())
}

/// The mean of the values in order (`sum` then divide, as over a slice); `NaN` for none.
pub(super) fn mean_of(values: impl Iterator<Item = f64>) -> f64 {
    let mut n = 0usize;
    let sum = values.inspect(|_| n += 1).sum::<f64>();
    if n == 0 {
        return f64::NAN;
    }
    sum / n as f64
}

/// Standard deviation over mean; `NaN` for fewer than 3 values or a zero mean.
pub(super) fn cv(values: &[f64]) -> f64 {
    cv_of(values.iter().copied())
}

pub(super) fn cv_of(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let mut n = 0usize;
    let sum = values.clone().inspect(|_| n += 1).sum::<f64>();
    if n < 3 {
        return f64::NAN;
    }
    let m = sum / n as f64;
    if m.abs() < f64::EPSILON {
        return f64::NAN;
    }
    let variance = values.map(|v| (v - m).powi(2)).sum::<f64>() / n as f64;
    variance.sqrt() / m
}
