//! Pointer kinematics that do not move with how a browser sampled the path.
//!
//! The per-move features of [`crate::features`] (speed spread, turning per move) change with the
//! display's refresh rate, event coalescing and remote-desktop timing, because each move is one
//! sample. The features here are computed on movements (strokes: runs of moves without a pause)
//! resampled to a fixed time step by linear interpolation, and are ratios, so they change little
//! with the sampling rate, irregular timing or the screen's scale: the shape of the velocity
//! profile (peak over mean speed, when the peak comes, how many sub-movements), how far a path
//! strays from its chord, its smoothness (log dimensionless jerk), the distance-duration relation
//! of aimed movements (Fitts's law) and the structure of the pauses between movements.
//!
//! Only pointing is measured: moves with no button held, a press or release ending the
//! movement before it. Drags (drawing, sliders, selecting text) and touch contact are other
//! motor tasks; a data set of people drawing circles would otherwise teach that loops are human.
//!
//! Positions are CSS pixels and times milliseconds; a movement must last at least
//! [`MIN_MOVEMENT_MS`] and get at least [`MIN_MOVEMENT_PX`] from where it began to be measured.

use crate::trace::{Kind, TraceEvent};

/// A gap between moves longer than this ends a movement (the same as the pause of
/// `features::pointer`).
pub(crate) const PAUSE_MS: i64 = 300;
/// The resampling step: coarser than every sampling a browser delivers (16 ms and finer) and
/// than most remote-desktop coalescing, fine enough for a 300 ms reach to keep its shape.
const STEP_MS: f64 = 40.0;
/// Movements shorter than this have too few resampled points for a profile.
pub const MIN_MOVEMENT_MS: i64 = 160;
/// Movements shorter than this are jitter of a resting hand, not a movement.
pub const MIN_MOVEMENT_PX: f64 = 16.0;
/// A speed peak counts as a sub-movement when it reaches this share of the movement's peak.
const PEAK_SHARE: f64 = 0.2;
/// Two peaks are separate sub-movements when the speed between them drops below this share of
/// the smaller one.
const VALLEY_SHARE: f64 = 0.75;
/// The target width in Fitts's index of difficulty `log2(1 + D / W)`: the size of a typical
/// survey control, since the page's real targets are not known.
const FITTS_WIDTH_PX: f64 = 16.0;
/// Pauses longer than this are reading or leaving the page, not the rhythm of movement.
const MAX_PAUSE_MS: i64 = 10_000;

/// Movement-level features of one session; `NaN` where too few movements were measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kinematics {
    /// Movements measured.
    pub movements: f64,
    /// Median over movements of peak speed over mean speed (a minimum-jerk reach: 1.875).
    pub peak_speed_ratio: f64,
    /// Median over movements of the time of the speed peak, as a share of the duration.
    pub peak_time: f64,
    /// Mean number of sub-movements (separate speed peaks) per movement.
    pub submovements: f64,
    /// Median over movements of the largest distance from the chord, over the path length.
    pub deviation: f64,
    /// Median over movements of chord over path length.
    pub efficiency: f64,
    /// Median over movements of the log dimensionless jerk (higher is smoother).
    pub log_jerk: f64,
    /// Slope of movement duration over Fitts's index of difficulty, ms per bit.
    pub fitts_slope: f64,
    /// Correlation of movement duration with Fitts's index of difficulty.
    pub fitts_correlation: f64,
    /// Standard deviation of the log durations of pauses between movements.
    pub pause_log_sd: f64,
    /// Time spent moving over the time from the first move to the last.
    pub moving_fraction: f64,
}

impl Kinematics {
    fn unmeasured() -> Kinematics {
        Kinematics {
            movements: 0.0,
            peak_speed_ratio: f64::NAN,
            peak_time: f64::NAN,
            submovements: f64::NAN,
            deviation: f64::NAN,
            efficiency: f64::NAN,
            log_jerk: f64::NAN,
            fitts_slope: f64::NAN,
            fitts_correlation: f64::NAN,
            pause_log_sd: f64::NAN,
            moving_fraction: f64::NAN,
        }
    }
}

