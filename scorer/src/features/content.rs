//! The pages' content against the time spent on them (embed 1.4's `page` events: visible words
//! and controls each time a page was shown or its content changed).
//!
//! A page view runs from its `page` event to the next `page` or `session` event, or to the
//! session's last event. Reading bounds: adults read silently at about 175-300 words a minute
//! (Brysbaert 2019) and skim at two to three times that; a view whose words went by faster than
//! [`SKIM_LIMIT_WPM`] was not read. A person's time to their first press or key on a page
//! grows with what the page asks them to read; an agent paced by a clock takes as long on a
//! page of ten words as on one of two hundred.

use super::Features;
use super::stats::ratio;
use crate::kinematics::{median, regression, sd};
use crate::trace::{Kind, TraceEvent};

/// Words a minute above which a page cannot have been read: over three times the upper end of
/// adult silent reading (300 words a minute), past skimming.
pub(super) const SKIM_LIMIT_WPM: f64 = 1000.0;
/// A view with fewer words says little about reading.
const MIN_WORDS: f32 = 20.0;
/// Views with a first action needed for the spread and the correlation of its latency.
const MIN_VIEWS: usize = 3;

struct View {
    words: f64,
    duration_ms: i64,
    first_action_ms: Option<i64>,
}

fn views(events: &[TraceEvent]) -> Vec<View> {
    let Some(last) = events.last() else {
        return Vec::new();
    };
    let mut views = Vec::new();
    for (index, start) in events.iter().enumerate() {
        if start.kind != Kind::Page {
            continue;
        }
        let rest = &events[index + 1..];
        let during = rest
            .iter()
            .position(|e| matches!(e.kind, Kind::Page | Kind::Session))
            .map_or(rest, |end| &rest[..end]);
        // The next view's start closes this one; the session's last event closes the last.
        let end_t = rest.get(during.len()).map_or(last.t, |next| next.t);
        let first_action_ms = during
            .iter()
            .find(|e| {
                matches!(
                    e.kind,
                    Kind::PointerDown | Kind::KeyDown | Kind::TouchStart | Kind::Click
                )
            })
            .map(|e| e.t - start.t);
        views.push(View {
            words: f64::from(start.amount),
            duration_ms: end_t - start.t,
            first_action_ms,
        });
    }
    views
}

pub(super) fn content(events: &[TraceEvent], f: &mut Features) {
    let views = views(events);
    if views.is_empty() {
        return;
    }
    f.page_views = views.len() as f64;
    f.page_words = views.iter().map(|v| v.words).sum();
    let readable: Vec<&View> = views
        .iter()
        .filter(|v| v.words >= f64::from(MIN_WORDS) && v.duration_ms > 0)
        .collect();
    let mut wpm: Vec<f64> = readable
        .iter()
        .map(|v| v.words / (v.duration_ms as f64 / 60_000.0))
        .collect();
    if !wpm.is_empty() {
        let fast = wpm.iter().filter(|&&w| w > SKIM_LIMIT_WPM).count();
        f.fast_page_fraction = ratio(fast as f64, wpm.len() as f64);
        f.reading_wpm = median(&mut wpm);
    }
    // Latency to the first action against the page's length, over views that had one.
    let acted: Vec<(f64, f64)> = views
        .iter()
        .filter_map(|v| {
            let ms = v.first_action_ms?;
            (ms > 0).then(|| ((v.words + 1.0).ln(), (ms as f64).ln()))
        })
        .collect();
    if acted.len() >= MIN_VIEWS {
        let latencies: Vec<f64> = acted.iter().map(|(_, l)| *l).collect();
        f.first_action_log_sd = sd(&latencies);
        f.first_action_words_correlation = regression(&acted).1;
    }
}
