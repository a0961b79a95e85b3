//! Synthetic sessions in the embed's event format, for tests and benchmarks.
//!
//! Not training data: the shapes are simple models of what people and automation produce
//! (minimum-jerk pointer strokes with sampling jitter and pauses, lognormal key timing; and
//! scripted fills, instant clicks, metronomic typing). They exercise every feature and the
//! bands; the real evaluation uses recorded human traces and real browser automation.

use std::fmt::Write;

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

use crate::cohort::COHORT_FEATURES;
use crate::features::Features;
use crate::model::Model;
use crate::trace::{Delivery, Environment, KeyClass, Kind, SessionTrace, TraceEvent, page_counts};

/// A deterministic generator (xoshiro256++, whose stream `rand_xoshiro` keeps stable), so
/// sessions are reproducible from a seed; with the distributions the generators draw from.
#[derive(Debug, Clone)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// Lognormal with the given median and log-space spread.
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }
}

/// How one synthetic person points and types: what differs between people. `Human` sessions
/// are all one person ([`Style::NEUTRAL`]); [`Style::drawn`] draws a person, so a survey of
/// drawn people spreads as people do (each keeps a style, and the same style twice does not
/// repeat its noise). Pointing and typing are apart, so a session can point as one person (or
/// one generator) and type as another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Style {
    /// Stroke duration factor (larger is slower).
    pub stroke_time: f64,
    /// Curvature factor.
    pub bend: f64,
    /// Sampling jitter of a stroke's points, in pixels.
    pub jitter: f64,
    /// How a stroke's time is warped (`tau^skew`): above 1 the peak speed comes late, below 1
    /// early. People's velocity profiles are not symmetric, and not alike.
    pub skew: f64,
    /// Press dwell factor.
    pub dwell: f64,
    /// Key flight (keyup to next keydown) factor, and its log-space spread factor.
    pub flight: f64,
    pub flight_spread: f64,
    /// Key hold factor, and its log-space spread factor.
    pub hold: f64,
    pub hold_spread: f64,
    /// How much a stroke's duration, curvature and press differ from the last (1 for a
    /// person): a generator with fixed settings draws its strokes from a narrower range.
    pub variability: f64,
}

impl Style {
    pub const NEUTRAL: Style = Style {
        stroke_time: 1.0,
        bend: 1.0,
        jitter: 0.6,
        skew: 1.0,
        dwell: 1.0,
        flight: 1.0,
        flight_spread: 1.0,
        hold: 1.0,
        hold_spread: 1.0,
        variability: 1.0,
    };

    /// A person drawn at random (from `seed`): each trait lognormal around the neutral one.
    pub fn drawn(seed: u64) -> Style {
        let mut rng = Rng::new(seed ^ 0x7374_796c_6573);
        Style {
            stroke_time: rng.lognormal(1.0, 0.5),
            bend: rng.lognormal(1.0, 0.8),
            jitter: rng.lognormal(0.6, 0.8),
            skew: rng.lognormal(1.0, 0.5),
            dwell: rng.lognormal(1.0, 0.5),
            flight: rng.lognormal(1.0, 0.35),
            flight_spread: rng.lognormal(1.0, 0.3),
            hold: rng.lognormal(1.0, 0.3),
            hold_spread: rng.lognormal(1.0, 0.3),
            variability: 1.0,
        }
    }

    /// One generator's settings (from `seed`): a drawn style whose strokes and presses vary
    /// from one to the next a fifth as much as a person's.
    pub fn generator(seed: u64) -> Style {
        Style {
            variability: 0.2,
            ..Style::drawn(seed)
        }
    }

    /// This style's pointing with `typist`'s typing.
    pub fn typing_as(self, typist: Style) -> Style {
        Style {
            flight: typist.flight,
            flight_spread: typist.flight_spread,
            hold: typist.hold,
            hold_spread: typist.hold_spread,
            ..self
        }
    }
}

/// Kinds of synthetic session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// A person with a mouse and keyboard.
    Human,
    /// Headless automation that fills and clicks, webdriver flag on.
    NaiveBot,
    /// Automation with the webdriver flag hidden, straight instant moves and metronomic keys.
    StealthBot,
}

/// Builds one session's events (JSON texts, in time order) starting at `t0` ms.
#[derive(Debug)]
pub struct SessionWriter {
    events: Vec<String>,
    t: i64,
    x: f64,
    y: f64,
    rng: Rng,
    style: Style,
}

impl SessionWriter {
    fn new(t0: i64, seed: u64) -> SessionWriter {
        SessionWriter {
            events: Vec::new(),
            t: t0,
            x: 400.0,
            y: 300.0,
            rng: Rng::new(seed),
            style: Style::NEUTRAL,
        }
    }

