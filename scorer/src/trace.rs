//! A session's events in the compact form the features are computed from.
//!
//! The scan turns each `events` row into a [`TraceEvent`] (48 bytes, no allocation), so a pass
//! over millions of events holds only what the features read. Event kinds and the
//! low-cardinality strings of the vocabulary become small enums.

/// The event kinds of the embed's vocabulary that the features read; everything else is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Session,
    /// The embed's environment tells (booleans), sent shortly after `session`.
    Environment,
    /// How input reached the page since the last such event (counts, embed 1.4).
    Delivery,
    /// The page's content when it was shown or changed: visible words and controls (embed 1.4).
    Page,
    PointerMove,
    PointerDown,
    PointerUp,
    Click,
    KeyDown,
    KeyUp,
    Input,
    Paste,
    Copy,
    Cut,
    Scroll,
    Wheel,
    TouchStart,
    TouchMove,
    TouchEnd,
    Focus,
    Blur,
    /// A form field gained focus (embed 1.3): its per-page index, never its name.
    FieldFocus,
    Visibility,
    Resize,
    Submit,
    PageHide,
    Other,
}

impl Kind {
    pub fn parse(value: &str) -> Kind {
        match value {
            "session" => Kind::Session,
            "environment" => Kind::Environment,
            "delivery" => Kind::Delivery,
            "page" => Kind::Page,
            "pointermove" | "mousemove" => Kind::PointerMove,
            "pointerdown" | "mousedown" => Kind::PointerDown,
            "pointerup" | "mouseup" => Kind::PointerUp,
            "click" => Kind::Click,
            "keydown" => Kind::KeyDown,
            "keyup" => Kind::KeyUp,
            "input" => Kind::Input,
            "paste" => Kind::Paste,
            "copy" => Kind::Copy,
            "cut" => Kind::Cut,
            "scroll" => Kind::Scroll,
            "wheel" => Kind::Wheel,
            "touchstart" => Kind::TouchStart,
            "touchmove" => Kind::TouchMove,
            "touchend" => Kind::TouchEnd,
            "focus" => Kind::Focus,
            "fieldfocus" => Kind::FieldFocus,
            "blur" => Kind::Blur,
            "visibility" => Kind::Visibility,
            "resize" => Kind::Resize,
            "submit" => Kind::Submit,
            "pagehide" => Kind::PageHide,
            _ => Kind::Other,
        }
    }

    /// An action a person makes with a device (as opposed to page lifecycle events).
    pub fn is_interaction(self) -> bool {
        matches!(
            self,
            Kind::PointerMove
                | Kind::PointerDown
                | Kind::PointerUp
                | Kind::Click
                | Kind::KeyDown
                | Kind::KeyUp
                | Kind::Wheel
                | Kind::TouchStart
                | Kind::TouchMove
                | Kind::TouchEnd
        )
    }
}

/// Key classes of `keydown`/`keyup` (never the key itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyClass {
    Char,
    Digit,
    Space,
    Backspace,
    Delete,
    Enter,
    Tab,
    Arrow,
    Modifier,
    Other,
    Unknown,
}

impl KeyClass {
    pub fn parse(value: &str) -> KeyClass {
        match value {
            "char" => KeyClass::Char,
            "digit" => KeyClass::Digit,
            "space" => KeyClass::Space,
            "backspace" => KeyClass::Backspace,
            "delete" => KeyClass::Delete,
            "enter" => KeyClass::Enter,
            "tab" => KeyClass::Tab,
            "arrow" => KeyClass::Arrow,
            "modifier" => KeyClass::Modifier,
            "other" => KeyClass::Other,
            _ => KeyClass::Unknown,
        }
    }

    /// Keys that type text into a field.
    pub fn types_text(self) -> bool {
        matches!(self, KeyClass::Char | KeyClass::Digit | KeyClass::Space)
    }
}

/// [`TraceEvent::lag_ms`] of an event that carried no timestamp of its own.
pub const NO_LAG: i32 = i32::MIN;

