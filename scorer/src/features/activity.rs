//! Scrolling: how much, and whether something a person does caused it.

use super::Features;
use super::stats::{count, ratio};
use crate::trace::{Kind, TraceEvent};

/// A scroll counts as user-driven when a wheel, touch, key or pointer press came this soon
/// before it.
const SCROLL_CAUSE_MS: i64 = 600;

pub(super) fn scrolling(events: &[TraceEvent], f: &mut Features) {
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
