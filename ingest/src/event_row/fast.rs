//! A hand-written decoder for the shape nearly every logged batch has:
//! `{"events":[{"type": "...", "timestamp": <integer>, "data": {<vocabulary fields>}}, ...]}`.
//!
//! It reads a body in one pass without serde's per-field machinery, borrowing every string.
//! Whenever it meets anything outside that shape (escapes, other keys, duplicate keys, nulls,
//! numbers whose typed decoding has edge cases) it gives up and the caller takes the general
//! serde path, so its results are by construction those of [`super::decode_event`]: a property
//! test holds it to that. Input must be a body that passed [`crate::batch::count_batch_events`]
//! (the log holds only those); on anything else it still never panics, but may accept less than
//! strict JSON.

use std::borrow::Cow;

use super::{EventData, EventRow};

/// Every event of `body` decoded, or `None` when some part of the body is outside the fast
/// path's shape.
pub(super) fn decode_batch(body: &[u8]) -> Option<Vec<EventRow<'_>>> {
    each_event(body, Cursor::event)
}

/// `read` applied to each event of a `{"events":[...]}` body (the only key), in order; `None`
/// as soon as the body or any event is outside what `read` takes.
fn each_event<'a, T>(
    body: &'a [u8],
    mut read: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Vec<T>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut cursor = Cursor { text, pos: 0 };
    cursor.eat(b'{')?;
    if cursor.plain_str()? != "events" {
        return None;
    }
    cursor.eat(b':')?;
    cursor.eat(b'[')?;
    let mut items = Vec::with_capacity(32);
    if cursor.peek()? == b']' {
        cursor.pos += 1;
    } else {
        loop {
            items.push(read(&mut cursor)?);
            match cursor.peek()? {
                b',' => cursor.pos += 1,
                b']' => {
                    cursor.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    cursor.eat(b'}')?;
    cursor.skip_whitespace();
    (cursor.pos == text.len()).then_some(items)
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// A string without escapes, borrowed.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.pos;
        let rest = self.bytes().get(start..)?;
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.pos = start + len + 1;
        self.text.get(start..start + len)
    }

    fn number(&mut self) -> Option<&'a str> {
        self.skip_whitespace();
        let start = self.pos;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.bytes().get(self.pos)
        {
            self.pos += 1;
        }
        (self.pos > start).then(|| &self.text[start..self.pos])
    }

    /// An integer of at most 18 digits. Anything else (fractions, exponents, `-0`, which
    /// serde reads as a float, and long numbers near the limits) is left to serde.
    fn integer(&mut self) -> Option<i64> {
        let text = self.number()?;
        let (negative, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        if digits.is_empty() || digits.len() > 18 {
            return None;
        }
        let mut value: i64 = 0;
        for byte in digits.bytes() {
            if !byte.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(byte - b'0');
        }
        match (negative, value) {
            (true, 0) => None,
            (true, value) => Some(-value),
            (false, value) => Some(value),
        }
    }

    fn int32(&mut self) -> Option<i32> {
        i32::try_from(self.integer()?).ok()
    }

    /// A number as serde reads it into an `f64` (the same parser, so the same rounding).
    fn float(&mut self) -> Option<f64> {
        serde_json::from_str(self.number()?).ok()
    }

    fn boolean(&mut self) -> Option<bool> {
        self.skip_whitespace();
        let rest = self.bytes().get(self.pos..)?;
        if rest.starts_with(b"true") {
            self.pos += 4;
            Some(true)
        } else if rest.starts_with(b"false") {
            self.pos += 5;
            Some(false)
        } else {
            None
        }
    }

    fn text_field(&mut self) -> Option<Option<Cow<'a, str>>> {
        Some(Some(Cow::Borrowed(self.plain_str()?)))
    }

    /// Calls `field` for each key of an object, then consumes its closing brace.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn event(&mut self) -> Option<EventRow<'a>> {
        let mut event_type = None;
        let mut event_time = None;
        let mut data = None;
        self.object(|cursor, key| {
            match key {
                "type" if event_type.is_none() => event_type = Some(cursor.plain_str()?),
                "timestamp" if event_time.is_none() => event_time = Some(cursor.integer()?),
                "data" if data.is_none() => data = Some(cursor.data()?),
                _ => return None,
            }
            Some(())
        })?;
        Some(EventRow {
            event_type: Some(Cow::Borrowed(event_type?)),
            event_time: Some(event_time?),
            data: data?,
            payload: None,
            interview_id: None,
        })
    }

    fn data(&mut self) -> Option<EventData<'a>> {
        let mut data = EventData::default();
        self.object(|cursor, key| {
            // A field met twice is a duplicate, which serde refuses: each arm fills an empty slot.
            fn set<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
                if slot.is_some() {
                    return None;
                }
                *slot = Some(value?);
                Some(())
            }
            fn set_text<'a>(
                slot: &mut Option<Cow<'a, str>>,
                value: Option<Option<Cow<'a, str>>>,
            ) -> Option<()> {
                set(slot, value?)
            }
            match key {
                "x" => set(&mut data.x, cursor.int32()),
                "y" => set(&mut data.y, cursor.int32()),
                "pointerType" => set_text(&mut data.pointer_type, cursor.text_field()),
                "trusted" => set(&mut data.trusted, cursor.boolean()),
                "button" => set(&mut data.button, cursor.int32()),
                "target" => set_text(&mut data.target, cursor.text_field()),
                "keyClass" => set_text(&mut data.key_class, cursor.text_field()),
                "repeat" => set(&mut data.repeat, cursor.boolean()),
                "holdMs" => set(&mut data.hold_ms, cursor.float()),
                "flightMs" => set(&mut data.flight_ms, cursor.float()),
                "inputType" => set_text(&mut data.input_type, cursor.text_field()),
                "lengthDelta" => set(&mut data.length_delta, cursor.int32()),
                "field" => set(&mut data.field, cursor.int32()),
                "length" => set(&mut data.length, cursor.int32()),
                "dx" => set(&mut data.dx, cursor.float()),
                "dy" => set(&mut data.dy, cursor.float()),
                "deltaMode" => set(&mut data.delta_mode, cursor.int32()),
                "force" => set(&mut data.force, cursor.float()),
                "radius" => set(&mut data.radius, cursor.float()),
                "state" => set_text(&mut data.state, cursor.text_field()),
                "width" => set(&mut data.width, cursor.int32()),
                "height" => set(&mut data.height, cursor.int32()),
                _ => None,
            }
        })?;
        Some(data)
    }
}