    fn push(&mut self, kind: &str, data: &str) {
        let mut text = String::with_capacity(64 + data.len());
        let _ = write!(
            text,
            r#"{{"type":"{kind}","timestamp":{},"data":{{{data}}}}}"#,
            self.t
        );
        self.events.push(text);
    }

    fn wait(&mut self, ms: f64) {
        self.t += ms.max(0.0).round() as i64;
    }

    fn session(&mut self, identifier: &str, reference: &str, automation: bool, webdriver: bool) {
        let agent = if automation {
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36"
        } else {
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
        };
        let data = format!(
            r#""sessionId":"{identifier}","interviewId":"{reference}","embedVersion":"1.0.0","origin":"https://survey.example","path":"/s/1","userAgent":"{agent}","languages":["en-US"],"timezoneOffset":-60,"screenWidth":1920,"screenHeight":1080,"viewportWidth":1280,"viewportHeight":720,"devicePixelRatio":1,"maxTouchPoints":0,"hardwareConcurrency":8,"webdriver":{webdriver}"#
        );
        self.push("session", &data);
    }

    fn pointer(&mut self, kind: &str, extra: &str) {
        let data = format!(
            r#""x":{},"y":{},"pointerType":"mouse","trusted":true{extra}"#,
            self.x.round() as i64,
            self.y.round() as i64
        );
        self.push(kind, &data);
    }

    /// A person's stroke to `(tx, ty)`: minimum-jerk profile, slight curve, overshoot noise,
    /// sampled at a jittery ~16 ms like coalesced browser events.
    fn human_move(&mut self, tx: f64, ty: f64) {
        let (sx, sy) = (self.x, self.y);
        let distance = (tx - sx).hypot(ty - sy);
        let variability = self.style.variability;
        // A person's (variability 1) draws stay exactly as they were.
        let around = |draw: f64, centre: f64| {
            if variability == 1.0 {
                draw
            } else {
                centre + (draw - centre) * variability
            }
        };
        let pace = around(self.rng.range(0.8, 1.3), 1.05);
        let duration =
            (200.0 + 120.0 * (1.0 + distance / 20.0).log2() * pace) * self.style.stroke_time;
        let bend = around(self.rng.normal(), 0.5) * distance * 0.08 * self.style.bend;
        let (nx, ny) = if distance > 0.0 {
            (-(ty - sy) / distance, (tx - sx) / distance)
        } else {
            (0.0, 0.0)
        };
        let mut elapsed = 0.0;
        while elapsed < duration {
            let step = self.rng.range(8.0, 24.0);
            elapsed = (elapsed + step).min(duration);
            let tau = elapsed / duration;
            // NEUTRAL leaves the profile as it was (bit for bit).
            let tau = if self.style.skew == 1.0 {
                tau
            } else {
                tau.powf(self.style.skew)
            };
            let s = 10.0 * tau.powi(3) - 15.0 * tau.powi(4) + 6.0 * tau.powi(5);
            let arc = (std::f64::consts::PI * s).sin() * bend;
            self.x = sx + (tx - sx) * s + nx * arc + self.rng.normal() * self.style.jitter;
            self.y = sy + (ty - sy) * s + ny * arc + self.rng.normal() * self.style.jitter;
            self.wait(step);
            self.pointer("pointermove", "");
        }
    }