/// One measured movement.
#[derive(Debug, Clone, Copy)]
struct Movement {
    duration: f64,
    chord: f64,
    peak_speed_ratio: f64,
    peak_time: f64,
    submovements: f64,
    deviation: f64,
    efficiency: f64,
    log_jerk: f64,
}

/// A pointer position of pointing; `starts_stroke` when a press or release came just before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Move {
    pub t: i64,
    pub x: f64,
    pub y: f64,
    pub starts_stroke: bool,
}

/// The moves of pointing in a time-ordered session: pointer moves while no button is held.
pub fn pointing_moves(events: &[TraceEvent]) -> Vec<Move> {
    let mut out = Vec::new();
    let mut pressed = false;
    let mut boundary = true;
    for event in events {
        match event.kind {
            Kind::PointerDown | Kind::TouchStart => {
                pressed = true;
                boundary = true;
            }
            // A lost release (the button let go outside the window) must not hide the rest of
            // the session: a click, leaving the page or the window ends the press as well.
            Kind::PointerUp
            | Kind::TouchEnd
            | Kind::Click
            | Kind::Blur
            | Kind::Visibility
            | Kind::PageHide => {
                pressed = false;
                boundary = true;
            }
            Kind::PointerMove if !pressed => {
                if let (Some(x), Some(y)) = (event.x, event.y) {
                    out.push(Move {
                        t: event.t,
                        x: f64::from(x),
                        y: f64::from(y),
                        starts_stroke: boundary,
                    });
                    boundary = false;
                }
            }
            _ => {}
        }
    }
    out
}

/// Computes the kinematics of time-ordered pointing moves.
pub fn compute(moves: &[Move]) -> Kinematics {
    let mut k = Kinematics::unmeasured();
    let moves = latest_per_instant(moves);
    if moves.len() < 2 {
        return k;
    }
    let mut measured = Vec::new();
    let mut pauses = Vec::new();
    let mut moving_ms = 0.0;
    let mut start = 0;
    for end in 1..=moves.len() {
        let closes =
            end == moves.len() || moves[end].3 || moves[end].0 - moves[end - 1].0 > PAUSE_MS;
        if !closes {
            continue;
        }
        let stroke = &moves[start..end];
        moving_ms += (stroke[stroke.len() - 1].0 - stroke[0].0) as f64;
        if let Some(movement) = movement(stroke) {
            measured.push(movement);
        }
        if end < moves.len() {
            let gap = moves[end].0 - moves[end - 1].0;
            if gap > PAUSE_MS && gap <= MAX_PAUSE_MS {
                pauses.push((gap as f64).ln());
            }
        }
        start = end;
    }
    let span = (moves[moves.len() - 1].0 - moves[0].0) as f64;
    if span > 0.0 {
        k.moving_fraction = moving_ms / span;
    }
    if pauses.len() >= 3 {
        k.pause_log_sd = sd(&pauses);
    }
    k.movements = measured.len() as f64;
    if measured.is_empty() {
        return k;
    }
    // One buffer for the five medians.
    let mut values: Vec<f64> = Vec::with_capacity(measured.len());
    let mut median_of = |field: fn(&Movement) -> f64| {
        values.clear();
        values.extend(measured.iter().map(field).filter(|v| v.is_finite()));
        median(&mut values)
    };
    k.peak_speed_ratio = median_of(|m| m.peak_speed_ratio);
    k.peak_time = median_of(|m| m.peak_time);
    k.deviation = median_of(|m| m.deviation);
    k.efficiency = median_of(|m| m.efficiency);
    k.log_jerk = median_of(|m| m.log_jerk);
    k.submovements = measured.iter().map(|m| m.submovements).sum::<f64>() / k.movements;
    // Fitts: aimed movements only (a loop that ends where it began has no distance to aim at).
    let aimed: Vec<(f64, f64)> = measured
        .iter()
        .filter(|m| m.chord >= MIN_MOVEMENT_PX && m.efficiency >= 0.5)
        .map(|m| ((1.0 + m.chord / FITTS_WIDTH_PX).log2(), m.duration))
        .collect();
    if aimed.len() >= 4 {
        let (slope, correlation) = regression(&aimed);
        k.fitts_slope = slope;
        k.fitts_correlation = correlation;
    }
    k
}

