use super::*;

/// Position along a minimum-jerk reach at normalized time `u`.
fn min_jerk(u: f64) -> f64 {
    10.0 * u.powi(3) - 15.0 * u.powi(4) + 6.0 * u.powi(5)
}

/// A reach of `distance` px in `duration` ms along x, sampled at `times` (ms from start),
/// positions rounded to whole pixels as the embed sends them.
fn reach(start: i64, distance: f64, duration: f64, times: &[f64]) -> Vec<Move> {
    times
        .iter()
        .filter(|&&t| t <= duration)
        .map(|&t| {
            let x = 100.0 + distance * min_jerk(t / duration);
            at(start + t.round() as i64, x.round(), 300.0)
        })
        .collect()
}

fn at(t: i64, x: f64, y: f64) -> Move {
    Move {
        t,
        x,
        y,
        starts_stroke: false,
    }
}

fn every(interval: f64, duration: f64) -> Vec<f64> {
    let mut times: Vec<f64> = (0..)
        .map(|i| i as f64 * interval)
        .take_while(|t| *t < duration)
        .collect();
    times.push(duration);
    times
}

/// Irregular intervals cycling through 16-120 ms, like remote-desktop coalescing.
fn irregular(duration: f64) -> Vec<f64> {
    let gaps = [16.0, 70.0, 33.0, 120.0, 48.0, 90.0, 25.0];
    let mut times = vec![0.0];
    let mut i = 0;
    while *times.last().unwrap_or(&0.0) + gaps[i % gaps.len()] < duration {
        times.push(times.last().unwrap_or(&0.0) + gaps[i % gaps.len()]);
        i += 1;
    }
    times.push(duration);
    times
}

fn within(actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "expected {expected} ± {tolerance}, got {actual}"
    );
}

#[test]
fn a_minimum_jerk_reach_keeps_its_profile_at_every_sampling_rate_and_scale() {
    let mut profiles = Vec::new();
    for (times, scale) in [
        (every(1000.0 / 240.0, 640.0), 1.0),
        (every(1000.0 / 60.0, 640.0), 1.0),
        (every(16.0, 640.0), 2.0),
        (every(33.0, 640.0), 0.67),
        (irregular(640.0), 1.0),
    ] {
        let k = compute(&reach(1_000, 400.0 * scale, 640.0, &times));
        assert_eq!(k.movements, 1.0);
        // The analytic ratio is 1.875; the resampling and smoothing shave the peak a little.
        within(k.peak_speed_ratio, 1.8, 0.1);
        within(k.peak_time, 0.5, 0.07);
        assert_eq!(k.submovements, 1.0);
        within(k.efficiency, 1.0, 1e-9);
        within(k.deviation, 0.0, 1e-9);
        profiles.push(k);
    }
    let jerks: Vec<f64> = profiles.iter().map(|k| k.log_jerk).collect();
    let spread = jerks.iter().copied().fold(f64::MIN, f64::max)
        - jerks.iter().copied().fold(f64::MAX, f64::min);
    assert!(spread < 0.6, "log jerk moves with sampling: {jerks:?}");
}

#[test]
fn a_corrective_sub_movement_after_a_dip_counts_as_a_second_one() {
    let mut moves = reach(0, 400.0, 600.0, &every(16.0, 600.0));
    // Rest 120 ms at the end of the primary movement (under the pause), then correct 40 px.
    let correction = reach(720, 40.0, 240.0, &every(16.0, 240.0));
    moves.extend(correction.into_iter().map(|m| at(m.t, m.x + 400.0, m.y)));
    let k = compute(&moves);
    assert_eq!(k.movements, 1.0);
    assert_eq!(k.submovements, 2.0);
}

#[test]
fn a_curved_path_strays_from_its_chord() {
    // A half circle of radius 100 from (0, 0) to (200, 0) in 800 ms.
    let moves: Vec<Move> = (0..=50)
        .map(|i| {
            let a = std::f64::consts::PI * (1.0 - i as f64 / 50.0);
            at(i * 16, 100.0 + 100.0 * a.cos(), -100.0 * a.sin())
        })
        .collect();
    let k = compute(&moves);
    within(k.deviation, 100.0 / (std::f64::consts::PI * 100.0), 0.01);
    within(k.efficiency, 2.0 / std::f64::consts::PI, 0.01);
}

#[test]
fn durations_that_follow_fitts_law_give_its_slope_and_pauses_their_spread() {
    let mut moves: Vec<Move> = Vec::new();
    let mut t = 0;
    let mut pauses = Vec::new();
    for (i, distance) in [40.0, 120.0, 300.0, 700.0, 90.0, 500.0]
        .into_iter()
        .enumerate()
    {
        let id = (1.0f64 + distance / FITTS_WIDTH_PX).log2();
        let duration = (200.0 + 100.0 * id).round();
        moves.extend(reach(t, distance, duration, &every(16.0, duration)));
        let pause = 400 + 300 * i as i64;
        pauses.push((pause as f64).ln());
        t += duration as i64 + pause;
    }
    pauses.pop();
    let k = compute(&moves);
    assert_eq!(k.movements, 6.0);
    within(k.fitts_slope, 100.0, 2.0);
    within(k.fitts_correlation, 1.0, 0.01);
    within(k.pause_log_sd, sd(&pauses), 1e-9);
    assert!(k.moving_fraction > 0.2 && k.moving_fraction < 0.8);
}

#[test]
fn drags_are_not_pointing_and_a_press_ends_the_movement_before_it() {
    let mv = |t: i64, x: i32| TraceEvent::new(t, Kind::PointerMove).at(x, 300);
    let events = vec![
        mv(0, 100),
        mv(16, 120),
        TraceEvent::new(32, Kind::PointerDown).at(120, 300),
        mv(48, 140), // dragging
        mv(64, 160),
        TraceEvent::new(80, Kind::PointerUp).at(160, 300),
        TraceEvent::new(81, Kind::Click).at(160, 300),
        mv(96, 170),
        mv(112, 180),
        TraceEvent::new(128, Kind::PointerDown).at(180, 300),
        // The release was lost; the click still ends the press.
        TraceEvent::new(200, Kind::Click).at(180, 300),
        mv(216, 190),
    ];
    let moves = pointing_moves(&events);
    let xs: Vec<f64> = moves.iter().map(|m| m.x).collect();
    assert_eq!(xs, vec![100.0, 120.0, 170.0, 180.0, 190.0]);
    let starts: Vec<bool> = moves.iter().map(|m| m.starts_stroke).collect();
    assert_eq!(starts, vec![true, false, true, false, true]);
}

#[test]
fn moves_stamped_in_one_millisecond_count_once_and_resting_hands_are_not_movements() {
    let mut moves = reach(0, 300.0, 480.0, &every(16.0, 480.0));
    // A stalled page delivers three moves at once.
    moves.insert(10, at(moves[10].t, moves[9].x, moves[9].y));
    moves.insert(10, at(moves[10].t, moves[9].x, moves[9].y));
    let stalled = compute(&moves);
    assert_eq!(stalled.movements, 1.0);
    assert!(stalled.peak_speed_ratio.is_finite());
    // Jitter of a few pixels over a second is no movement.
    let rest: Vec<Move> = (0..60)
        .map(|i| at(i * 16, 500.0 + (i % 3) as f64, 500.0))
        .collect();
    let k = compute(&rest);
    assert_eq!(k.movements, 0.0);
    assert!(k.peak_speed_ratio.is_nan() && k.fitts_slope.is_nan());
    assert!(compute(&[]).moving_fraction.is_nan());
}