/// A touch's force (0-1, more on pressure-sensitive screens) in hundredths, saturated.
pub fn force_hundredths(force: f64) -> u16 {
    if force.is_finite() {
        (force * 100.0).round().clamp(0.0, f64::from(u16::MAX)) as u16
    } else {
        0
    }
}

/// One event of a session, as the features read it. Fields a kind does not carry are zero or
/// `None`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceEvent {
    /// Milliseconds: the event's own timestamp, or when it was received when it has none.
    pub t: i64,
    pub x: Option<i32>,
    pub y: Option<i32>,
    /// When the collector received the event, less `t` (ms, saturated to `i32`): how late its
    /// request arrived by the event's own clock. [`NO_LAG`] for an event without a timestamp.
    pub lag_ms: i32,
    /// `input`: `lengthDelta`; `paste`: `length`; `wheel`: `dy`; `page`: `words`.
    pub amount: f32,
    /// Touch events: the contact's radius (CSS px), zero where the browser gives none.
    pub radius: f32,
    /// Touch events: the contact's force in hundredths (0-100 on most screens), zero where the
    /// browser gives none. `page`: `controls`, saturated.
    pub force: u16,
    pub kind: Kind,
    /// `data.trusted` (`Event.isTrusted`), when sent.
    pub trusted: Option<bool>,
    pub key_class: KeyClass,
    pub repeat: bool,
    /// `input`: the `inputType` inserts text (typing, not deletion or formatting).
    pub inserts_text: bool,
    /// `visibility`: the page became hidden.
    pub hidden: bool,
    /// Presses (`pointerdown`, `touchstart`) of embed 1.3: where the press landed on its
    /// target, from its centre, in hundredths of the target's half-width and half-height
    /// (-100 to 100 inside it); `None` when not sent.
    pub offset: Option<(i8, i8)>,
}

impl TraceEvent {
    /// An event of `kind` at `t` with nothing else set.
    pub fn new(t: i64, kind: Kind) -> TraceEvent {
        TraceEvent {
            t,
            x: None,
            y: None,
            lag_ms: NO_LAG,
            amount: 0.0,
            radius: 0.0,
            force: 0,
            kind,
            trusted: None,
            key_class: KeyClass::Unknown,
            repeat: false,
            inserts_text: false,
            hidden: false,
            offset: None,
        }
    }

    pub fn at(mut self, x: i32, y: i32) -> TraceEvent {
        self.x = Some(x);
        self.y = Some(y);
        self
    }

    pub fn trusted(mut self, trusted: bool) -> TraceEvent {
        self.trusted = Some(trusted);
        self
    }

    pub fn key(mut self, key_class: KeyClass) -> TraceEvent {
        self.key_class = key_class;
        self
    }

    pub fn amount(mut self, amount: f32) -> TraceEvent {
        self.amount = amount;
        self
    }

    pub fn lag(mut self, lag_ms: i32) -> TraceEvent {
        self.lag_ms = lag_ms;
        self
    }

    pub fn contact(mut self, radius: f32, force: f32) -> TraceEvent {
        self.radius = radius;
        self.force = force_hundredths(f64::from(force));
        self
    }

    pub fn offset(mut self, x: i8, y: i8) -> TraceEvent {
        self.offset = Some((x, y));
        self
    }
}

/// What the `session` event says about the browser. Absent fields stay `None`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Environment {
    /// The embed's `embedVersion`.
    pub embed_version: Option<String>,
    pub user_agent: Option<String>,
    pub webdriver: Option<bool>,
    pub screen_width: Option<f64>,
    pub screen_height: Option<f64>,
    pub viewport_width: Option<f64>,
    pub viewport_height: Option<f64>,
    pub device_pixel_ratio: Option<f64>,
    pub max_touch_points: Option<f64>,
    pub hardware_concurrency: Option<f64>,
    /// `environment` event: `navigator.webdriver` is answered by a script, not the browser.
    pub webdriver_patched: Option<bool>,
    /// `environment` event: globals of a driver or automation framework are in the page.
    pub automation_globals: Option<bool>,
    /// `environment` event: WebGL draws on the CPU (SwiftShader, llvmpipe, ...).
    pub software_renderer: Option<bool>,
    /// `environment` event: script-dispatched input came from an automation tool's page script.
    pub automation_stack: Option<bool>,
}

