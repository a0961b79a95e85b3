//! Touch: taps (how long a finger rests), swipes (the kinematics of a finger's path, measured as
//! pointing movements are) and the contact's geometry where the browser reports it.
//!
//! The embed sends the first changed touch of each `touchstart`, `touchmove` (one per 16 ms)
//! and `touchend`; a second finger's touches are read as the first's.

use super::Features;
use super::stats::{cv, mean};
use crate::kinematics::{self, Move};
use crate::trace::{Kind, TraceEvent};

/// A touch released within this time, this close to where it began, is a tap.
const TAP_MAX_MS: i64 = 500;
const TAP_MAX_PX: f64 = 10.0;
/// A touch that got this far from where it began is a swipe (a scroll or a drag).
const SWIPE_MIN_PX: f64 = 30.0;

/// One finger on the screen.
struct Contact {
    start: i64,
    x: f64,
    y: f64,
    farthest: f64,
    moves: Vec<Move>,
}

pub(super) fn touch(events: &[TraceEvent], f: &mut Features) {
    let mut contact: Option<Contact> = None;
    let mut taps = 0usize;
    let mut dwells = Vec::new();
    let mut swipe_moves: Vec<Move> = Vec::new();
    let mut swipes = 0usize;
    let mut radii = Vec::new();
    let mut forces = Vec::new();
    for event in events {
        let position = event
            .x
            .zip(event.y)
            .map(|(x, y)| (f64::from(x), f64::from(y)));
        match event.kind {
            Kind::TouchStart => {
                if event.radius > 0.0 {
                    radii.push(f64::from(event.radius));
                }
                if event.force > 0 {
                    forces.push(f64::from(event.force) / 100.0);
                }
                contact = position.map(|(x, y)| Contact {
                    start: event.t,
                    x,
                    y,
                    farthest: 0.0,
                    moves: vec![Move {
                        t: event.t,
                        x,
                        y,
                        starts_stroke: true,
                    }],
                });
            }
            Kind::TouchMove => {
                if let (Some(contact), Some((x, y))) = (contact.as_mut(), position) {
                    contact.farthest = contact
                        .farthest
                        .max(crate::kinematics::distance(x - contact.x, y - contact.y));
                    contact.moves.push(Move {
                        t: event.t,
                        x,
                        y,
                        starts_stroke: false,
                    });
                }
            }
            Kind::TouchEnd => {
                let Some(mut ended) = contact.take() else {
                    continue;
                };
                if let Some((x, y)) = position {
                    ended.farthest = ended
                        .farthest
                        .max(crate::kinematics::distance(x - ended.x, y - ended.y));
                }
                let dwell = event.t - ended.start;
                if ended.farthest < TAP_MAX_PX && dwell <= TAP_MAX_MS {
                    taps += 1;
                    dwells.push(dwell as f64);
                } else if ended.farthest >= SWIPE_MIN_PX {
                    swipes += 1;
                    swipe_moves.append(&mut ended.moves);
                }
            }
            _ => {}
        }
    }
    f.touch_taps = taps as f64;
    f.touch_swipes = swipes as f64;
    f.tap_dwell_mean_ms = mean(&dwells);
    let log_dwells: Vec<f64> = dwells
        .iter()
        .filter(|d| **d > 0.0)
        .map(|d| d.ln())
        .collect();
    if log_dwells.len() >= 3 {
        f.tap_dwell_log_sd = kinematics::sd(&log_dwells);
    }
    f.touch_radius_cv = cv(&radii);
    f.touch_force_cv = cv(&forces);
    if !swipe_moves.is_empty() {
        let k = kinematics::compute(&swipe_moves);
        f.swipe_peak_time = k.peak_time;
        f.swipe_efficiency = k.efficiency;
        f.swipe_log_jerk = k.log_jerk;
    }
}
