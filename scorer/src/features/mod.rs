//! Per-session behavioural features, computed from a time-ordered [`SessionTrace`].
//!
//! Every feature is an `f64`; `NaN` means "not measurable for this session" (no key presses, so
//! no key timing) and is written as null and ignored by the model. Times are milliseconds,
//! distances CSS pixels.

use crate::trace::{Kind, SessionTrace, TraceEvent};

/// A gap between pointer moves longer than this ends a stroke and counts as a pause.
const PAUSE_MS: i64 = 300;
/// A click counts as approached when the pointer moved within this time before it.
const APPROACH_WINDOW_MS: i64 = 1000;
/// Key-to-key gaps above this are thinking, not typing rhythm.
const MAX_FLIGHT_MS: i64 = 2000;
/// Sampling intervals above this are pauses, not the sampling rate.
const MAX_SAMPLING_GAP_MS: i64 = 100;
/// A scroll counts as user-driven when a wheel, touch, key or pointer press came this soon
/// before it.
const SCROLL_CAUSE_MS: i64 = 600;
/// A text insertion counts as typed when a key went down this soon before it.
const INPUT_KEY_WINDOW_MS: i64 = 250;

macro_rules! features {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// The features of one session. Field order is the column order of `features/` files.
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct Features {
            $( $(#[$doc])* pub $name: f64, )*
        }

        impl Features {
            /// Feature names, in column order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Every feature unmeasured.
            pub fn unmeasured() -> Features {
                Features { $( $name: f64::NAN, )* }
            }

            /// Values in the order of [`Self::NAMES`].
            pub fn values(&self) -> Vec<f64> {
                vec![$(self.$name),*]
            }

            /// Features from values in the order of [`Self::NAMES`]; `None` unless there is
            /// exactly one value per feature.
            pub fn from_values(values: &[f64]) -> Option<Features> {
                let mut values = values.iter().copied();
                let features = Features { $( $name: values.next()?, )* };
                values.next().is_none().then_some(features)
            }

            /// The value of the feature called `name`.
            pub fn get(&self, name: &str) -> Option<f64> {
                match name {
                    $( stringify!($name) => Some(self.$name), )*
                    _ => None,
                }
            }
        }
    };
}

features! {
    /// Events in the session.
    event_count,
    /// Seconds from the first to the last event.
    duration_s,
    /// 1 when a `session` event said `webdriver: true`.
    webdriver,
    /// 1 when the user agent names a headless or automation browser.
    headless_user_agent,
    /// 1 when the screen or viewport sizes cannot belong to a real display.
    impossible_screen,
    /// 1 when no `session` event arrived (the embed always sends one).
    missing_session_event,
    /// 1 when a script answers `navigator.webdriver` instead of the browser (a stealth patch);
    /// unmeasured without an `environment` event (embeds before 1.1).
    webdriver_patched,
    /// 1 when globals of a driver or automation framework were in the page.
    automation_globals,
    /// 1 when WebGL draws on the CPU: headless browsers, but also some VMs and remote desktops.
    software_renderer,
    /// 1 when script-dispatched input came from an automation tool's page script (a DevTools
    /// protocol client evaluating in the page).
    automation_stack,
    /// Share of events that carry `trusted: false` among those that carry the flag.
    untrusted_fraction,
    /// Milliseconds from the first event to the first device interaction.
    time_to_first_interaction_ms,
    /// Most events in any one-second window.
    max_events_per_second,
    /// Pointer moves.
    pointer_moves,
    /// Mean pointer speed, px/ms.
    speed_mean,
    /// Coefficient of variation of pointer speed.
    speed_cv,
    /// Mean absolute acceleration, px/ms².
    acceleration_mean,
    /// Mean absolute jerk, px/ms³.
    jerk_mean,
    /// Mean absolute turning angle per move, radians.
    curvature_mean,
    /// Mean over strokes of straight-line displacement / path length (1 = ruler-straight).
    straightness,
    /// Normalized entropy (0..1) of the direction changes between moves, in 8 bins.
    direction_change_entropy,
    /// Gaps of more than 300 ms between pointer moves.
    pauses,
    /// Coefficient of variation of the intervals between pointer moves (under 100 ms).
    sampling_interval_cv,
    /// Pointing movements measured by [`crate::kinematics`] (no button held; at least 160 ms
    /// and 16 px).
    movements,
    /// Median peak over mean speed of a movement, resampled to 40 ms steps.
    movement_peak_speed_ratio,
    /// Median time of a movement's speed peak, as a share of its duration.
    movement_peak_time,
    /// Mean number of sub-movements (separate speed peaks) per movement.
    movement_submovements,
    /// Median largest distance from the chord over path length.
    movement_deviation,
    /// Median chord over path length of the resampled path.
    movement_efficiency,
    /// Median log dimensionless jerk of a movement (higher is smoother).
    movement_log_jerk,
    /// Slope of movement duration over Fitts's index of difficulty, ms per bit.
    fitts_slope_ms,
    /// Correlation of movement duration with Fitts's index of difficulty.
    fitts_correlation,
    /// Standard deviation of the log durations of pauses between movements (300 ms to 10 s).
    pause_log_sd,
    /// Time spent moving over the time from the first pointer move to the last.
    moving_fraction,
    /// Clicks (or presses where no click followed).
    clicks,
    /// Share of clicks with no pointer move in the second before them.
    clicks_without_approach,
    /// Mean press-to-release dwell of pointer buttons, ms.
    press_dwell_mean_ms,
    /// Share of clicks with no press or a press released within 5 ms.
    zero_dwell_clicks,
    /// Key presses (repeats excluded).
    key_presses,
    /// Mean key hold (down to up of the same class), ms.
    key_hold_mean_ms,
    /// Coefficient of variation of key holds.
    key_hold_cv,
    /// Mean flight (down to next down, under 2 s), ms.
    key_flight_mean_ms,
    /// Coefficient of variation of key flights.
    key_flight_cv,
    /// Standard deviation of log key holds (the spread of a lognormal rhythm, scale-free).
    key_hold_log_sd,
    /// Standard deviation of log key flights.
    key_flight_log_sd,
    /// Correlation of each log flight with the next: typing bursts and hesitations make a
    /// person's flights run in streaks.
    key_flight_lag1,
    /// Characters inserted by typing.
    typed_chars,
    /// Characters inserted by pasting.
    pasted_chars,
    /// pasted / (typed + pasted).
    paste_fraction,
    /// Share of text insertions with no key press just before them (set programmatically).
    input_without_keys,
    /// Scroll events.
    scrolls,
    /// Wheel events.
    wheels,
    /// Share of scrolls with no wheel, touch, key or press just before them.
    programmatic_scroll_fraction,
    /// Focus and blur events.
    focus_switches,
    /// Times the page became hidden.
    hidden_switches,
}

/// Computes the features of a finished (time-ordered) trace.
pub fn compute(trace: &SessionTrace) -> Features {
    let events = &trace.events;
    let mut f = Features::unmeasured();
    f.event_count = events.len() as f64;
    if let (Some(first), Some(last)) = (events.first(), events.last()) {
        f.duration_s = (last.t - first.t) as f64 / 1000.0;
    }
    environment(trace, &mut f);
    f.untrusted_fraction = {
        let flagged = events.iter().filter(|e| e.trusted.is_some()).count();
        let untrusted = events.iter().filter(|e| e.trusted == Some(false)).count();
        ratio(untrusted as f64, flagged as f64)
    };
    f.time_to_first_interaction_ms = match (
        events.first(),
        events.iter().find(|e| e.kind.is_interaction()),
    ) {
        (Some(first), Some(interaction)) => (interaction.t - first.t) as f64,
        _ => f64::NAN,
    };
    f.max_events_per_second = max_per_window(events, 1000) as f64;
    pointer(events, &mut f);
    clicks(events, &mut f);
    keys(events, &mut f);
    text_input(events, &mut f);
    scrolling(events, &mut f);
    f.focus_switches = count(events, |e| matches!(e.kind, Kind::Focus | Kind::Blur));
    f.hidden_switches = count(events, |e| e.kind == Kind::Visibility && e.hidden);
    f
}

fn environment(trace: &SessionTrace, f: &mut Features) {
    let Some(env) = &trace.environment else {
        f.missing_session_event = 1.0;
        f.webdriver = 0.0;
        f.headless_user_agent = 0.0;
        f.impossible_screen = 0.0;
        return;
    };
    f.missing_session_event = 0.0;
    f.webdriver = indicator(env.webdriver == Some(true));
    f.headless_user_agent = indicator(env.headless_agent());
    let bad_size = |value: Option<f64>| value.is_some_and(|v| !(1.0..=20_000.0).contains(&v));
    let larger = |viewport: Option<f64>, screen: Option<f64>| match (viewport, screen) {
        // Zoomed-out pages can show a viewport somewhat larger than the screen; twice is not a
        // real display.
        (Some(viewport), Some(screen)) => viewport > screen * 2.0 + 1.0,
        _ => false,
    };
    let tell = |value: Option<bool>| value.map_or(f64::NAN, indicator);
    f.webdriver_patched = tell(env.webdriver_patched);
    f.automation_globals = tell(env.automation_globals);
    f.software_renderer = tell(env.software_renderer);
    f.automation_stack = tell(env.automation_stack);
    f.impossible_screen = indicator(
        bad_size(env.screen_width)
            || bad_size(env.screen_height)
            || bad_size(env.viewport_width)
            || bad_size(env.viewport_height)
            || larger(env.viewport_width, env.screen_width)
            || larger(env.viewport_height, env.screen_height),
    );
}

fn pointer(events: &[TraceEvent], f: &mut Features) {
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
        let distance = (x1 - x0).hypot(y1 - y0);
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
    out.push(((x1 - x0).hypot(y1 - y0) / length).min(1.0));
}

fn clicks(events: &[TraceEvent], f: &mut Features) {
    let mut clicks = 0usize;
    let mut unapproached = 0usize;
    let mut zero_dwell = 0usize;
    let mut dwells = Vec::new();
    let mut last_move: Option<i64> = None;
    let mut pressed_at: Option<i64> = None;
    let mut last_dwell: Option<i64> = None;
    for event in events {
        match event.kind {
            Kind::PointerMove | Kind::TouchMove => last_move = Some(event.t),
            Kind::PointerDown | Kind::TouchStart => {
                pressed_at = Some(event.t);
                last_dwell = None;
            }
            Kind::PointerUp | Kind::TouchEnd => {
                if let Some(down) = pressed_at.take() {
                    let dwell = event.t - down;
                    dwells.push(dwell as f64);
                    last_dwell = Some(dwell);
                }
            }
            Kind::Click => {
                clicks += 1;
                if last_move.is_none_or(|t| event.t - t > APPROACH_WINDOW_MS) {
                    unapproached += 1;
                }
                if last_dwell.is_none_or(|dwell| dwell <= 5) {
                    zero_dwell += 1;
                }
                last_dwell = None;
            }
            _ => {}
        }
    }
    f.clicks = clicks as f64;
    f.clicks_without_approach = ratio(unapproached as f64, clicks as f64);
    f.zero_dwell_clicks = ratio(zero_dwell as f64, clicks as f64);
    f.press_dwell_mean_ms = mean(&dwells);
}

fn keys(events: &[TraceEvent], f: &mut Features) {
    let mut holds = Vec::new();
    let mut flights = Vec::new();
    let mut presses = 0usize;
    let mut last_down: Option<i64> = None;
    // Pending presses per key class: a release ends the oldest press of its class.
    let mut pending: Vec<(crate::trace::KeyClass, i64)> = Vec::new();
    for event in events {
        match event.kind {
            Kind::KeyDown if !event.repeat => {
                presses += 1;
                if let Some(previous) = last_down
                    && event.t - previous <= MAX_FLIGHT_MS
                {
                    flights.push((event.t - previous) as f64);
                }
                last_down = Some(event.t);
                pending.push((event.key_class, event.t));
            }
            Kind::KeyUp => {
                if let Some(index) = pending
                    .iter()
                    .position(|(class, _)| *class == event.key_class)
                {
                    let (_, down) = pending.remove(index);
                    holds.push((event.t - down) as f64);
                }
            }
            _ => {}
        }
        if pending.len() > 16 {
            pending.remove(0);
        }
    }
    f.key_presses = presses as f64;
    f.key_hold_mean_ms = mean(&holds);
    f.key_hold_cv = cv(&holds);
    f.key_flight_mean_ms = mean(&flights);
    f.key_flight_cv = cv(&flights);
    let logs = |values: &[f64]| -> Vec<f64> {
        values
            .iter()
            .filter(|v| **v > 0.0)
            .map(|v| v.ln())
            .collect()
    };
    let (log_holds, log_flights) = (logs(&holds), logs(&flights));
    if log_holds.len() >= 3 {
        f.key_hold_log_sd = crate::kinematics::sd(&log_holds);
    }
    if log_flights.len() >= 3 {
        f.key_flight_log_sd = crate::kinematics::sd(&log_flights);
    }
    if log_flights.len() >= 5 {
        f.key_flight_lag1 = lag1_correlation(&log_flights);
    }
}

/// Correlation of each value with the next; `NaN` when the values do not vary.
fn lag1_correlation(values: &[f64]) -> f64 {
    let m = mean(values);
    let variance: f64 = values.iter().map(|v| (v - m).powi(2)).sum();
    if variance <= 0.0 {
        return f64::NAN;
    }
    let covariance: f64 = values.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    covariance / variance
}

fn text_input(events: &[TraceEvent], f: &mut Features) {
    let mut typed = 0.0;
    let mut pasted = 0.0;
    let mut insertions = 0usize;
    let mut keyless = 0usize;
    let mut last_key: Option<i64> = None;
    let mut last_paste: Option<i64> = None;
    for event in events {
        match event.kind {
            Kind::KeyDown => last_key = Some(event.t),
            Kind::Paste => {
                pasted += f64::from(event.amount.max(0.0));
                last_paste = Some(event.t);
            }
            Kind::Input if event.inserts_text => {
                let from_paste = last_paste.is_some_and(|t| event.t - t <= INPUT_KEY_WINDOW_MS);
                if from_paste {
                    last_paste = None;
                    continue;
                }
                insertions += 1;
                if last_key.is_some_and(|t| event.t - t <= INPUT_KEY_WINDOW_MS) {
                    typed += f64::from(event.amount.max(1.0));
                } else {
                    keyless += 1;
                }
            }
            _ => {}
        }
    }
    f.typed_chars = typed;
    f.pasted_chars = pasted;
    f.paste_fraction = ratio(pasted, typed + pasted);
    f.input_without_keys = ratio(keyless as f64, insertions as f64);
}

fn scrolling(events: &[TraceEvent], f: &mut Features) {
    let mut scrolls = 0usize;
    let mut uncaused = 0usize;
    let mut last_cause: Option<i64> = None;
    for event in events {
        match event.kind {
            // Pointer moves are not marked with a pressed button, so dragging the scrollbar is
            // recognised by its press.
            Kind::Wheel
            | Kind::TouchMove
            | Kind::TouchStart
            | Kind::KeyDown
            | Kind::PointerDown => {
                last_cause = Some(event.t);
            }
            Kind::Scroll => {
                scrolls += 1;
                if last_cause.is_none_or(|t| event.t - t > SCROLL_CAUSE_MS) {
                    uncaused += 1;
                }
            }
            _ => {}
        }
    }
    f.scrolls = scrolls as f64;
    f.wheels = count(events, |e| e.kind == Kind::Wheel);
    f.programmatic_scroll_fraction = ratio(uncaused as f64, scrolls as f64);
}

/// The most events within any window of `window_ms` (events in time order).
fn max_per_window(events: &[TraceEvent], window_ms: i64) -> usize {
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
fn derivative(samples: &[(i64, f64)]) -> Vec<(i64, f64)> {
    derivatives(samples).collect()
}

fn derivatives(samples: &[(i64, f64)]) -> impl Iterator<Item = (i64, f64)> + '_ {
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

fn wrap_angle(angle: f64) -> f64 {
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

fn count(events: &[TraceEvent], predicate: impl Fn(&TraceEvent) -> bool) -> f64 {
    events.iter().filter(|e| predicate(e)).count() as f64
}

fn indicator(value: bool) -> f64 {
    if value { 1.0 } else { 0.0 }
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { f64::NAN }
}

fn mean(values: &[f64]) -> f64 {
    mean_of(values.iter().copied())
}

/// The mean of the values in order (`sum` then divide, as over a slice); `NaN` for none.
fn mean_of(values: impl Iterator<Item = f64>) -> f64 {
    let mut n = 0usize;
    let sum = values.inspect(|_| n += 1).sum::<f64>();
    if n == 0 {
        return f64::NAN;
    }
    sum / n as f64
}

/// Standard deviation over mean; `NaN` for fewer than 3 values or a zero mean.
fn cv(values: &[f64]) -> f64 {
    cv_of(values.iter().copied())
}

fn cv_of(values: impl Iterator<Item = f64> + Clone) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Environment, KeyClass};

    #[test]
    fn features_come_back_from_their_values_and_only_from_one_per_feature() {
        let values: Vec<f64> = (0..Features::NAMES.len()).map(|i| i as f64 * 0.5).collect();
        let features = Features::from_values(&values).expect("one value per feature");
        assert_eq!(features.values(), values);
        assert_eq!(features.get(Features::NAMES[3]), Some(1.5));
        assert!(Features::from_values(&values[1..]).is_none());
        let mut more = values.clone();
        more.push(0.0);
        assert!(Features::from_values(&more).is_none());
    }

    fn trace(events: Vec<TraceEvent>) -> SessionTrace {
        let mut trace = SessionTrace {
            events,
            environment: Some(Box::default()),
        };
        trace.finish();
        trace
    }

    fn mv(t: i64, x: i32, y: i32) -> TraceEvent {
        TraceEvent::new(t, Kind::PointerMove).at(x, y).trusted(true)
    }

    fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-9,
            "expected {expected}, got {actual}"
        );
    }

    #[test]
    fn counts_duration_rate_and_first_interaction() {
        let f = compute(&trace(vec![
            TraceEvent::new(1_000, Kind::Session),
            TraceEvent::new(1_400, Kind::Focus),
            mv(1_750, 0, 0),
            mv(1_760, 1, 0),
            mv(1_770, 2, 0),
            TraceEvent::new(3_000, Kind::Blur),
        ]));
        close(f.event_count, 6.0);
        close(f.duration_s, 2.0);
        close(f.time_to_first_interaction_ms, 750.0);
        // 1000 through 1770 lie within one second.
        close(f.max_events_per_second, 5.0);
        close(f.focus_switches, 2.0);
    }

    #[test]
    fn environment_tells() {
        let mut t = trace(vec![TraceEvent::new(0, Kind::Session)]);
        t.environment = Some(Box::new(Environment {
            webdriver: Some(true),
            user_agent: Some("Mozilla/5.0 HeadlessChrome/131".to_owned()),
            screen_width: Some(0.0),
            screen_height: Some(0.0),
            ..Environment::default()
        }));
        let f = compute(&t);
        close(f.webdriver, 1.0);
        close(f.headless_user_agent, 1.0);
        close(f.impossible_screen, 1.0);
        close(f.missing_session_event, 0.0);

        let mut t = trace(vec![TraceEvent::new(0, Kind::Session)]);
        t.environment = Some(Box::new(Environment {
            webdriver: Some(false),
            user_agent: Some("Mozilla/5.0 Chrome/131".to_owned()),
            screen_width: Some(1920.0),
            screen_height: Some(1080.0),
            viewport_width: Some(1280.0),
            viewport_height: Some(720.0),
            ..Environment::default()
        }));
        let f = compute(&t);
        close(
            f.webdriver + f.headless_user_agent + f.impossible_screen,
            0.0,
        );

        let mut t = trace(vec![mv(0, 0, 0)]);
        t.environment = None;
        close(compute(&t).missing_session_event, 1.0);
    }

    #[test]
    fn environment_event_tells_are_booleans_kept_once_seen_and_unmeasured_when_never_sent() {
        let session = Environment::from_session_payload(
            r#"{"type":"session","timestamp":1,"data":{"webdriver":false,"userAgent":"Chrome"}}"#,
        )
        .expect("session payload");
        let first = Environment::from_environment_payload(
            r#"{"type":"environment","timestamp":2,"data":{"webdriverPatched":true,
                "automationGlobals":false,"softwareRenderer":null,"automationStack":false}}"#,
        )
        .expect("environment payload");
        let later = Environment::from_environment_payload(
            r#"{"type":"environment","timestamp":3,"data":{"webdriverPatched":false,
                "automationStack":true}}"#,
        )
        .expect("environment payload");
        let mut t = trace(vec![TraceEvent::new(0, Kind::Session)]);
        t.environment = None;
        t.add_environment(session);
        let f = compute(&t);
        assert!(f.webdriver_patched.is_nan() && f.automation_stack.is_nan());
        t.add_environment(first);
        t.add_environment(later);
        let f = compute(&t);
        close(f.webdriver_patched, 1.0);
        close(f.automation_globals, 0.0);
        close(f.automation_stack, 1.0);
        // null: the page had no WebGL to judge.
        assert!(f.software_renderer.is_nan());
        close(f.webdriver, 0.0);
    }

    #[test]
    fn untrusted_fraction_counts_only_flagged_events() {
        let f = compute(&trace(vec![
            mv(0, 0, 0),
            TraceEvent::new(10, Kind::Click).trusted(false),
            TraceEvent::new(20, Kind::KeyDown).trusted(false),
            TraceEvent::new(30, Kind::Scroll),
        ]));
        close(f.untrusted_fraction, 2.0 / 3.0);
    }

    #[test]
    fn straight_constant_speed_path_has_no_curvature_and_full_straightness() {
        let moves: Vec<TraceEvent> = (0..20).map(|i| mv(i * 16, i as i32 * 8, 0)).collect();
        let f = compute(&trace(moves));
        close(f.pointer_moves, 20.0);
        close(f.speed_mean, 0.5);
        close(f.speed_cv, 0.0);
        close(f.acceleration_mean, 0.0);
        close(f.jerk_mean, 0.0);
        close(f.curvature_mean, 0.0);
        close(f.straightness, 1.0);
        close(f.direction_change_entropy, 0.0);
        close(f.sampling_interval_cv, 0.0);
        close(f.pauses, 0.0);
    }

    #[test]
    fn a_right_angle_turn_and_a_pause() {
        // East 100 px in 10 steps, a 500 ms pause, then north 100 px.
        let mut moves: Vec<TraceEvent> = (0..=10).map(|i| mv(i * 10, i as i32 * 10, 0)).collect();
        moves.extend((1..=10).map(|i| mv(600 + i * 10, 100, -(i as i32) * 10)));
        let f = compute(&trace(moves));
        close(f.pauses, 1.0);
        // Both strokes are straight.
        close(f.straightness, 1.0);
        // The move that ends the pause starts a stroke and has no heading: 10 headings east,
        // 9 north, so one turn of π/2 among 18.
        close(f.curvature_mean, std::f64::consts::FRAC_PI_2 / 18.0);
        assert!(f.direction_change_entropy > 0.0 && f.direction_change_entropy < 0.2);
    }

    #[test]
    fn accelerating_path_has_acceleration_and_varied_speed() {
        // x = t² / 100 sampled every 10 ms: speed grows linearly, constant acceleration.
        let moves: Vec<TraceEvent> = (0..30)
            .map(|i| {
                let t = i * 10;
                mv(t, (t * t / 100) as i32, 0)
            })
            .collect();
        let f = compute(&trace(moves));
        assert!(f.acceleration_mean > 0.0);
        assert!(f.speed_cv > 0.3, "{}", f.speed_cv);
        close(f.straightness, 1.0);
    }

    #[test]
    fn clicks_with_and_without_approach_and_dwell() {
        let f = compute(&trace(vec![
            mv(0, 10, 10),
            mv(16, 12, 11),
            TraceEvent::new(100, Kind::PointerDown),
            TraceEvent::new(190, Kind::PointerUp),
            TraceEvent::new(191, Kind::Click),
            // Five seconds later, a click out of nowhere with no press at all.
            TraceEvent::new(5_000, Kind::Click),
            // And a press released at once.
            TraceEvent::new(6_000, Kind::PointerDown),
            TraceEvent::new(6_001, Kind::PointerUp),
            TraceEvent::new(6_001, Kind::Click),
        ]));
        close(f.clicks, 3.0);
        close(f.clicks_without_approach, 2.0 / 3.0);
        close(f.zero_dwell_clicks, 2.0 / 3.0);
        close(f.press_dwell_mean_ms, 45.5);
    }

    #[test]
    fn key_holds_flights_and_their_regularity() {
        let mut events = Vec::new();
        // Metronome: a key every 50 ms, held 0 ms.
        for i in 0..10 {
            events.push(TraceEvent::new(i * 50, Kind::KeyDown).key(KeyClass::Char));
            events.push(TraceEvent::new(i * 50, Kind::KeyUp).key(KeyClass::Char));
        }
        let f = compute(&trace(events));
        close(f.key_presses, 10.0);
        close(f.key_flight_mean_ms, 50.0);
        close(f.key_flight_cv, 0.0);
        close(f.key_hold_mean_ms, 0.0);

        // Overlapping presses of different classes pair by class.
        let f = compute(&trace(vec![
            TraceEvent::new(0, Kind::KeyDown).key(KeyClass::Modifier),
            TraceEvent::new(100, Kind::KeyDown).key(KeyClass::Char),
            TraceEvent::new(180, Kind::KeyUp).key(KeyClass::Char),
            TraceEvent::new(300, Kind::KeyUp).key(KeyClass::Modifier),
            // Thinking for 5 s is not a flight.
            TraceEvent::new(5_300, Kind::KeyDown).key(KeyClass::Char),
            TraceEvent::new(5_360, Kind::KeyUp).key(KeyClass::Char),
        ]));
        close(f.key_presses, 3.0);
        close(f.key_hold_mean_ms, (80.0 + 300.0 + 60.0) / 3.0);
        close(f.key_flight_mean_ms, 100.0);
        assert!(f.key_flight_cv.is_nan(), "fewer than three flights");
    }

    #[test]
    fn log_spreads_and_streaks_of_key_timing() {
        // Flights in streaks: three fast (100 ms), three slow (400 ms), three fast; holds of
        // 50 and 90 ms alternate (each released before the next press).
        let flights = [100, 100, 100, 400, 400, 400, 100, 100, 100];
        let mut events = Vec::new();
        let mut t = 0;
        for i in 0..=flights.len() {
            let hold = if i % 2 == 0 { 50 } else { 90 };
            events.push(TraceEvent::new(t, Kind::KeyDown).key(KeyClass::Char));
            events.push(TraceEvent::new(t + hold, Kind::KeyUp).key(KeyClass::Char));
            t += flights.get(i).copied().unwrap_or(0);
        }
        let f = compute(&trace(events));
        // An even split of ln 50 and ln 90: sd = (ln 90 - ln 50) / 2.
        close(f.key_hold_log_sd, (90f64 / 50.0).ln() / 2.0);
        let logs: Vec<f64> = flights.iter().map(|v| (*v as f64).ln()).collect();
        close(f.key_flight_log_sd, crate::kinematics::sd(&logs));
        assert!(f.key_flight_lag1 > 0.4, "{}", f.key_flight_lag1);
        // A metronome has no spread and no streaks to measure.
        let mut events = Vec::new();
        for i in 0..10 {
            events.push(TraceEvent::new(i * 120, Kind::KeyDown).key(KeyClass::Char));
            events.push(TraceEvent::new(i * 120 + 80, Kind::KeyUp).key(KeyClass::Char));
        }
        let f = compute(&trace(events));
        close(f.key_flight_log_sd, 0.0);
        assert!(f.key_flight_lag1.is_nan());
    }

    #[test]
    fn typed_pasted_and_keyless_text() {
        let insert = |t, n: f32| {
            let mut e = TraceEvent::new(t, Kind::Input).amount(n);
            e.inserts_text = true;
            e
        };
        let f = compute(&trace(vec![
            TraceEvent::new(0, Kind::KeyDown).key(KeyClass::Char),
            insert(2, 1.0),
            TraceEvent::new(200, Kind::KeyDown).key(KeyClass::Char),
            insert(203, 1.0),
            TraceEvent::new(1_000, Kind::Paste).amount(30.0),
            insert(1_001, 30.0),
            // Set programmatically: no key, no paste.
            insert(5_000, 12.0),
        ]));
        close(f.typed_chars, 2.0);
        close(f.pasted_chars, 30.0);
        close(f.paste_fraction, 30.0 / 32.0);
        close(f.input_without_keys, 1.0 / 3.0);
    }

    #[test]
    fn scrolls_with_and_without_a_cause() {
        let f = compute(&trace(vec![
            TraceEvent::new(0, Kind::Wheel).amount(100.0),
            TraceEvent::new(20, Kind::Scroll),
            TraceEvent::new(3_000, Kind::Scroll),
            TraceEvent::new(9_000, Kind::KeyDown).key(KeyClass::Arrow),
            TraceEvent::new(9_050, Kind::Scroll),
        ]));
        close(f.scrolls, 3.0);
        close(f.wheels, 1.0);
        close(f.programmatic_scroll_fraction, 1.0 / 3.0);
    }

    #[test]
    fn visibility_switches() {
        let mut hidden = TraceEvent::new(10, Kind::Visibility);
        hidden.hidden = true;
        let f = compute(&trace(vec![
            hidden,
            TraceEvent::new(20, Kind::Visibility),
            hidden,
        ]));
        close(f.hidden_switches, 2.0);
    }

    #[test]
    fn an_empty_trace_measures_nothing_but_counts() {
        let f = compute(&trace(Vec::new()));
        close(f.event_count, 0.0);
        assert!(f.speed_mean.is_nan());
        assert!(f.key_flight_mean_ms.is_nan());
        assert!(f.time_to_first_interaction_ms.is_nan());
    }

    #[test]
    fn names_and_values_line_up() {
        let f = compute(&trace(vec![mv(0, 0, 0)]));
        assert_eq!(Features::NAMES.len(), f.values().len());
        for (index, name) in Features::NAMES.iter().enumerate() {
            let by_name = f.get(name).expect("every name resolves");
            let by_index = f.values()[index];
            assert!(by_name.to_bits() == by_index.to_bits(), "{name}");
        }
    }
}