/// One event, when it has the fast path's shape.
pub(super) fn decode_event(text: &str) -> Option<EventRow<'_>> {
    let mut cursor = Cursor { text, pos: 0 };
    let row = cursor.event()?;
    cursor.skip_whitespace();
    (cursor.pos == text.len()).then_some(row)
}

/// The timestamp of every event of `body`, for session statistics, or `None` when some event
/// is outside the shape whose timestamp is plain to read (an object of `type`, `timestamp` and
/// `data`, a plain string type other than `session`, an integer timestamp). `data` is skipped.
pub(super) fn batch_times(body: &[u8]) -> Option<Vec<i64>> {
    each_event(body, Cursor::event_time)
}

impl Cursor<'_> {
    fn event_time(&mut self) -> Option<i64> {
        let (mut has_type, mut time, mut has_data) = (false, None, false);
        self.object(|cursor, key| {
            match key {
                "type" if !has_type => {
                    has_type = true;
                    if cursor.plain_str()? == "session" {
                        return None;
                    }
                }
                "timestamp" if time.is_none() => time = Some(cursor.integer()?),
                "data" if !has_data => {
                    has_data = true;
                    cursor.skip_value()?;
                }
                _ => return None,
            }
            Some(())
        })?;
        time
    }

    /// Skips one value of a body that is known to be valid JSON.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0_usize;
        loop {
            match self.peek()? {
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.pos += 1;
                }
                b'"' => self.skip_string()?,
                b',' | b':' if depth > 0 => self.pos += 1,
                b',' | b':' => return None,
                _ => {
                    while let Some(byte) = self.bytes().get(self.pos) {
                        if matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                            break;
                        }
                        self.pos += 1;
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.pos += 1;
        loop {
            let rest = self.bytes().get(self.pos..)?;
            let at = memchr::memchr2(b'"', b'\\', rest)?;
            if rest[at] == b'"' {
                self.pos += at + 1;
                return Some(());
            }
            // An escape: skip the backslash and the character it escapes.
            self.pos += at + 2;
        }
    }
}