impl Environment {
    /// Reads the `data` of a raw `session` event; unreadable parts are left out rather than
    /// failing the session (the collector accepts any JSON).
    pub fn from_session_payload(payload: &str) -> Option<Environment> {
        #[derive(serde::Deserialize)]
        struct Raw {
            data: Option<serde_json::Value>,
        }
        let raw: Raw = serde_json::from_str(payload).ok()?;
        let data = raw.data?;
        let object = data.as_object()?;
        let text = |name: &str| object.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        let number = |name: &str| object.get(name).and_then(serde_json::Value::as_f64);
        Some(Environment {
            embed_version: text("embedVersion"),
            user_agent: text("userAgent"),
            webdriver: object.get("webdriver").and_then(serde_json::Value::as_bool),
            screen_width: number("screenWidth"),
            screen_height: number("screenHeight"),
            viewport_width: number("viewportWidth"),
            viewport_height: number("viewportHeight"),
            device_pixel_ratio: number("devicePixelRatio"),
            max_touch_points: number("maxTouchPoints"),
            hardware_concurrency: number("hardwareConcurrency"),
            ..Environment::default()
        })
    }

    /// Reads the `data` of a raw `environment` event: its boolean tells, nothing else.
    pub fn from_environment_payload(payload: &str) -> Option<Environment> {
        #[derive(serde::Deserialize)]
        struct Raw {
            data: Option<serde_json::Value>,
        }
        let raw: Raw = serde_json::from_str(payload).ok()?;
        let data = raw.data?;
        let object = data.as_object()?;
        let flag = |name: &str| object.get(name).and_then(serde_json::Value::as_bool);
        Some(Environment {
            webdriver_patched: flag("webdriverPatched"),
            automation_globals: flag("automationGlobals"),
            software_renderer: flag("softwareRenderer"),
            automation_stack: flag("automationStack"),
            ..Environment::default()
        })
    }

    /// Merges what a later page load or `environment` event said: a tell seen once stays.
    pub fn merge(&mut self, other: Environment) {
        fn either(a: Option<bool>, b: Option<bool>) -> Option<bool> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a || b),
                (a, b) => a.or(b),
            }
        }
        self.webdriver = either(self.webdriver, other.webdriver);
        self.webdriver_patched = either(self.webdriver_patched, other.webdriver_patched);
        self.automation_globals = either(self.automation_globals, other.automation_globals);
        self.software_renderer = either(self.software_renderer, other.software_renderer);
        self.automation_stack = either(self.automation_stack, other.automation_stack);
        if other.user_agent.is_some() && !self.headless_agent() {
            self.user_agent = other.user_agent;
        }
        if self.embed_version.is_none() {
            self.embed_version = other.embed_version;
        }
        macro_rules! keep_first {
            ($($field:ident),*) => { $( if self.$field.is_none() { self.$field = other.$field; } )* };
        }
        keep_first!(
            screen_width,
            screen_height,
            viewport_width,
            viewport_height,
            device_pixel_ratio,
            max_touch_points,
            hardware_concurrency
        );
    }

    /// The user agent names a headless or automation browser.
    pub fn headless_agent(&self) -> bool {
        let Some(agent) = &self.user_agent else {
            return false;
        };
        let agent = agent.to_ascii_lowercase();
        [
            "headless",
            "phantomjs",
            "slimerjs",
            "puppeteer",
            "playwright",
            "selenium",
            "electron",
        ]
        .iter()
        .any(|tell| agent.contains(tell))
    }
}

/// How a session's input reached its pages: the sum of its `delivery` events (embed 1.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Mouse presses (trusted `pointerdown` of a mouse).
    pub mouse_presses: u32,
    /// Of those, presses reporting a pressure of 0: a mouse reports 0.5 while a button is down;
    /// input injected through the DevTools protocol without a force reports 0.
    pub zero_pressure_presses: u32,
    /// Trusted mouse moves whose coalesced samples the browser reports.
    pub sampled_moves: u32,
    /// Of those, moves carrying more than one coalesced sample: a device sampling faster than
    /// the screen draws.
    pub multi_sample_moves: u32,
}

