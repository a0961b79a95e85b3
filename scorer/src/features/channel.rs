//! How input reached the page (embed 1.4's `delivery` counts): facts a browser reports about
//! where an event came from, whatever path or timing a generator drew.
//!
//! Measured on Chromium 156 (docs/scoring.md, "How input reached the page"): a hardware mouse's
//! press reports a pressure of 0.5 while its button is down, and a press injected through the
//! DevTools protocol without a `force` reports 0 (Playwright sends 0.5 since 1.53; a raw
//! `Input.dispatchMouseEvent` does not). A mouse sampling faster than the screen draws hands
//! the page several coalesced samples per move; injected moves carry one each. Not kept:
//! injected events' screen coordinates, which Chromium 156 offsets by the window's place on the
//! screen exactly as it does a device's, headless or not.

use super::Features;
use super::stats::ratio;
use crate::trace::Delivery;

pub(super) fn channel(delivery: Option<&Delivery>, f: &mut Features) {
    let Some(d) = delivery else {
        return;
    };
    f.zero_pressure_presses = ratio(
        f64::from(d.zero_pressure_presses),
        f64::from(d.mouse_presses),
    );
    f.multi_sample_move_fraction =
        ratio(f64::from(d.multi_sample_moves), f64::from(d.sampled_moves));
}
