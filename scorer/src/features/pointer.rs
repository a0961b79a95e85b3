//! Pointer features per move (speeds, turning, strokes), clicks, and where presses land.

use super::Features;
use super::stats::{cv, cv_of, derivative, derivatives, mean, mean_of, ratio, wrap_angle};
use crate::trace::{KeyClass, Kind, TraceEvent};

/// A gap between pointer moves longer than this ends a stroke and counts as a pause.
const PAUSE_MS: i64 = 300;
/// A click counts as approached when the pointer moved within this time before it.
const APPROACH_WINDOW_MS: i64 = 1000;
/// A click this soon after another is the browser's follow-on click of the same gesture: a
/// click on a label is followed by a click on its control (Chromium: 0-2 ms later).
const FOLLOW_ON_MS: i64 = 50;
/// A click with no press this soon after Space or Enter went down or up is the key activating
/// the focused control (Enter clicks on its press, Space on its release).
const KEY_ACTIVATION_MS: i64 = 500;
/// Sampling intervals above this are pauses, not the sampling rate.
const MAX_SAMPLING_GAP_MS: i64 = 100;
/// A press lands "at the centre" within this many hundredths of its target's half-size.
const CENTRE_HUNDREDTHS: i8 = 2;

pub(super) fn pointer(events: &[TraceEvent], f: &mut Features) {
    let moves: Vec<(i64, f64, f64)> = events
        .iter()
        .filter(|e| e.kind == Kind::PointerMove)
        .filter_map(|e| Some((e.t, f64::from(e.x?), f64::from(e.y?))))
        .collect();
    f.pointer_moves = moves.len() as f64;
    let k = crate::kinematics::compute(&crate::kinematics::pointing_moves(events));
    f.movements = k.movements;
    f.movement_peak_speed_ratio = k.peak_speed_ratio;
    f.movement_peak_time = k.peak_time;
    f.movement_submovements = k.submovements;
    f.movement_deviation = k.deviation;
    f.movement_efficiency = k.efficiency;
    f.movement_log_jerk = k.log_jerk;
    f.fitts_slope_ms = k.fitts_slope;
    f.fitts_correlation = k.fitts_correlation;
    f.pause_log_sd = k.pause_log_sd;
    f.moving_fraction = k.moving_fraction;
    if moves.len() < 2 {
        return;
    }
    let mut intervals = Vec::with_capacity(moves.len());
    let mut speeds: Vec<(i64, f64)> = Vec::with_capacity(moves.len());
    let mut headings: Vec<f64> = Vec::with_capacity(moves.len());
    let mut pauses = 0;
    // Strokes: runs of moves without a pause; straightness is measured per stroke.
    let mut straightness = Vec::new();
    let mut stroke_start = 0;
    let mut stroke_length = 0.0;
    for i in 1..moves.len() {
        let (t0, x0, y0) = moves[i - 1];
        let (t1, x1, y1) = moves[i];
        let dt = t1 - t0;
        if dt > PAUSE_MS {
            pauses += 1;
            push_straightness(
                &moves,
                stroke_start,
                i - 1,
                stroke_length,
                &mut straightness,
            );
            stroke_start = i;
            stroke_length = 0.0;
            continue;
        }
        if dt <= MAX_SAMPLING_GAP_MS {
            intervals.push(dt as f64);
        }
        let distance = crate::kinematics::distance(x1 - x0, y1 - y0);
        stroke_length += distance;
        if dt > 0 {
            speeds.push((t1, distance / dt as f64));
        }
        if distance > 0.0 {
            headings.push((y1 - y0).atan2(x1 - x0));
        }
    }
    push_straightness(
        &moves,
        stroke_start,
        moves.len() - 1,
        stroke_length,
        &mut straightness,
    );
    f.pauses = f64::from(pauses);
    f.sampling_interval_cv = cv(&intervals);
    // Means and spreads are taken over iterators rather than collected copies: the same sums in
    // the same order (so the same bits), without an allocation per statistic.
    let speed_values = || speeds.iter().map(|(_, v)| *v);
    f.speed_mean = mean_of(speed_values());
    f.speed_cv = cv_of(speed_values());
    let accelerations = derivative(&speeds);
    f.acceleration_mean = mean_of(accelerations.iter().map(|(_, a)| a.abs()));
    f.jerk_mean = mean_of(derivatives(&accelerations).map(|(_, j)| j.abs()));
    f.straightness = mean(&straightness);

    let turns = || {
        headings
            .windows(2)
            .map(|pair| wrap_angle(pair[1] - pair[0]))
    };
    f.curvature_mean = mean_of(turns().map(f64::abs));
    f.direction_change_entropy = if headings.len() < 2 {
        f64::NAN
    } else {
        let mut bins = [0usize; 8];
        for turn in turns() {
            let unit = (turn + std::f64::consts::PI) / (2.0 * std::f64::consts::PI);
            bins[((unit * 8.0) as usize).min(7)] += 1;
        }
        let total = (headings.len() - 1) as f64;
        let entropy: f64 = bins
            .iter()
            .filter(|&&n| n > 0)
            .map(|&n| {
                let p = n as f64 / total;
                -p * p.log2()
            })
            .sum();
        entropy / 3.0
    };
}