/// Moves as `(t, x, y, starts_stroke)` with distinct times: of several moves stamped in one
/// millisecond (a stalled page delivering its backlog), the last position stands for that
/// instant.
fn latest_per_instant(moves: &[Move]) -> Vec<(i64, f64, f64, bool)> {
    let mut out: Vec<(i64, f64, f64, bool)> = Vec::with_capacity(moves.len());
    for m in moves {
        match out.last_mut() {
            Some(last) if last.0 == m.t && !m.starts_stroke => {
                *last = (m.t, m.x, m.y, last.3);
            }
            _ => out.push((m.t, m.x, m.y, m.starts_stroke)),
        }
    }
    out
}

/// The length of (dx, dy). Not `f64::hypot`, which guards against overflow and underflow that
/// page coordinates never reach, and took 18 % of a scoring run's samples in the profile issue
/// 56 cites: the two differ in the last bits only, within what the corpus's feature check
/// allows (a relative 1e-9).
#[inline]
pub(crate) fn distance(dx: f64, dy: f64) -> f64 {
    (dx * dx + dy * dy).sqrt()
}

/// Measures one stroke (moves as from [`latest_per_instant`]), or `None` when it is too short or
/// too small.
fn movement(stroke: &[(i64, f64, f64, bool)]) -> Option<Movement> {
    let (t0, x0, y0, _) = stroke[0];
    let (t1, x1, y1, _) = stroke[stroke.len() - 1];
    let duration = (t1 - t0) as f64;
    if stroke.len() < 3 || t1 - t0 < MIN_MOVEMENT_MS {
        return None;
    }
    let points = resample(stroke);
    let step = duration / (points.len() - 1) as f64;
    // Each step's distance, once: the path is their sum, the speeds them over the step.
    let mut raw: Vec<f64> = points
        .windows(2)
        .map(|w| distance(w[1].0 - w[0].0, w[1].1 - w[0].1))
        .collect();
    let path: f64 = raw.iter().sum();
    // A resting hand's jitter adds up to some path, but never gets away from where it began.
    let extent = points
        .iter()
        .map(|&(x, y)| distance(x - x0, y - y0))
        .fold(0.0, f64::max);
    if extent < MIN_MOVEMENT_PX {
        return None;
    }
    let chord = distance(x1 - x0, y1 - y0);

    // Speeds per step, smoothed with a [1/4, 1/2, 1/4] kernel.
    for distance in &mut raw {
        *distance /= step;
    }
    let speeds: Vec<f64> = (0..raw.len())
        .map(|i| {
            let before = raw[i.saturating_sub(1)];
            let after = raw[(i + 1).min(raw.len() - 1)];
            0.25 * before + 0.5 * raw[i] + 0.25 * after
        })
        .collect();
    let (peak_index, peak) =
        speeds.iter().copied().enumerate().fold(
            (0, 0.0),
            |best, (i, v)| if v > best.1 { (i, v) } else { best },
        );
    let mean_speed = path / duration;

    // Largest distance from the chord (from the start, for a loop that returns to it).
    let deviation = points
        .iter()
        .map(|&(x, y)| {
            if chord >= 1.0 {
                ((x1 - x0) * (y0 - y) - (x0 - x) * (y1 - y0)).abs() / chord
            } else {
                distance(x - x0, y - y0)
            }
        })
        .fold(0.0, f64::max);

    // Log dimensionless jerk along the path: second differences of the smoothed speed (jerk
    // from positions would count the kinks that linear interpolation puts at every sample of a
    // sparse, irregular recording).
    let log_jerk = if speeds.len() >= 5 && peak > 0.0 {
        // Differences over two steps: a low-pass that the sparsest recordings can still follow.
        let span = 2.0 * step;
        let squared: f64 = speeds
            .windows(5)
            .map(|w| ((w[4] - 2.0 * w[2] + w[0]) / (span * span)).powi(2))
            .sum::<f64>()
            * step;
        let dimensionless = duration.powi(3) / (peak * peak) * squared;
        if dimensionless > 0.0 {
            -dimensionless.ln()
        } else {
            f64::NAN
        }
    } else {
        f64::NAN
    };

    Some(Movement {
        duration,
        chord,
        peak_speed_ratio: if mean_speed > 0.0 {
            peak / mean_speed
        } else {
            f64::NAN
        },
        peak_time: (peak_index as f64 + 0.5) * step / duration,
        submovements: submovements(&speeds, peak),
        deviation: deviation / path,
        efficiency: (chord / path).min(1.0),
        log_jerk,
    })
}

