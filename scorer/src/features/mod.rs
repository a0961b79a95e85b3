//! Per-session behavioural features, computed from a time-ordered [`SessionTrace`].
//!
//! Every feature is an `f64`; `NaN` means "not measurable for this session" (no key presses, so
//! no key timing) and is written as null and ignored by the model. Times are milliseconds,
//! distances CSS pixels.
//!
//! - `pointer`: pointer kinematics per move, clicks and where presses land on their targets;
//!   movement-level kinematics are [`crate::kinematics`]'s.
//! - `keys`: key timing (modifiers and repeats left out), text input, keyboard navigation.
//! - `touch`: taps, swipes and the contact's geometry.
//! - `activity`: scrolling, focus and visibility.
//! - `transport`: how the session's requests arrived, against the events' own clocks.
//! - `channel`: how input reached the page (embed 1.4's `delivery` counts).
//! - `content`: the pages' words against the time spent on them (embed 1.4's `page` events).
//! - `stats`: the small statistics they share.

use crate::trace::{Kind, SessionTrace};

mod activity;
mod channel;
mod content;
mod keys;
mod pointer;
mod stats;
mod touch;
mod transport;

use stats::{count, indicator, max_per_window, ratio};

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

            /// Sets the feature called `name`; false when there is none.
            pub fn set(&mut self, name: &str, value: f64) -> bool {
                match name {
                    $( stringify!($name) => { self.$name = value; true } )*
                    _ => false,
                }
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
    /// Share of a mouse's clicks with no pointer move in the second before them (clicks of a
    /// key, a finger or a label's follow-on left out).
    clicks_without_approach,
    /// Mean press-to-release dwell of pointer buttons, ms.
    press_dwell_mean_ms,
    /// Share of pointer clicks with no press or a press released within 5 ms (clicks of a key
    /// or a label's follow-on left out).
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
    /// Key presses that type or edit text (every class but modifiers; repeats excluded): the
    /// keyboard's evidence.
    free_keystrokes,
    /// Touches released within 500 ms, less than 10 px from where they began.
    touch_taps,
    /// Touches that moved at least 30 px before their release.
    touch_swipes,
    /// Mean touch-down to touch-up of taps, ms.
    tap_dwell_mean_ms,
    /// Standard deviation of the log tap dwells.
    tap_dwell_log_sd,
    /// Coefficient of variation of the contact radius at touch starts, where the browser
    /// reports one.
    touch_radius_cv,
    /// Coefficient of variation of the contact force at touch starts, where the browser reports
    /// one.
    touch_force_cv,
    /// Median time of a swipe's speed peak, as a share of its duration.
    swipe_peak_time,
    /// Median chord over path length of swipes.
    swipe_efficiency,
    /// Median log dimensionless jerk of swipes (higher is smoother).
    swipe_log_jerk,
    /// Root mean square distance of presses from their own mean landing point on their targets,
    /// in target half-sizes (embed 1.3): how much aim varies.
    press_offset_spread,
    /// Share of presses landing within 2 % of their target's exact centre (embed 1.3).
    press_centre_fraction,
    /// Share of field focus changes made with the Tab key (embed 1.3).
    tab_focus_fraction,
    /// Share of events that arrived more than 30 s later, by their own clock, than the
    /// session's most promptly delivered events: a recording posted in bulk.
    late_event_fraction,
    /// 1 when one request carried more events than the embed puts in a batch.
    oversized_batch,
    /// 1 when the `session` event names no version the embed has had.
    unknown_embed,
    /// Share of mouse presses reporting no pressure (embed 1.4): a mouse reports 0.5 while a
    /// button is down, input injected without a force 0.
    zero_pressure_presses,
    /// Share of mouse moves carrying more than one coalesced sample (embed 1.4): a device
    /// sampling faster than the screen draws; injected moves carry one each.
    multi_sample_move_fraction,
    /// Page views (embed 1.4's `page` events: a page shown or its content changed).
    page_views,
    /// Visible words over the page views.
    page_words,
    /// Median words a minute over page views of at least 20 words.
    reading_wpm,
    /// Share of those views whose words went by faster than anyone reads
    /// ([`content::SKIM_LIMIT_WPM`]).
    fast_page_fraction,
    /// Spread of the log time to the first press or key across page views (3 or more).
    first_action_log_sd,
    /// Correlation across page views of the log time to the first press or key with the log
    /// words shown: a reader's latency follows the page's length.
    first_action_words_correlation,
    /// Other sessions of the scoring run's survey that behave alike with this one
    /// ([`crate::cohort`]); set by the run, unmeasured for a session too sparse to place.
    cohort_alike,
}

/// Every `embedVersion` the official embed has sent.
const EMBED_VERSIONS: &[&str] = &["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"];

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
    pointer::pointer(events, &mut f);
    pointer::clicks(events, &mut f);
    pointer::press_offsets(events, &mut f);
    keys::keys(events, &mut f);
    keys::text_input(events, &mut f);
    keys::tab_focus(events, &mut f);
    touch::touch(events, &mut f);
    activity::scrolling(events, &mut f);
    f.focus_switches = count(events, |e| matches!(e.kind, Kind::Focus | Kind::Blur));
    f.hidden_switches = count(events, |e| e.kind == Kind::Visibility && e.hidden);
    transport::transport(events, &mut f);
    channel::channel(trace.delivery.as_deref(), &mut f);
    content::content(events, &mut f);
    f
}

fn environment(trace: &SessionTrace, f: &mut Features) {
    let Some(env) = &trace.environment else {
        f.missing_session_event = 1.0;
        f.webdriver = 0.0;
        f.headless_user_agent = 0.0;
        f.impossible_screen = 0.0;
        f.unknown_embed = 1.0;
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
    f.unknown_embed = indicator(
        env.embed_version
            .as_deref()
            .is_none_or(|version| !EMBED_VERSIONS.contains(&version)),
    );
    f.impossible_screen = indicator(
        bad_size(env.screen_width)
            || bad_size(env.screen_height)
            || bad_size(env.viewport_width)
            || bad_size(env.viewport_height)
            || larger(env.viewport_width, env.screen_width)
            || larger(env.viewport_height, env.screen_height),
    );
}

#[cfg(test)]
mod tests;