    fn human_click(&mut self, target: &str) {
        let ms = self.rng.lognormal(120.0, 0.4);
        self.wait(ms);
        self.pointer("pointerdown", r#","button":0"#);
        let ms = self
            .rng
            .lognormal(95.0 * self.style.dwell, 0.3 * self.style.variability);
        self.wait(ms);
        self.pointer("pointerup", r#","button":0"#);
        let ms = self.rng.range(0.0, 3.0);
        self.wait(ms);
        self.pointer("click", &format!(r#","button":0,"target":"{target}""#));
    }

    fn human_type(&mut self, characters: usize, field: usize) {
        for index in 0..characters {
            let class = if index % 6 == 5 { "space" } else { "char" };
            let ms = self
                .rng
                .lognormal(170.0 * self.style.flight, 0.45 * self.style.flight_spread);
            self.wait(ms);
            self.push(
                "keydown",
                &format!(r#""keyClass":"{class}","trusted":true,"repeat":false"#),
            );
            let ms = self.rng.range(1.0, 4.0);
            self.wait(ms);
            self.push(
                "input",
                &format!(r#""inputType":"insertText","lengthDelta":1,"field":{field}"#),
            );
            let hold = self
                .rng
                .lognormal(85.0 * self.style.hold, 0.3 * self.style.hold_spread);
            self.wait(hold);
            self.push(
                "keyup",
                &format!(r#""keyClass":"{class}","trusted":true,"repeat":false"#),
            );
        }
    }

    fn human_scroll(&mut self) {
        for _ in 0..(2 + (self.rng.unit() * 4.0) as usize) {
            let ms = self.rng.range(30.0, 120.0);
            self.wait(ms);
            self.push("wheel", r#""dx":0,"dy":100,"deltaMode":0,"trusted":true"#);
            let ms = self.rng.range(5.0, 20.0);
            self.wait(ms);
            let y = (self.t % 4000) as f64;
            self.push("scroll", &format!(r#""x":0,"y":{y}"#));
        }
    }

    fn finish(self) -> Vec<String> {
        self.events
    }
}

/// One synthetic session: `questions` questions answered (a choice click and a short text
/// answer each), starting at `t0`. Returns the events as JSON texts in time order.
pub fn session(
    behaviour: Behaviour,
    identifier: &str,
    reference: &str,
    t0: i64,
    questions: usize,
    seed: u64,
) -> Vec<String> {
    styled_session(
        behaviour,
        Style::NEUTRAL,
        identifier,
        reference,
        t0,
        questions,
        seed,
    )
}

/// [`session`], with a person's `style` (a `Human` session's; automation keeps its own).
pub fn styled_session(
    behaviour: Behaviour,
    style: Style,
    identifier: &str,
    reference: &str,
    t0: i64,
    questions: usize,
    seed: u64,
) -> Vec<String> {
    let mut w = SessionWriter::new(t0, seed);
    w.style = style;
    match behaviour {
        Behaviour::Human => {
            w.session(identifier, reference, false, false);
            let ms = w.rng.range(800.0, 2500.0);
            w.wait(ms);
            for question in 0..questions {
                let (tx, ty) = (w.rng.range(200.0, 1000.0), w.rng.range(150.0, 650.0));
                w.human_move(tx, ty);
                w.human_click("choice");
                let ms = w.rng.lognormal(900.0, 0.5);
                w.wait(ms);
                let (fx, fy) = (w.rng.range(200.0, 900.0), w.rng.range(300.0, 600.0));
                w.human_move(fx, fy);
                w.human_click("text");
                let characters = 8 + (w.rng.unit() * 12.0) as usize;
                w.human_type(characters, question);
                let ms = w.rng.lognormal(700.0, 0.5);
                w.wait(ms);
                w.human_scroll();
                let ms = w.rng.lognormal(1200.0, 0.6);
                w.wait(ms);
            }
        }
        Behaviour::NaiveBot => {
            w.session(identifier, reference, true, true);
            w.wait(40.0);
            for question in 0..questions {
                w.x = 500.0;
                w.y = 200.0 + question as f64 * 40.0;
                w.pointer("click", r#","button":0,"target":"choice""#);
                w.wait(15.0);
                w.push(
                    "input",
                    &format!(r#""inputType":"insertText","lengthDelta":12,"field":{question}"#),
                );
                w.wait(20.0);
            }
            w.push("scroll", r#""x":0,"y":900"#);
        }
        Behaviour::StealthBot => {
            w.session(identifier, reference, false, false);
            w.wait(60.0);
            for question in 0..questions {
                // A straight line at exact 16 ms steps, then an instant click.
                let (tx, ty) = (600.0, 200.0 + question as f64 * 50.0);
                let (sx, sy) = (w.x, w.y);
                for step in 1..=10 {
                    let s = f64::from(step) / 10.0;
                    w.x = sx + (tx - sx) * s;
                    w.y = sy + (ty - sy) * s;
                    w.wait(16.0);
                    w.pointer("pointermove", "");
                }
                w.pointer("pointerdown", r#","button":0"#);
                w.pointer("pointerup", r#","button":0"#);
                w.pointer("click", r#","button":0,"target":"text""#);
                for _ in 0..10 {
                    w.wait(50.0);
                    w.push(
                        "keydown",
                        r#""keyClass":"char","trusted":true,"repeat":false"#,
                    );
                    w.push(
                        "input",
                        &format!(r#""inputType":"insertText","lengthDelta":1,"field":{question}"#),
                    );
                    w.push(
                        "keyup",
                        r#""keyClass":"char","trusted":true,"repeat":false"#,
                    );
                }
            }
        }
    }
    w.finish()
}

/// A session's events (the embed's JSON, as [`session`] writes them) read into a time-ordered
/// trace the way the scan reads the lake's typed columns; `None` if an event is not such JSON.
pub fn trace(events: &[String]) -> Option<SessionTrace> {
    let mut trace = SessionTrace::default();
    for text in events {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let kind = Kind::parse(value["type"].as_str()?);
        let data = &value["data"];
        if kind == Kind::Session {
            trace.add_environment(Environment::from_session_payload(text)?);
        }
        if kind == Kind::Delivery {
            trace.add_delivery(Delivery::from_payload(text)?);
        }
        let page = if kind == Kind::Page {
            Some(page_counts(text)?)
        } else {
            None
        };
        let int = |name: &str| data[name].as_i64().map(|v| v as i32);
        let mut event = TraceEvent::new(value["timestamp"].as_i64()?, kind);
        event.x = int("x");
        event.y = int("y");
        event.trusted = data["trusted"].as_bool();
        event.key_class = data["keyClass"]
            .as_str()
            .map_or(KeyClass::Unknown, KeyClass::parse);
        event.inserts_text = data["inputType"].as_str() == Some("insertText");
        event.amount = match kind {
            Kind::Input => int("lengthDelta").unwrap_or(0) as f32,
            Kind::Paste => int("length").unwrap_or(0) as f32,
            Kind::Wheel => data["dy"].as_f64().unwrap_or(0.0) as f32,
            Kind::Page => page.map_or(0.0, |(words, _)| words as f32),
            _ => 0.0,
        };
        if let Some((_, controls)) = page {
            event.force = controls.min(u32::from(u16::MAX)) as u16;
        }
        if matches!(kind, Kind::TouchStart | Kind::TouchMove | Kind::TouchEnd) {
            event = event.contact(
                data["radius"].as_f64().unwrap_or(0.0) as f32,
                data["force"].as_f64().unwrap_or(0.0) as f32,
            );
        }
        if matches!(kind, Kind::PointerDown | Kind::TouchStart)
            && let (Some(x), Some(y)) = (data["dx"].as_f64(), data["dy"].as_f64())
        {
            let hundredths = |share: f64| (share * 100.0).round().clamp(-127.0, 127.0) as i8;
            event = event.offset(hundredths(x), hundredths(y));
        }
        trace.push(event);
    }
    trace.finish();
    Some(trace)
}

// ---- Cohorts: feature vectors placed among people's ranges ------------------------------------

/// The value of `feature` at people's percentile `p` (0-1), from the model's ranges.
fn at_percentile(model: &Model, feature: &str, p: f64) -> Option<f64> {
    let range = model.human_ranges.iter().find(|r| r.feature == feature)?;
    let q = &range.quantiles;
    let last = q.len().checked_sub(1)?;
    let position = p.clamp(0.0, 1.0) * last as f64;
    let low = position.floor() as usize;
    let high = (low + 1).min(last);
    Some(q[low] + (q[high] - q[low]) * (position - low as f64))
}

/// The pointer and keyboard features of [`COHORT_FEATURES`] (touch left unmeasured).
fn desk_features() -> Vec<&'static str> {
    COHORT_FEATURES
        .iter()
        .copied()
        .filter(|name| !name.starts_with("tap_") && !name.starts_with("swipe_"))
        .collect()
}

/// A session measuring only `percentiles` (a feature the model has no range for stays
/// unmeasured).
fn cohort_session(model: &Model, percentiles: &[(&str, f64)]) -> Features {
    let mut f = Features::unmeasured();
    for (name, p) in percentiles {
        if let Some(value) = at_percentile(model, name, *p) {
            f.set(name, value);
        }
    }
    f
}

/// Feature vectors of `n` people for the cohort's tests and benchmark: their features follow
/// two traits of their own (speed and care, say) plus noise of their own on each feature:
/// correlated axes, as a real cohort's are.
pub fn cohort_people(model: &Model, n: usize, rng: &mut Rng) -> Vec<Features> {
    let names = desk_features();
    (0..n)
        .map(|_| {
            let (a, b) = (rng.normal(), rng.normal());
            let percentiles: Vec<(&str, f64)> = names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let trait_part = if i % 2 == 0 { a } else { b };
                    let z = 0.7 * trait_part + 0.7 * rng.normal();
                    (*name, normal_cdf(z))
                })
                .collect();
            cohort_session(model, &percentiles)
        })
        .collect()
}

/// Feature vectors of a farm of `n` for the cohort's tests and benchmark: one generator's
/// settings, each session's medians `spread` percentiles off its centre.
pub fn cohort_farm(model: &Model, n: usize, spread: f64, rng: &mut Rng) -> Vec<Features> {
    let names = desk_features();
    let centre: Vec<f64> = names.iter().map(|_| rng.range(0.2, 0.8)).collect();
    (0..n)
        .map(|_| {
            let percentiles: Vec<(&str, f64)> = names
                .iter()
                .zip(&centre)
                .map(|(name, c)| (*name, c + spread * rng.normal()))
                .collect();
            cohort_session(model, &percentiles)
        })
        .collect()
}

fn normal_cdf(z: f64) -> f64 {
    // Abramowitz and Stegun 7.1.26: ample for generated data.
    let t = 1.0 / (1.0 + 0.3275911 * z.abs() / std::f64::consts::SQRT_2);
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-(z * z) / 2.0).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests;