/// The stroke's positions at equal time steps of about [`STEP_MS`], first and last included.
fn resample(stroke: &[(i64, f64, f64, bool)]) -> Vec<(f64, f64)> {
    let t0 = stroke[0].0 as f64;
    let duration = (stroke[stroke.len() - 1].0 - stroke[0].0) as f64;
    let steps = ((duration / STEP_MS).round() as usize).max(2);
    let mut out = Vec::with_capacity(steps + 1);
    let mut segment = 0;
    for k in 0..=steps {
        let t = t0 + duration * k as f64 / steps as f64;
        while segment + 2 < stroke.len() && (stroke[segment + 1].0 as f64) < t {
            segment += 1;
        }
        let (ta, xa, ya, _) = stroke[segment];
        let (tb, xb, yb, _) = stroke[segment + 1];
        let span = (tb - ta) as f64;
        let u = if span > 0.0 {
            ((t - ta as f64) / span).clamp(0.0, 1.0)
        } else {
            1.0
        };
        out.push((xa + (xb - xa) * u, ya + (yb - ya) * u));
    }
    out
}

/// Separate speed peaks: local maxima of at least [`PEAK_SHARE`] of the peak, merged with the
/// previous one unless the speed between them falls below [`VALLEY_SHARE`] of the smaller.
fn submovements(speeds: &[f64], peak: f64) -> f64 {
    let mut kept: Vec<usize> = Vec::new();
    for i in 0..speeds.len() {
        let before = if i > 0 { speeds[i - 1] } else { 0.0 };
        let after = speeds.get(i + 1).copied().unwrap_or(0.0);
        if !(speeds[i] > before && speeds[i] >= after && speeds[i] >= PEAK_SHARE * peak) {
            continue;
        }
        match kept.last().copied() {
            None => kept.push(i),
            Some(last) => {
                let valley = speeds[last..=i]
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                if valley < VALLEY_SHARE * speeds[last].min(speeds[i]) {
                    kept.push(i);
                } else if speeds[i] > speeds[last]
                    && let Some(slot) = kept.last_mut()
                {
                    *slot = i;
                }
            }
        }
    }
    kept.len() as f64
}

/// Least-squares slope of `y` over `x`, and their correlation.
/// Least squares slope of `y` on `x` and Pearson's correlation; `NaN` for both when either
/// side does not vary.
pub(crate) fn regression(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 || syy <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    (sxy / sxx, sxy / (sxx * syy).sqrt())
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    }
}

/// Population standard deviation.
pub(crate) fn sd(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let n = values.len() as f64;
    let m = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt()
}

#[cfg(test)]
mod tests;