fn push_straightness(
    moves: &[(i64, f64, f64)],
    start: usize,
    end: usize,
    length: f64,
    out: &mut Vec<f64>,
) {
    // Strokes of a few pixels say nothing about path shape.
    if end <= start + 1 || length < 20.0 {
        return;
    }
    let (_, x0, y0) = moves[start];
    let (_, x1, y1) = moves[end];
    out.push((crate::kinematics::distance(x1 - x0, y1 - y0) / length).min(1.0));
}

/// Clicks, and of them the ones a pointer made: a click a key made (Space or Enter on a focused
/// control, keyboard navigation) has no approach and no press by nature, nor has the follow-on
/// click a label sends its control, nor has a finger an approach to see: none of those counts
/// towards `clicks_without_approach`, and key and follow-on clicks not towards
/// `zero_dwell_clicks`. A session whose clicks are all a keyboard's leaves both unmeasured.
pub(super) fn clicks(events: &[TraceEvent], f: &mut Features) {
    let mut clicks = 0usize;
    let mut approachable = 0usize;
    let mut unapproached = 0usize;
    let mut pressable = 0usize;
    let mut zero_dwell = 0usize;
    let mut dwells = Vec::new();
    let mut last_move: Option<i64> = None;
    let mut pressed_at: Option<i64> = None;
    let mut last_press: Option<i64> = None;
    let mut last_touch: Option<i64> = None;
    let mut last_dwell: Option<i64> = None;
    let mut last_click: Option<i64> = None;
    let mut last_activation_key: Option<i64> = None;
    for event in events {
        match event.kind {
            Kind::PointerMove | Kind::TouchMove => last_move = Some(event.t),
            Kind::PointerDown | Kind::TouchStart => {
                pressed_at = Some(event.t);
                last_press = Some(event.t);
                if event.kind == Kind::TouchStart {
                    last_touch = Some(event.t);
                }
                last_dwell = None;
            }
            Kind::PointerUp | Kind::TouchEnd => {
                if let Some(down) = pressed_at.take() {
                    let dwell = event.t - down;
                    dwells.push(dwell as f64);
                    last_dwell = Some(dwell);
                }
            }
            Kind::KeyDown | Kind::KeyUp
                if matches!(event.key_class, KeyClass::Space | KeyClass::Enter) =>
            {
                last_activation_key = Some(event.t);
            }
            Kind::Click => {
                clicks += 1;
                let follow_on = last_click.is_some_and(|t| event.t - t <= FOLLOW_ON_MS);
                last_click = Some(event.t);
                let by_key = last_activation_key.is_some_and(|key| {
                    event.t - key <= KEY_ACTIVATION_MS && last_press.is_none_or(|press| press < key)
                });
                if follow_on || by_key {
                    continue;
                }
                pressable += 1;
                if last_dwell.is_none_or(|dwell| dwell <= 5) {
                    zero_dwell += 1;
                }
                last_dwell = None;
                if last_touch.is_some_and(|t| event.t - t <= APPROACH_WINDOW_MS) {
                    continue; // a finger comes down from nowhere: no approach to see
                }
                approachable += 1;
                if last_move.is_none_or(|t| event.t - t > APPROACH_WINDOW_MS) {
                    unapproached += 1;
                }
            }
            _ => {}
        }
    }
    f.clicks = clicks as f64;
    f.clicks_without_approach = ratio(unapproached as f64, approachable as f64);
    f.zero_dwell_clicks = ratio(zero_dwell as f64, pressable as f64);
    f.press_dwell_mean_ms = mean(&dwells);
}

/// Where presses land on their targets (embed 1.3 sends each press's offset from its target's
/// centre): people aim at a target and land around a point of their own, scripts at its exact
/// centre or anywhere inside it alike.
pub(super) fn press_offsets(events: &[TraceEvent], f: &mut Features) {
    let offsets: Vec<(f64, f64)> = events
        .iter()
        .filter_map(|e| e.offset)
        .map(|(x, y)| (f64::from(x) / 100.0, f64::from(y) / 100.0))
        .collect();
    if offsets.is_empty() {
        return;
    }
    let centred = events
        .iter()
        .filter_map(|e| e.offset)
        .filter(|(x, y)| x.abs() <= CENTRE_HUNDREDTHS && y.abs() <= CENTRE_HUNDREDTHS)
        .count();
    f.press_centre_fraction = centred as f64 / offsets.len() as f64;
    if offsets.len() >= 3 {
        let mx = mean_of(offsets.iter().map(|o| o.0));
        let my = mean_of(offsets.iter().map(|o| o.1));
        f.press_offset_spread = mean_of(
            offsets
                .iter()
                .map(|o| (o.0 - mx).powi(2) + (o.1 - my).powi(2)),
        )
        .sqrt();
    }
}
