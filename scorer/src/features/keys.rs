//! Key timing, text input and keyboard navigation.
//!
//! Timing is measured on the keys that type or edit text, as key-down to next key-down
//! ("flight") and key-down to key-up ("hold"): a modifier is pressed around other keys, not in
//! the rhythm of typing, and its hold spans the key it modifies. A phone's soft keyboard sends
//! unidentified keys (`other`) whose down and up come together as a character is committed:
//! their flights are the soft keyboard's rhythm, their holds nothing.

use super::Features;
use super::stats::{cv, mean, ratio};
use crate::trace::{KeyClass, Kind, TraceEvent};

/// Key-to-key gaps above this are thinking, not typing rhythm.
const MAX_FLIGHT_MS: i64 = 2000;
/// A text insertion counts as typed when a key went down this soon before it.
const INPUT_KEY_WINDOW_MS: i64 = 250;
/// A field's focus counts as reached by keyboard when Tab went down this soon before it.
const TAB_FOCUS_WINDOW_MS: i64 = 150;

pub(super) fn keys(events: &[TraceEvent], f: &mut Features) {
    let mut holds = Vec::new();
    let mut flights = Vec::new();
    let mut presses = 0usize;
    let mut free = 0usize;
    let mut last_down: Option<i64> = None;
    // Pending presses per key class: a release ends the oldest press of its class.
    let mut pending: Vec<(KeyClass, i64)> = Vec::new();
    for event in events {
        match event.kind {
            Kind::KeyDown if !event.repeat => {
                presses += 1;
                if event.key_class == KeyClass::Modifier {
                    continue;
                }
                free += 1;
                if let Some(previous) = last_down
                    && event.t - previous <= MAX_FLIGHT_MS
                {
                    flights.push((event.t - previous) as f64);
                }
                last_down = Some(event.t);
                pending.push((event.key_class, event.t));
            }
            // A soft keyboard reports its keys as unidentified (`other`), down and up together
            // when the character is committed: no hold to measure.
            Kind::KeyUp if !matches!(event.key_class, KeyClass::Modifier | KeyClass::Other) => {
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
    f.free_keystrokes = free as f64;
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

pub(super) fn text_input(events: &[TraceEvent], f: &mut Features) {
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

/// How fields were reached: the share of field focus changes that followed a Tab press.
pub(super) fn tab_focus(events: &[TraceEvent], f: &mut Features) {
    let mut focused = 0usize;
    let mut by_tab = 0usize;
    let mut last_tab: Option<i64> = None;
    for event in events {
        match event.kind {
            Kind::KeyDown if event.key_class == KeyClass::Tab => last_tab = Some(event.t),
            Kind::FieldFocus => {
                focused += 1;
                if last_tab.is_some_and(|t| event.t - t <= TAB_FOCUS_WINDOW_MS) {
                    by_tab += 1;
                }
            }
            _ => {}
        }
    }
    f.tab_focus_fraction = ratio(by_tab as f64, focused as f64);
}
