use super::stats::cv;
use super::*;
use crate::trace::{Environment, KeyClass, TraceEvent};

#[test]
fn features_come_back_from_their_values_and_only_from_one_per_feature() {
    let values: Vec<f64> = (0..Features::NAMES.len()).map(|i| i as f64 * 0.5).collect();
    let features = Features::from_values(&values).expect("one value per feature");
    assert_eq!(features.values(), values);
    assert_eq!(features.get(Features::NAMES[3]), Some(1.5));
    let mut set = features;
    assert!(set.set(Features::NAMES[3], 9.0) && !set.set("no_such_feature", 9.0));
    assert_eq!(set.get(Features::NAMES[3]), Some(9.0));
    assert!(Features::from_values(&values[1..]).is_none());
    let mut more = values.clone();
    more.push(0.0);
    assert!(Features::from_values(&more).is_none());
}

fn trace(events: Vec<TraceEvent>) -> SessionTrace {
    let mut trace = SessionTrace {
        events,
        environment: Some(Box::default()),
        delivery: None,
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
fn clicks_of_keys_labels_and_fingers_are_not_pointer_clicks() {
    let key = |t, kind, class| TraceEvent::new(t, kind).key(class);
    let f = compute(&trace(vec![
        mv(0, 10, 10),
        mv(16, 12, 11),
        // A person clicks a label: the press, its click, and the click the label sends its box.
        TraceEvent::new(100, Kind::PointerDown),
        TraceEvent::new(190, Kind::PointerUp),
        TraceEvent::new(191, Kind::Click),
        TraceEvent::new(192, Kind::Click),
        // Then tabs to a button and presses Enter (the click on the key's press), and Space on a
        // checkbox (the click on the key's release): no approach, no press, and no script.
        key(4_000, Kind::KeyDown, KeyClass::Enter),
        TraceEvent::new(4_001, Kind::Click),
        key(4_090, Kind::KeyUp, KeyClass::Enter),
        key(6_000, Kind::KeyDown, KeyClass::Space),
        key(6_080, Kind::KeyUp, KeyClass::Space),
        TraceEvent::new(6_081, Kind::Click),
        // A finger's tap: its click has no move before it, and a dwell of its own.
        TraceEvent::new(9_000, Kind::TouchStart),
        TraceEvent::new(9_070, Kind::TouchEnd),
        TraceEvent::new(9_071, Kind::Click),
        // And a script's click out of nowhere, long after any key.
        TraceEvent::new(12_000, Kind::Click),
    ]));
    close(f.clicks, 6.0);
    // Pointer clicks with an approach to see: the label's and the script's.
    close(f.clicks_without_approach, 1.0 / 2.0);
    // Pointer clicks with a press to see: the label's, the tap's and the script's.
    close(f.zero_dwell_clicks, 1.0 / 3.0);
    // Only keys: both unmeasured, not "every click without approach".
    let keyboard = compute(&trace(vec![
        key(1_000, Kind::KeyDown, KeyClass::Space),
        key(1_080, Kind::KeyUp, KeyClass::Space),
        TraceEvent::new(1_081, Kind::Click),
    ]));
    close(keyboard.clicks, 1.0);
    assert!(keyboard.clicks_without_approach.is_nan());
    assert!(keyboard.zero_dwell_clicks.is_nan());
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

    // A modifier held around a key is counted as a press but kept out of the timing: its hold
    // spans the key it modifies, and it is not in the rhythm of typing.
    let f = compute(&trace(vec![
        TraceEvent::new(0, Kind::KeyDown).key(KeyClass::Modifier),
        TraceEvent::new(100, Kind::KeyDown).key(KeyClass::Char),
        TraceEvent::new(180, Kind::KeyUp).key(KeyClass::Char),
        TraceEvent::new(300, Kind::KeyUp).key(KeyClass::Modifier),
        TraceEvent::new(700, Kind::KeyDown).key(KeyClass::Space),
        TraceEvent::new(760, Kind::KeyUp).key(KeyClass::Space),
        // Thinking for 5 s is not a flight.
        TraceEvent::new(5_700, Kind::KeyDown).key(KeyClass::Char),
        TraceEvent::new(5_790, Kind::KeyUp).key(KeyClass::Char),
    ]));
    close(f.key_presses, 4.0);
    close(f.free_keystrokes, 3.0);
    close(f.key_hold_mean_ms, (80.0 + 60.0 + 90.0) / 3.0);
    // Down to down: 100 to 700 (the modifier's press at 0 is no key of the rhythm).
    close(f.key_flight_mean_ms, 600.0);
    assert!(f.key_flight_cv.is_nan(), "fewer than three flights");

    // A soft keyboard's unidentified keys: their rhythm counts, their 2 ms holds do not.
    let soft: Vec<TraceEvent> = (0..6)
        .flat_map(|i| {
            [
                TraceEvent::new(i * 300, Kind::KeyDown).key(KeyClass::Other),
                TraceEvent::new(i * 300 + 2, Kind::KeyUp).key(KeyClass::Other),
            ]
        })
        .collect();
    let f = compute(&trace(soft));
    close(f.free_keystrokes, 6.0);
    close(f.key_flight_mean_ms, 300.0);
    assert!(f.key_hold_mean_ms.is_nan(), "{}", f.key_hold_mean_ms);
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

#[test]
fn taps_swipes_and_the_contacts_geometry() {
    let touch = |t, kind, x, y| TraceEvent::new(t, kind).at(x, y).trusted(true);
    let mut events = Vec::new();
    // Three taps of 80, 120 and 100 ms with radii 10, 12, 14 and forces 0.5, 0.6, 0.7.
    for (i, (dwell, radius, force)) in [(80, 10.0, 0.5), (120, 12.0, 0.6), (100, 14.0, 0.7)]
        .into_iter()
        .enumerate()
    {
        let t = i as i64 * 2_000;
        events.push(touch(t, Kind::TouchStart, 100, 100).contact(radius, force));
        events.push(touch(t + 40, Kind::TouchMove, 103, 101).contact(radius, force));
        events.push(touch(t + dwell, Kind::TouchEnd, 103, 101));
    }
    // A swipe up of 300 px over 320 ms, and a touch that rests a second (neither).
    events.push(touch(10_000, Kind::TouchStart, 200, 600).contact(11.0, 0.55));
    for step in 1..=20 {
        events.push(touch(
            10_000 + step * 16,
            Kind::TouchMove,
            200,
            600 - step as i32 * 15,
        ));
    }
    events.push(touch(10_330, Kind::TouchEnd, 200, 300));
    events.push(touch(20_000, Kind::TouchStart, 50, 50));
    events.push(touch(21_000, Kind::TouchEnd, 52, 50));
    let f = compute(&trace(events));
    close(f.touch_taps, 3.0);
    close(f.touch_swipes, 1.0);
    close(f.tap_dwell_mean_ms, 100.0);
    assert!(f.tap_dwell_log_sd > 0.0);
    let radii = [10.0, 12.0, 14.0, 11.0];
    close(f.touch_radius_cv, cv(&radii));
    close(f.touch_force_cv, cv(&[0.5, 0.6, 0.7, 0.55]));
    // A swipe at constant speed peaks anywhere, but its path is straight.
    close(f.swipe_efficiency, 1.0);
    // A session with no touch measures nothing of touch.
    let f = compute(&trace(vec![mv(0, 0, 0)]));
    close(f.touch_taps, 0.0);
    assert!(f.tap_dwell_mean_ms.is_nan() && f.touch_radius_cv.is_nan());
}

#[test]
fn where_presses_land_on_their_targets() {
    let press = |t, x, y| TraceEvent::new(t, Kind::PointerDown).offset(x, y);
    let f = compute(&trace(vec![
        press(0, 0, 0),
        press(1_000, 1, -2),
        press(2_000, 0, 0),
        press(3_000, 0, 0),
    ]));
    close(f.press_centre_fraction, 1.0);
    assert!(f.press_offset_spread < 0.02, "{}", f.press_offset_spread);
    let f = compute(&trace(vec![
        press(0, 30, -20),
        press(1_000, -10, 15),
        press(2_000, 5, 40),
    ]));
    close(f.press_centre_fraction, 0.0);
    assert!(f.press_offset_spread > 0.2, "{}", f.press_offset_spread);
    // Embeds before 1.3 send no offsets: nothing is measured.
    let f = compute(&trace(vec![TraceEvent::new(0, Kind::PointerDown)]));
    assert!(f.press_offset_spread.is_nan() && f.press_centre_fraction.is_nan());
}

#[test]
fn fields_reached_with_tab() {
    let f = compute(&trace(vec![
        TraceEvent::new(0, Kind::KeyDown).key(KeyClass::Tab),
        TraceEvent::new(5, Kind::FieldFocus),
        TraceEvent::new(2_000, Kind::PointerDown),
        TraceEvent::new(2_010, Kind::FieldFocus),
        TraceEvent::new(4_000, Kind::KeyDown).key(KeyClass::Tab),
        TraceEvent::new(4_004, Kind::FieldFocus),
    ]));
    close(f.tab_focus_fraction, 2.0 / 3.0);
    assert!(
        compute(&trace(vec![mv(0, 0, 0)]))
            .tab_focus_fraction
            .is_nan()
    );
}

#[test]
fn a_recording_posted_in_bulk_arrives_late_by_its_own_clock() {
    // Paced like the embed: every event arrives 0.5-2 s after its timestamp, whatever the
    // clock's offset (here the browser's clock is an hour behind the server's).
    let offset = 3_600_000;
    let paced: Vec<TraceEvent> = (0..300)
        .map(|i| mv(i * 1_000, i as i32, 0).lag(offset + 500 + (i as i32 % 4) * 500))
        .collect();
    let f = compute(&trace(paced));
    close(f.late_event_fraction, 0.0);
    close(f.oversized_batch, 0.0);
    // Posted at once after five minutes: the first events arrive five minutes late.
    let end = 300 * 1_000;
    let bulk: Vec<TraceEvent> = (0..300)
        .map(|i| mv(i * 1_000, i as i32, 0).lag(offset + (end - i * 1_000) as i32))
        .collect();
    let f = compute(&trace(bulk));
    assert!(f.late_event_fraction > 0.85, "{}", f.late_event_fraction);
    // All 300 in one request: more than the embed ever sends in one.
    close(f.oversized_batch, 1.0);
    // Events with no timestamp of their own say nothing.
    let f = compute(&trace(vec![mv(0, 0, 0), mv(10, 1, 0)]));
    assert!(f.late_event_fraction.is_nan() && f.oversized_batch.is_nan());
}

#[test]
fn the_embed_versions_the_embed_has_sent() {
    let with_version = |version: Option<&str>| {
        let mut t = trace(vec![TraceEvent::new(0, Kind::Session)]);
        t.environment = Some(Box::new(Environment {
            embed_version: version.map(str::to_owned),
            ..Environment::default()
        }));
        compute(&t).unknown_embed
    };
    close(with_version(Some("1.2.0")), 0.0);
    close(with_version(Some("1.3.0")), 0.0);
    close(with_version(Some("1.4.0")), 0.0);
    close(with_version(Some("9.9.9")), 1.0);
    close(with_version(None), 1.0);
}

#[test]
fn delivery_counts_become_shares_and_stay_unmeasured_without_them() {
    use crate::trace::Delivery;
    let f = compute(&trace(vec![mv(0, 0, 0)]));
    assert!(f.zero_pressure_presses.is_nan() && f.multi_sample_move_fraction.is_nan());
    let mut t = trace(vec![mv(0, 0, 0)]);
    // Two reports, summed: 1 of 4 presses without pressure, 30 of 40 moves with samples.
    for payload in [
        r#"{"type":"delivery","timestamp":1,"data":{"mousePresses":3,"zeroPressurePresses":1,"sampledMoves":10,"multiSampleMoves":0}}"#,
        r#"{"type":"delivery","timestamp":2,"data":{"mousePresses":1,"zeroPressurePresses":0,"sampledMoves":30,"multiSampleMoves":30}}"#,
    ] {
        t.add_delivery(Delivery::from_payload(payload).expect("counts"));
    }
    let f = compute(&t);
    close(f.zero_pressure_presses, 0.25);
    close(f.multi_sample_move_fraction, 0.75);
    // A report whose part exceeds its whole, or whose counts are not counts, is not read.
    for bad in [
        r#"{"data":{"mousePresses":1,"zeroPressurePresses":2,"sampledMoves":0,"multiSampleMoves":0}}"#,
        r#"{"data":{"mousePresses":-1,"zeroPressurePresses":0,"sampledMoves":0,"multiSampleMoves":0}}"#,
        r#"{"data":{"mousePresses":"1"}}"#,
        r#"[1]"#,
    ] {
        assert_eq!(Delivery::from_payload(bad), None, "{bad}");
    }
}

/// A `page` event showing `words`.
fn page(t: i64, words: f32) -> TraceEvent {
    TraceEvent::new(t, Kind::Page).amount(words)
}

fn press(t: i64) -> TraceEvent {
    TraceEvent::new(t, Kind::PointerDown).at(0, 0).trusted(true)
}

#[test]
fn reading_speed_over_page_views() {
    // 100 words read for 30 s (200 words a minute), then 200 words gone by in 3 s (4000).
    let f = compute(&trace(vec![
        TraceEvent::new(0, Kind::Session),
        page(0, 100.0),
        press(20_000),
        page(30_000, 200.0),
        press(32_000),
        TraceEvent::new(33_000, Kind::PageHide),
    ]));
    close(f.page_views, 2.0);
    close(f.page_words, 300.0);
    close(f.reading_wpm, 0.5 * (200.0 + 4000.0));
    close(f.fast_page_fraction, 0.5);
    // Too few views for the latency's spread and correlation.
    assert!(f.first_action_log_sd.is_nan() && f.first_action_words_correlation.is_nan());
    // A page of few words says nothing of reading; no `page` event, nothing at all.
    let f = compute(&trace(vec![page(0, 5.0), press(100), mv(200, 0, 0)]));
    assert!(f.reading_wpm.is_nan() && f.fast_page_fraction.is_nan());
    let f = compute(&trace(vec![press(0), mv(10, 0, 0)]));
    assert!(f.page_views.is_nan() && f.page_words.is_nan());
}

#[test]
fn first_action_latency_follows_the_words_of_a_reader_not_of_a_clock() {
    let pages = [20.0, 60.0, 150.0, 40.0, 300.0];
    let session = |latency: &dyn Fn(f32) -> i64| {
        let mut events = vec![TraceEvent::new(0, Kind::Session)];
        let mut t = 0;
        for words in pages {
            events.push(page(t, words));
            events.push(press(t + latency(words)));
            t += latency(words) + 1_000;
        }
        compute(&trace(events))
    };
    // A reader: about 250 ms a word, plus a second to answer.
    let reader = session(&|words| 1_000 + (words * 250.0) as i64);
    assert!(reader.first_action_words_correlation > 0.9);
    assert!(reader.first_action_log_sd > 0.5);
    // A clock: 4 s on every page whatever it says.
    let clock = session(&|_| 4_000);
    close(clock.first_action_log_sd, 0.0);
    assert!(clock.first_action_words_correlation.is_nan());
}