impl Delivery {
    /// Reads the `data` of a raw `delivery` event; `None` unless every count is a count and
    /// no part exceeds its whole.
    pub fn from_payload(payload: &str) -> Option<Delivery> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Counts {
            mouse_presses: u32,
            zero_pressure_presses: u32,
            sampled_moves: u32,
            multi_sample_moves: u32,
        }
        let data: Counts = payload_data(payload)?;
        (data.zero_pressure_presses <= data.mouse_presses
            && data.multi_sample_moves <= data.sampled_moves)
            .then_some(Delivery {
                mouse_presses: data.mouse_presses,
                zero_pressure_presses: data.zero_pressure_presses,
                sampled_moves: data.sampled_moves,
                multi_sample_moves: data.multi_sample_moves,
            })
    }

    pub fn add(&mut self, other: Delivery) {
        self.mouse_presses = self.mouse_presses.saturating_add(other.mouse_presses);
        self.zero_pressure_presses = self
            .zero_pressure_presses
            .saturating_add(other.zero_pressure_presses);
        self.sampled_moves = self.sampled_moves.saturating_add(other.sampled_moves);
        self.multi_sample_moves = self
            .multi_sample_moves
            .saturating_add(other.multi_sample_moves);
    }
}

/// A `page` event's counts: visible words and controls (embed 1.4); `None` unless both are
/// counts.
pub fn page_counts(payload: &str) -> Option<(u32, u32)> {
    #[derive(serde::Deserialize)]
    struct Counts {
        words: u32,
        controls: u32,
    }
    let data: Counts = payload_data(payload)?;
    Some((data.words, data.controls))
}

/// The `data` of a raw event, when it reads as `T`.
fn payload_data<T: serde::de::DeserializeOwned>(payload: &str) -> Option<T> {
    #[derive(serde::Deserialize)]
    struct Raw<T> {
        data: T,
    }
    serde_json::from_str::<Raw<T>>(payload)
        .ok()
        .map(|raw| raw.data)
}

/// Everything captured for one session (one reference), in time order once [`Self::finish`]
/// has run.
#[derive(Debug, Clone, Default)]
pub struct SessionTrace {
    pub events: Vec<TraceEvent>,
    /// Boxed: most of a scan's per-session slots never hold one, and a pass can hold a million
    /// sessions per scan partition.
    pub environment: Option<Box<Environment>>,
    /// The sum of the session's `delivery` events; `None` when none arrived (embeds before 1.4).
    pub delivery: Option<Box<Delivery>>,
}

impl SessionTrace {
    pub fn push(&mut self, event: TraceEvent) {
        self.events.push(event);
    }

    pub fn add_environment(&mut self, environment: Environment) {
        match &mut self.environment {
            Some(known) => known.merge(environment),
            None => self.environment = Some(Box::new(environment)),
        }
    }

    pub fn add_delivery(&mut self, delivery: Delivery) {
        self.delivery.get_or_insert_default().add(delivery);
    }

    /// Moves `other`'s events, environment and delivery counts into this trace.
    pub fn absorb(&mut self, other: SessionTrace) {
        if self.events.is_empty() {
            self.events = other.events;
        } else {
            self.events.extend_from_slice(&other.events);
        }
        if let Some(environment) = other.environment {
            self.add_environment(*environment);
        }
        if let Some(delivery) = other.delivery {
            self.add_delivery(*delivery);
        }
    }

    /// Orders events by time; events of one time keep their arrival order.
    pub fn finish(&mut self) {
        // The scan mostly delivers a session's events already in order; checking first saves
        // the stable sort's scratch allocation, a visible share of features' time
        // (benches/README.md, `model_score`).
        if !self.events.is_sorted_by_key(|event| event.t) {
            self.events.sort_by_key(|event| event.t);
        }
    }
}
