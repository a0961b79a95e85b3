"""Human sessions for the scoring-quality harness, built from the recorded data sets.

A *base session* is real human pointer data from `../shared/datasets/` laid out on a session
clock, plus what the pointer data sets lack: typed answers (a CMU keystroke subject's real key
timing in about half of the base sessions, synthetic typing from published population figures in
the rest), scrolling, focus and leaving. Every base session is then sent in several *conversion
variants* (VARIANTS): its pointer rows as different browsers, displays and remote desktops would
deliver them to the embed. A conversion is a function from recorded (t, kind, x, y) rows to the
rows the embed emits (CONVERSIONS); `convert()` is the one place that applies it. Everything that
is not the conversion (think pauses, typing, scrolling, tab switches, leaving) is drawn once per
base session from an RNG seeded by the base session, so the variants of one session differ only
in the conversion. docs/evaluation.md lists every source and assumption; the constants below cite
them.

Split, by person (datasets README): every Balabit session of the users in BALABIT_HOLDOUT_USERS
is HOLDOUT and every session of the other six is TRAIN; DELBOT records devices, not people, so
one of its files is HOLDOUT when the first hex digit of the SHA-1 of its path relative to the
data set's folder is 0-4 (device-level figures).
The CMU file holds only that data set's TRAIN subjects; they are split again by subject (a subject
is HOLDOUT when the first hex digit of sha1("cmu-split/<subject>") is 0-4), and a session types
with a subject of its own split only.
"""

from __future__ import annotations

import csv
import hashlib
import math
import random
import tarfile
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datasets import readers as recordings

MOVE_INTERVAL_MS = 16  # the embed keeps one pointer or touch move per 16 ms
# user7 and user16 are the users whose SHA-1 of `balabit/<user>` starts with 0-4; user29 and
# user35 were HOLDOUT before the split became one by person.
BALABIT_HOLDOUT_USERS = {"user7", "user16", "user29", "user35"}
BALABIT_MAX_SECONDS = 300  # a survey-sized slice of each Balabit session (sent in real time)
BALABIT_SESSIONS_PER_USER = 40  # per split, so ten RDP users do not outweigh the browser data
DELBOT_STROKES_PER_SESSION = 3  # consecutive strokes of one device folder form one session

# Keystroke timing: Dhakal, Feit, Kristensson and Oulasvirta, "Observations on Typing from 136
# Million Keystrokes", CHI 2018: across 168,000 participants the mean inter-key interval is
# 238.66 ms (SD 111.60) and the mean key-press duration 116.25 ms (SD 23.88). Each synthetic
# person draws a mean from those population distributions; the spread of single keystrokes
# around a person's mean (log-sigma 0.45 for flights, 0.25 for holds), the backspace rate (3 %)
# and the share of pasted answers (5 %) are this project's assumptions, not published figures.
IKI_MEAN_MS, IKI_SD_MS = 238.66, 111.60
HOLD_MEAN_MS, HOLD_SD_MS = 116.25, 23.88

# ---- conversion variants (this project's assumptions, chosen to span real browsers) ----------
VARIANTS = ("embed", "raw", "hz60", "hz120", "hz240", "rdp", "jitter", "scale", "cut")
# Typing swaps (HOLDOUT only): the same recorded pointer session, the `embed` conversion, and the
# rest of the session typed by another source: a CMU subject, a free-text typist of the Aalto
# set, a synthetic typist, and synthetic typists whose mean keydown-to-keydown interval is fixed
# at the slow and fast ends of people (120 and 600 ms). Their scores against each other are the
# report's swap tests: how much the score depends on where the typing came from.
SWAPS = ("typing-cmu", "typing-aalto", "typing-synthetic", "typing-iki120", "typing-iki600")
# Devices whose recordings are touch, not a mouse.
TOUCH_DEVICES = {"phone-touch"}
# Refresh-rate variants: recorded moves further apart than this are a pointer at rest, not a
# movement sampled sparsely, and are not interpolated (the scorer calls 300 ms a pause).
INTERPOLATE_MAX_MS = 250
# Remote-desktop-like coalescing: delivery intervals lognormal, median 50 ms, clipped.
RDP_MEDIAN_MS, RDP_SIGMA, RDP_MIN_MS, RDP_MAX_MS = 50.0, 0.6, 16.0, 200.0
# Timestamp jitter and main-thread stalls (about one per 5 s, 50-250 ms each).
JITTER_SD_MS, STALL_EVERY_MS, STALL_MIN_MS, STALL_MAX_MS = 3.0, 5000.0, 50.0, 250.0
# Another screen scale: CSS pixels per recorded pixel (the device pixel ratio changes inversely).
SCALE_FACTORS = (0.67, 0.8, 1.25, 1.5, 2.0)
# The session left early: the share of its duration kept.
CUT_SHARE = (0.35, 0.70)

# Recorded pointer rows: (t ms on the session clock, kind, x, y).
MOVE, PRESS, RELEASE = "move", "press", "release"
PRESS_RIGHT, RELEASE_RIGHT = "press-right", "release-right"
WHEEL_UP, WHEEL_DOWN = "wheel-up", "wheel-down"  # one wheel notch (100 px)

# ---- CMU keystroke benchmark (Killourhy and Maxion, DSN 2009) ---------------------------------
# The keys of `.tie5Roanl` + Return in order, and the embed's key class of each. `Shift.r` is the
# capital R; the embed also sees the Shift key held around it (Timeline.cmu_typing).
CMU_KEYS = ("period", "t", "i", "e", "five", "Shift.r", "o", "a", "n", "l", "Return")
CMU_KEY_CLASSES = {"period": "char", "five": "digit", "Shift.r": "char", "Return": "enter"}

DESKTOP_UA = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
PHONE_UA = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36"
)

DELBOT_DEVICES = {
    "circles_human_pc1": "pc-mouse",
    "circles_human_pc2": "pc-mouse",
    "circles_human_fast": "pc-mouse",
    "circles_human_pc2_pad": "touchpad",
    "circles_human_tel": "phone-touch",
    "circles_human_vm": "virtual-machine",
}


def balabit_split(user: str) -> str:
    """A Balabit user's split: every session of a person is on one side."""
    return "holdout" if user in BALABIT_HOLDOUT_USERS else "train"


def is_holdout(relative_path: str) -> bool:
    return hashlib.sha1(relative_path.encode()).hexdigest()[0] in "01234"


def cmu_split(subject: str) -> str:
    return "holdout" if is_holdout("cmu-split/" + subject) else "train"


def reference_for(source: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "telltale-quality/" + source))


def variant_reference(source: str, variant: str) -> str:
    return reference_for(f"{source}#{variant}")


# ---- sessions --------------------------------------------------------------------------------


@dataclass
class BaseSession:
    """One recorded session before conversion: its pointer rows and every other event."""

    source: str  # the pointer data's data set and files
    device: str
    cluster: str  # the bootstrap's resampling unit: a Balabit user or a DELBOT device folder
    split: str
    width: int  # the recorded screen, CSS px
    height: int
    rows: list  # recorded pointer rows on the session clock
    others: list  # typing, scrolling, focus and leaving: the same in every variant
    left_at: float  # when the page is left (the closing visibility/pagehide pair)
    typing: str  # "cmu", "aalto", "synthetic", "soft" (a phone's own keyboard) or "none"
    typed: str = ""  # the real typist and recordings typed
    # The timeline as it stood after the recorded strokes, for the typing swaps (None: no swaps).
    resume: tuple | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return reference_for(self.source)

    @property
    def pointer(self) -> str:
        return "touch" if self.device in TOUCH_DEVICES else "mouse"

    def swapped(self, swap: str) -> list[dict]:
        """The rest of the session (everything but the pointer rows) typed by the swap's source
        instead of the base's own; the same think pauses, scrolling and leaving draws as far as
        the typing leaves them the same."""
        if self.resume is None:
            raise ValueError(f"{self.source} has no typing swaps")
        state, t, scroll_y, events, sources = self.resume
        timeline = Timeline(random.Random())
        timeline.rng.setstate(state)
        timeline.t, timeline.scroll_y, timeline.events = t, scroll_y, list(events)
        kind = swap.removeprefix("typing-")
        if kind.startswith("iki"):
            typing = Typing("synthetic", iki=float(kind.removeprefix("iki")))
        else:
            typing = sources.get(kind) or Typing("synthetic")
        finish(timeline, typing)
        return timeline.events


@dataclass(eq=False)
class HumanSession:
    reference: str
    source: str  # data set and the files it came from, and the CMU subject it types with
    device: str
    cluster: str  # the bootstrap's resampling unit: a Balabit user or a DELBOT device folder
    split: str
    base: str = ""  # the base session's id, the same for all its variants
    variant: str = "embed"
    typing: str = "synthetic"  # the keys this session holds: "cmu", "aalto", "synthetic", "soft" or "none"
    recording: BaseSession | None = field(default=None, repr=False)
    fixed_events: list | None = field(default=None, repr=False)

    @property
    def events(self) -> list[dict]:
        """The session's events, converted from the recording on every access: every variant of
        every session held at once would be millions of events."""
        if self.fixed_events is not None:
            return self.fixed_events
        return convert(self.recording, self.variant)

    @events.setter
    def events(self, value: list[dict]) -> None:
        self.fixed_events = value

    def label(self) -> dict:
        return {
            "reference": self.reference,
            "class": "human",
            "generator": "human",
            "seed": None,
            "device": self.device,
            "cluster": self.cluster,
            "split": self.split,
            "source": self.source,
            "variant": self.variant,
            "base": self.base or self.reference,
            "typing": self.typing,
        }


def variant_session(base: BaseSession, variant: str) -> HumanSession:
    typing = base.typing
    if variant in SWAPS:
        kind = variant.removeprefix("typing-")
        typing = "synthetic" if kind.startswith("iki") else kind
    if variant == "cut":
        at = cut_time(base)
        if not any(e["type"] == "keydown" and e["t"] < at for e in base.others):
            typing = "none"  # left before typing anything
    source = base.source + (f"+{base.typed}" if base.typed else "")
    return HumanSession(variant_reference(base.source, variant), source, base.device, base.cluster,
                        base.split, base.id, variant, typing, base)


# ---- conversions: recorded pointer rows -> the rows the embed emits --------------------------


def thinned(rows: list) -> list:
    """The embed's rule: a move less than 16 ms (by the timestamps it reads) after the last move
    it kept is dropped; every other row passes."""
    kept, last = [], -math.inf
    for row in rows:
        if row[1] == MOVE:
            if row[0] - last < MOVE_INTERVAL_MS:
                continue
            last = row[0]
        kept.append(row)
    return kept


def date_now(rows: list) -> list:
    """Timestamps as the embed reads them when the event is dispatched: Date.now(), whole ms."""
    return [(float(math.floor(t)), kind, x, y) for t, kind, x, y in rows]


def coalesced(rows: list, ticks: np.ndarray, interpolate: bool) -> list:
    """Moves delivered at `ticks` only (display frames, remote-desktop updates): a tick delivers
    one move when the pointer moved since the last delivery, at the position as of the tick
    (interpolated along the recorded path when `interpolate`). Presses, releases and wheel
    notches are delivered at their own time, after a move to their position when the pointer
    moved since the last delivery (browsers flush coalesced moves before a discrete event)."""
    rows = sorted(rows, key=lambda row: row[0])  # one phone recording steps back in time once
    moves = [row for row in rows if row[1] == MOVE]
    others = [row for row in rows if row[1] != MOVE]
    if not moves:
        return others
    stamps = np.array([row[0] for row in moves])
    last = np.r_[stamps[1:] != stamps[:-1], True]  # the position as of a time: its last row
    T = stamps[last]
    X = np.array([row[2] for row in moves])[last]
    Y = np.array([row[3] for row in moves])[last]
    times = np.concatenate([np.asarray(ticks, dtype=float), [row[0] for row in others]])
    which = np.concatenate([np.full(len(ticks), -1), np.arange(len(others))])
    order = np.lexsort((which, times))  # by time; a tick before a discrete row at the same time
    times, which = times[order], which[order]
    seen = np.searchsorted(T, times, side="right")  # recorded positions up to each delivery
    new = seen > np.r_[0, seen[:-1]]
    before, after = np.maximum(seen - 1, 0), np.minimum(seen, len(T) - 1)
    moving = (seen > 0) & (seen < len(T)) & (T[after] - T[before] <= INTERPOLATE_MAX_MS)
    if not interpolate:
        moving[:] = False
    emit = new | moving
    xs = np.where(moving, np.interp(times, T, X), X[before])
    ys = np.where(moving, np.interp(times, T, Y), Y[before])
    out = []
    times, which, emit, xs, ys = times.tolist(), which.tolist(), emit.tolist(), xs.tolist(), ys.tolist()
    for k in range(len(times)):
        if emit[k]:
            out.append((times[k], MOVE, xs[k], ys[k]))
        if which[k] >= 0:
            out.append(others[which[k]])
    return out


def span(rows: list) -> tuple[float, float]:
    stamps = [row[0] for row in rows]
    return min(stamps), max(stamps)


def convert_embed(rows: list, rng: random.Random) -> list:
    """`embed`: the recorded timings, thinned by the embed to one move per 16 ms."""
    return thinned(rows)


def convert_raw(rows: list, rng: random.Random) -> list:
    """`raw`: every recorded move, timestamps rounded to whole ms, no thinning."""
    return [(float(round(t)), kind, x, y) for t, kind, x, y in rows]


def refresh_rate(hz: int):
    def convert_display(rows: list, rng: random.Random) -> list:
        """`hzN`: a display of N Hz delivers coalesced pointer events, one per frame (frame times
        with a random phase) at the path's position interpolated at the frame time; the embed
        stamps them with Date.now() and thins them to one per 16 ms."""
        if not rows:
            return []
        period = 1000.0 / hz
        phase = rng.uniform(0, period)
        first, last = span(rows)
        frames = phase + period * np.arange(math.ceil((first - phase) / period),
                                            math.floor((last + period - phase) / period) + 1)
        return thinned(date_now(coalesced(rows, frames, interpolate=True)))

    convert_display.__name__ = f"convert_hz{hz}"
    return convert_display


def convert_rdp(rows: list, rng: random.Random) -> list:
    """`rdp`: moves coalesced at irregular intervals (lognormal, median 50 ms, clipped to
    16-200 ms) at the position as of that time, as a remote desktop delivers them; then Date.now()
    and the embed's thinning."""
    if not rows:
        return []
    first, last = span(rows)
    draws = np.random.default_rng(rng.getrandbits(64))
    count = int((last - first) / RDP_MIN_MS) + 3
    intervals = np.clip(RDP_MEDIAN_MS * np.exp(RDP_SIGMA * draws.standard_normal(count)), RDP_MIN_MS, RDP_MAX_MS)
    ticks = first - rng.uniform(0, RDP_MEDIAN_MS) + np.cumsum(intervals)
    ticks = ticks[ticks <= last + RDP_MAX_MS]
    return thinned(date_now(coalesced(rows, ticks, interpolate=False)))


def convert_jitter(rows: list, rng: random.Random) -> list:
    """`jitter`: each row's timestamp moved by N(0, 3 ms), and main-thread stalls (gaps between
    them exponential with mean 5 s, each 50-250 ms) hold the rows that fall in them until the
    stall ends, all stamped then; row order is kept. Then Date.now() and the embed's thinning."""
    if not rows:
        return []
    draws = np.random.default_rng(rng.getrandbits(64))
    first, last = span(rows)
    stamps = np.array([row[0] for row in rows]) + draws.normal(0, JITTER_SD_MS, len(rows))
    count = int((last - first) / STALL_EVERY_MS * 2) + 5
    gaps = draws.exponential(STALL_EVERY_MS, count)
    lengths = draws.uniform(STALL_MIN_MS, STALL_MAX_MS, count)
    starts = first + np.cumsum(gaps) + np.r_[0, np.cumsum(lengths)[:-1]]  # stalls never overlap
    ends = starts + lengths
    index = np.searchsorted(starts, stamps, side="right") - 1
    stalled = (index >= 0) & (stamps < ends[np.maximum(index, 0)])
    stamps = np.where(stalled, ends[np.maximum(index, 0)], stamps)
    stamps = np.maximum.accumulate(stamps)  # the order of the rows is kept
    return thinned(date_now([(t, kind, x, y) for t, (_, kind, x, y) in zip(stamps.tolist(), rows)]))


CONVERSIONS = {
    "embed": convert_embed,
    "raw": convert_raw,
    "hz60": refresh_rate(60),
    "hz120": refresh_rate(120),
    "hz240": refresh_rate(240),
    "rdp": convert_rdp,
    "jitter": convert_jitter,
    # Session-level variants: convert() scales the coordinates and screen, or cuts the session;
    # the pointer rows are then the embed's.
    "scale": convert_embed,
    "cut": convert_embed,
}


def scale_factor(base: BaseSession) -> float:
    return random.Random(base.id + "/scale").choice(SCALE_FACTORS)


def cut_time(base: BaseSession) -> float:
    return base.left_at * random.Random(base.id + "/cut").uniform(*CUT_SHARE)


def convert(base: BaseSession, variant: str) -> list[dict]:
    """A base session's events in one variant: the one place a conversion is applied."""
    reference = variant_reference(base.source, variant)
    rng = random.Random(reference)  # the conversion's own draws (frame phase, intervals, jitter)
    factor = scale_factor(base) if variant == "scale" else 1.0
    rows = base.rows
    if factor != 1.0:
        rows = [(t, kind, x * factor, y * factor) for t, kind, x, y in rows]
    swap = variant in SWAPS
    pointer = CONVERSIONS["embed" if swap else variant](rows, rng)
    others = base.swapped(variant) if swap else base.others
    events = sorted(emitted(pointer, base.pointer) + others, key=lambda e: e["t"])
    if variant == "cut":
        events = left_early(events, cut_time(base))
    start = session_event(reference, base.device, base.width, base.height, factor)
    return [{"type": "session", "t": 0.0, "data": start}] + events


class Contact(str):
    """A touch row's kind (PRESS, MOVE or RELEASE, and equal to it) carrying the contact's
    geometry as the browser reports it: radius (`radiusX`, CSS px) and force (0-1). The kind
    object travels through every conversion with its row, so the geometry does too."""

    radius: float
    force: float

    def __new__(cls, kind: str, radius: float, force: float):
        contact = super().__new__(cls, kind)
        contact.radius, contact.force = radius, force
        return contact


def emitted(rows: list, pointer: str) -> list[dict]:
    """Converted pointer rows as the embed's events. A touch sends the pointer and the touch
    events a phone's browser fires (with the contact's geometry where the recording has it, else
    none: 0), and a tap (a touch released where it began) is followed by its click."""
    events = []
    touch = pointer == "touch"
    scroll_y = 0
    pressed_at = None
    for t, kind, x, y in rows:
        at = {"x": round(x), "y": round(y)}
        geometry = {"force": round(getattr(kind, "force", 0.0), 4), "radius": round(getattr(kind, "radius", 0.0), 2)}
        if kind == MOVE:
            events.append({"type": "pointermove", "t": t, "data": {**at, "pointerType": pointer, "trusted": True}})
            if touch:
                events.append({"type": "touchmove", "t": t, "data": {**at, **geometry, "trusted": True}})
        elif kind in (PRESS, PRESS_RIGHT, RELEASE, RELEASE_RIGHT):
            button = 2 if kind in (PRESS_RIGHT, RELEASE_RIGHT) else 0
            down = kind in (PRESS, PRESS_RIGHT)
            events.append({"type": "pointerdown" if down else "pointerup", "t": t, "data": {
                **at, "pointerType": pointer, "trusted": True, "button": button, "target": "other"}})
            if touch:
                events.append({"type": "touchstart" if down else "touchend", "t": t, "data": {
                    **at, **geometry, "trusted": True}})
                if down:
                    pressed_at = (x, y)
                elif pressed_at is not None and math.hypot(x - pressed_at[0], y - pressed_at[1]) < 10:
                    events.append({"type": "click", "t": t + 1, "data": {
                        **at, "pointerType": pointer, "trusted": True, "button": 0, "target": "other"}})
            elif not down and button == 0:
                # A mouse press and release on the same element is a click.
                events.append({"type": "click", "t": t + 1, "data": {
                    **at, "pointerType": pointer, "trusted": True, "button": 0, "target": "other"}})
        elif kind in (WHEEL_UP, WHEEL_DOWN):
            dy = 100 if kind == WHEEL_DOWN else -100
            scroll_y = max(0, scroll_y + dy)
            events.append({"type": "wheel", "t": t, "data": {"dx": 0, "dy": dy, "deltaMode": 0, "trusted": True}})
            events.append({"type": "scroll", "t": t + 8, "data": {"x": 0, "y": scroll_y}})
    return events


def left_early(events: list[dict], at: float) -> list[dict]:
    """The session cut at `at`, closed as a page left then closes (pagehide alone when the page
    was already hidden)."""
    kept = [e for e in events if e["t"] < at]
    hidden = False
    for event in kept:
        if event["type"] == "visibility":
            hidden = event["data"]["state"] == "hidden"
    if not hidden:
        kept.append({"type": "visibility", "t": at, "data": {"state": "hidden"}})
    kept.append({"type": "pagehide", "t": at + 2, "data": {}})
    return kept


def session_event(reference: str, device: str, width: int, height: int, scale: float = 1.0) -> dict:
    """An ordinary Chrome's session event; `scale` is CSS px per recorded px (another display
    scale: the same physical pixels, so the device pixel ratio changes inversely)."""
    phone = device == "phone-touch"
    width, height = round(width * scale), round(height * scale)
    return {
        "sessionId": reference,
        "interviewId": reference,
        "embedVersion": "1.0.0",
        "origin": "https://survey.example",
        "path": "/s/quality",
        "userAgent": PHONE_UA if phone else DESKTOP_UA,
        "languages": ["en-US", "en"],
        "timezoneOffset": -60,
        "screenWidth": width,
        "screenHeight": height,
        "viewportWidth": width if phone else width - 16,
        "viewportHeight": height - (60 if phone else 130),
        "devicePixelRatio": round((2.625 if phone else 1) / scale, 4),
        "maxTouchPoints": 5 if phone else 0,
        "hardwareConcurrency": 8,
        "webdriver": False,
    }


# ---- everything that is not the conversion ---------------------------------------------------


class Timeline:
    """Builds one session's events in time order, relative to its start."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.events: list[dict] = []
        self.t = 0.0
        self.field = 0
        self.scroll_y = 0

    def push(self, kind: str, t: float, data: dict) -> None:
        self.events.append({"type": kind, "t": t, "data": data})
        self.t = max(self.t, t)

    def pause(self, median_ms: float, sigma: float) -> None:
        self.t += median_ms * math.exp(sigma * self.rng.gauss(0, 1))

    def key(self, key_class: str, down: float, up: float) -> None:
        self.push("keydown", down, {"keyClass": key_class, "trusted": True, "repeat": False})
        self.push("keyup", up, {"keyClass": key_class, "trusted": True, "repeat": False})

    def typing(self, person: "Typist", chars: int) -> None:
        """Typed answer text: key classes only, as the embed sends them."""
        self.field += 1
        if self.rng.random() < 0.05:  # pasted with Ctrl+V
            self.pause(400, 0.3)
            t = self.t
            self.push("keydown", t, {"keyClass": "modifier", "trusted": True, "repeat": False})
            self.push("keydown", t + 120, {"keyClass": "char", "trusted": True, "repeat": False})
            self.push("paste", t + 121, {"length": chars})
            self.push("input", t + 123, {"inputType": "insertFromPaste", "lengthDelta": chars, "field": self.field})
            self.push("keyup", t + 210, {"keyClass": "char", "trusted": True, "repeat": False})
            self.push("keyup", t + 260, {"keyClass": "modifier", "trusted": True, "repeat": False})
            return
        word = 0
        for index in range(chars):
            if index == 0 or self.rng.random() < 0.02:  # a capital: shift held over the key
                shift_at = self.t
                self.push("keydown", shift_at, {"keyClass": "modifier", "trusted": True, "repeat": False})
                self.t += person.flight() * 0.5
            else:
                shift_at = None
            if self.rng.random() < 0.03:
                key = "backspace"
            elif word >= 2 and self.rng.random() < 1 / 4.7:
                key, word = "space", -1
            else:
                key = "char"
            word += 1
            down = self.t
            hold = person.hold()
            self.push("keydown", down, {"keyClass": key, "trusted": True, "repeat": False})
            self.push("input", down + self.rng.uniform(1, 4), {
                "inputType": "deleteContentBackward" if key == "backspace" else "insertText",
                "lengthDelta": -1 if key == "backspace" else 1,
                "field": self.field,
            })
            self.push("keyup", down + hold, {"keyClass": key, "trusted": True, "repeat": False})
            if shift_at is not None:
                self.push("keyup", down + hold + self.rng.uniform(10, 60),
                          {"keyClass": "modifier", "trusted": True, "repeat": False})
            self.t = down + person.flight()

    def cmu_typing(self, repetitions: list["CmuRepetition"], subject: "CmuSubject") -> None:
        """One typed answer with a CMU subject's real key timing: consecutive repetitions of
        `.tie5Roanl`, every key down at the recorded keydown-to-keydown times (DD) and up after
        the recorded hold (H). The Return of the answer's last repetition is kept as the `enter`
        that ends the answer (no input: a one-line field); the other Returns are dropped, and the
        next repetition's first key follows the dropped Return's keydown after one more flight
        drawn from the subject's own recorded keydown-to-keydown times, like the space between
        two words. The embed sees the Shift held around the capital R (see `shift_around`)."""
        self.field += 1
        start, end = self.t, self.t
        five, capital, after = (CMU_KEYS.index(k) for k in ("five", "Shift.r", "o"))
        for index, rep in enumerate(repetitions):
            last = index == len(repetitions) - 1
            downs = [start + offset for offset in rep.downs]
            for position, (key, down, hold) in enumerate(zip(CMU_KEYS, downs, rep.holds)):
                if key == "Return" and not last:
                    continue
                key_class = CMU_KEY_CLASSES.get(key, "char")
                if position == capital:
                    self.shift_around(downs[five] + rep.holds[five], down, down + hold, downs[after])
                self.key(key_class, down, down + hold)
                if key_class in ("char", "digit"):
                    self.push("input", down + self.rng.uniform(1, 4),
                              {"inputType": "insertText", "lengthDelta": 1, "field": self.field})
                end = max(end, down + hold)
            start = downs[-1] + self.rng.choice(subject.flights)
        self.t = end

    def shift_around(self, previous_up: float, down: float, up: float, next_down: float) -> None:
        """The Shift of a capital typed at down..up (the data set times the capital, not Shift:
        the key before it is always released 100 ms or more before it, room for the Shift press).
        Shift goes down between the previous key's release and the capital's press, and up
        10-60 ms after the capital's release, but before the next key (else that key would be a
        capital too)."""
        shift_down = previous_up + self.rng.uniform(0.3, 0.7) * max(0.0, down - previous_up)
        shift_up = up + self.rng.uniform(10, 60)
        if shift_up >= next_down:
            shift_up = self.rng.uniform(up if up < next_down else down, next_down)
        self.key("modifier", shift_down, shift_up)

    def replay_keys(self, keys: list, soft: bool = False) -> None:
        """One typed answer replaying a recorded person's keys, (down_ms, up_ms, key_class) on
        their own clock, from the timeline's now. A hardware keyboard sends each key's down and
        up as recorded, and an input for every key that types. A phone's soft keyboard (`soft`)
        reports no key to the page: Chrome on Android fires keydown and keyup of an unidentified
        key (class `other`) together as the character is committed, when the finger lifts, then
        the input."""
        self.field += 1
        if not keys:
            return
        origin = self.t - keys[0][0]
        end = self.t
        for down, up, key_class in keys:
            down, up = origin + down, origin + up
            text = key_class in ("char", "digit", "space")
            if soft:
                committed = key_class if key_class in ("backspace", "enter") else "other"
                self.key(committed, up, up + self.rng.uniform(1, 6))
            else:
                self.key(key_class, down, up)
            if text or key_class == "backspace":
                self.push("input", (up if soft else down) + self.rng.uniform(1, 4), {
                    "inputType": "deleteContentBackward" if key_class == "backspace" else "insertText",
                    "lengthDelta": -1 if key_class == "backspace" else 1, "field": self.field})
            end = max(end, up + 6)
        self.t = end

    def scrolling(self) -> None:
        """A few wheel flicks: notches of 100 px (Chromium's default per notch) in bursts."""
        for _ in range(self.rng.randint(1, 3)):
            for _ in range(self.rng.randint(1, 5)):
                self.t += self.rng.lognormvariate(math.log(60), 0.4)
                self.push("wheel", self.t, {"dx": 0, "dy": 100, "deltaMode": 0, "trusted": True})
                self.scroll_y += 100
                self.push("scroll", self.t + self.rng.uniform(4, 12), {"x": 0, "y": self.scroll_y})
            self.pause(900, 0.5)

    def away(self) -> None:
        """Switching to another tab and back."""
        self.push("blur", self.t, {})
        self.push("visibility", self.t + 5, {"state": "hidden"})
        self.pause(6000, 0.7)
        self.push("visibility", self.t, {"state": "visible"})
        self.push("focus", self.t + 3, {})


class Typist:
    """One synthetic person's keystroke rhythm, drawn from the published population figures."""

    def __init__(self, rng: random.Random, iki: float | None = None):
        self.rng = rng
        drawn = min(900.0, max(100.0, rng.gauss(IKI_MEAN_MS, IKI_SD_MS)))
        self.iki = drawn if iki is None else iki
        self.hold_mean = min(250.0, max(50.0, rng.gauss(HOLD_MEAN_MS, HOLD_SD_MS)))

    def flight(self) -> float:
        # A lognormal whose mean is the person's mean inter-key interval.
        sigma = 0.45
        return self.iki * math.exp(sigma * self.rng.gauss(0, 1) - sigma * sigma / 2)

    def hold(self) -> float:
        sigma = 0.25
        return self.hold_mean * math.exp(sigma * self.rng.gauss(0, 1) - sigma * sigma / 2)


@dataclass
class CmuRepetition:
    """One recorded repetition of `.tie5Roanl` + Return, in ms."""

    subject: str
    session: int
    rep: int
    downs: tuple  # each key's keydown after the first key's (the DD times summed)
    holds: tuple  # each key's hold (H)


@dataclass
class CmuSubject:
    name: str
    runs: list  # consecutive repetitions, one list per recording session
    flights: list  # every keydown-to-keydown time recorded for the subject, ms

    @property
    def split(self) -> str:
        return cmu_split(self.name)

    def consecutive(self, count: int, rng: random.Random) -> list[CmuRepetition]:
        """`count` consecutive repetitions of one recording session (fewer when no session has
        that many), starting anywhere."""
        count = min(count, max(len(run) for run in self.runs))
        windows = [(run, start) for run in self.runs for start in range(len(run) - count + 1)]
        run, start = rng.choice(windows)
        return run[start:start + count]


def load_cmu(path: Path) -> dict[str, CmuSubject]:
    """The CMU subjects by name; none when the file is not there."""
    if not path.is_file():
        return {}
    repetitions: dict[str, list[CmuRepetition]] = defaultdict(list)
    with open(path, newline="") as lines:
        for row in csv.DictReader(lines):
            flights = [1000 * float(row[f"DD.{a}.{b}"]) for a, b in zip(CMU_KEYS, CMU_KEYS[1:])]
            downs = tuple(np.r_[0.0, np.cumsum(flights)].tolist())
            holds = tuple(1000 * float(row[f"H.{key}"]) for key in CMU_KEYS)
            repetitions[row["subject"]].append(
                CmuRepetition(row["subject"], int(row["sessionIndex"]), int(row["rep"]), downs, holds))
    subjects = {}
    for name, reps in sorted(repetitions.items()):
        reps.sort(key=lambda r: (r.session, r.rep))
        runs: list[list[CmuRepetition]] = []
        for rep in reps:
            if runs and runs[-1][-1].session == rep.session and runs[-1][-1].rep == rep.rep - 1:
                runs[-1].append(rep)
            else:
                runs.append([rep])
        flights = [b - a for rep in reps for a, b in zip(rep.downs, rep.downs[1:])]
        subjects[name] = CmuSubject(name, runs, flights)
    return subjects


@dataclass
class Typing:
    """What a base session types its answers with."""

    kind: str  # "cmu", "aalto", "synthetic" or "none"
    subject: CmuSubject | None = None  # kind "cmu"
    sentences: list | None = None  # kind "aalto": one person's typed sentences, keys each
    iki: float | None = None  # kind "synthetic": the typist's mean keydown-to-keydown interval

    @property
    def person(self) -> str:
        if self.subject is not None:
            return "cmu-keystroke:" + self.subject.name
        if self.sentences:
            return "aalto-136m:" + self.sentences[0].person
        return ""


TYPING_KINDS = ("cmu", "aalto", "synthetic")
# The Aalto set's terms grant non-commercial research use: it measures the model (HOLDOUT) and is
# never trained on, so its free-text typists are a typing source the model has not seen.
TYPING_KINDS_OF = {"train": ("cmu", "synthetic"), "holdout": TYPING_KINDS}


def choose_typing(sources: list[tuple[str, str, str]], subjects: dict[str, CmuSubject],
                  typists: dict[str, list] | None = None) -> dict[str, Typing]:
    """What each base session types with: the sessions of each person or device and split take
    a CMU subject's real password timing, an Aalto typist's real free text (HOLDOUT only) and a
    synthetic typist in turn (the first by a seeded draw), each real typist drawn by the
    session's seed among the people of the session's own split. `sources` holds (source, cluster, split);
    `typists` the Aalto people's sentences by person."""
    typists = typists or {}
    by_group: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source, cluster, split in sources:
        by_group[(cluster, split)].append(source)
    chosen: dict[str, Typing] = {}
    for (cluster, split), group in by_group.items():
        kinds = TYPING_KINDS_OF[split]
        offset = random.Random(f"typing/{cluster}/{split}").randrange(len(kinds))
        cmu = [subjects[name] for name in sorted(subjects) if subjects[name].split == split]
        aalto = [name for name in sorted(typists) if recordings.split(recordings.AALTO_136M, name) == split]
        for index, source in enumerate(sorted(group)):
            chosen[source] = typing_for(source, kinds[(index + offset) % len(kinds)], cmu, aalto, typists)
    return chosen


def typing_for(source: str, kind: str, cmu: list, aalto: list, typists: dict) -> Typing:
    """A Typing of `kind` for the session `source`, its real typist drawn by the session's seed
    (synthetic when no real typist of that kind is at hand)."""
    draw = random.Random(reference_for(source) + "/typist/" + kind)
    if kind == "cmu" and cmu:
        return Typing("cmu", subject=draw.choice(cmu))
    if kind == "aalto" and aalto:
        return Typing("aalto", sentences=typists[draw.choice(aalto)])
    return Typing("synthetic")


def finish(timeline: Timeline, typing: Typing) -> str:
    """The survey-shaped rest of a session: one or two typed answers (a real or synthetic
    typist's), scrolling, sometimes a tab switch, and leaving. Returns what real typing was
    replayed."""
    rng = timeline.rng
    answers = rng.randint(1, 2)
    typed = ""
    if typing.kind == "cmu" and typing.subject is not None:
        subject = typing.subject
        # One to six repetitions (10 to 60 characters) an answer, the answers consecutive.
        lengths = [rng.randint(1, 6) for _ in range(answers)]
        repetitions = subject.consecutive(sum(lengths), rng)
        first = repetitions[0]
        typed = f"cmu-keystroke:{subject.name}/session{first.session}/rep{first.rep}-{repetitions[-1].rep}"
        for length in lengths:
            chunk, repetitions = repetitions[:length], repetitions[length:]
            if chunk:
                timeline.pause(1500, 0.5)
                timeline.cmu_typing(chunk, subject)
    elif typing.kind == "aalto" and typing.sentences:
        # Consecutive sentences of one person, an answer each.
        start = rng.randrange(max(1, len(typing.sentences) - answers + 1))
        chosen = typing.sentences[start:start + answers]
        typed = f"aalto-136m:{chosen[0].person}/sentences {','.join(s.session for s in chosen)}"
        for sentence in chosen:
            timeline.pause(1500, 0.5)
            timeline.replay_keys(sentence.keys)
    elif typing.kind != "none":
        typist = Typist(rng, typing.iki)
        for _ in range(answers):
            timeline.pause(1500, 0.5)
            timeline.typing(typist, rng.randint(8, 60))
    if rng.random() < 0.7:
        timeline.pause(1000, 0.5)
        timeline.scrolling()
    leave(timeline)
    return typed


def leave(timeline: Timeline) -> None:
    """Sometimes a tab switch, then leaving the page: what the browser fires as the survey's
    last page unloads."""
    rng = timeline.rng
    if rng.random() < 0.15:
        timeline.pause(2000, 0.5)
        timeline.away()
    timeline.pause(800, 0.5)
    timeline.push("visibility", timeline.t, {"state": "hidden"})
    timeline.push("pagehide", timeline.t + 2, {})


def base_session(source: str, device: str, cluster: str, split: str, width: int, height: int,
                 strokes: list[list], typing: Typing, swaps: dict[str, Typing] | None = None) -> BaseSession | None:
    """Lays the recorded strokes out on the session clock after think pauses, then the rest of
    the session; all drawn from the base session's own seed. `swaps` holds the typists of the
    typing swaps (HOLDOUT sessions)."""
    rng = random.Random(reference_for(source))
    timeline = Timeline(rng)
    rows: list = []
    for stroke in strokes:
        if not stroke:
            continue
        timeline.pause(1500 if not rows else 1200, 0.5)
        start, first = timeline.t, stroke[0][0]
        rows += [(start + t - first, kind, x, y) for t, kind, x, y in stroke]
        timeline.t = max(row[0] for row in rows) + 1
    if len(thinned(rows)) < 5:
        return None
    for _, kind, _, _ in rows:  # the synthetic scrolling goes on from the recorded wheel
        if kind in (WHEEL_UP, WHEEL_DOWN):
            timeline.scroll_y = max(0, timeline.scroll_y + (100 if kind == WHEEL_DOWN else -100))
    resume = None
    if swaps is not None:
        resume = (rng.getstate(), timeline.t, timeline.scroll_y, list(timeline.events), swaps)
    typed = finish(timeline, typing)
    left_at = max(e["t"] for e in timeline.events if e["type"] == "visibility")
    return BaseSession(source, device, cluster, split, width, height, rows, timeline.events, left_at,
                       typing.kind, typed, resume)


def swap_typists(source: str, split: str, subjects: dict[str, CmuSubject], typists: dict[str, list]) -> dict[str, Typing]:
    """The real typists a HOLDOUT session's typing swaps use: of its own split, by its seed."""
    cmu = [subjects[name] for name in sorted(subjects) if subjects[name].split == split]
    aalto = [name for name in sorted(typists) if recordings.split(recordings.AALTO_136M, name) == split]
    return {kind: typing_for(source + "/swap", kind, cmu, aalto, typists) for kind in TYPING_KINDS}


# ---- DELBOT-Mouse ----------------------------------------------------------------------------

DELBOT_KINDS = {"Move": MOVE, "MoveTouch": MOVE, "Pressed": PRESS, "PressedTouch": PRESS,
                "Released": RELEASE, "ReleasedTouch": RELEASE}


def read_delbot_stroke(path: Path):
    lines = path.read_text().split("\n")
    width, height = (int(float(v)) for v in lines[0].split(":", 1)[1].split(","))
    rows = []
    for line in lines[1:]:
        parts = line.strip().split(",")
        if len(parts) != 4:
            continue
        try:
            stamp, x, y = float(parts[0]), float(parts[2]), float(parts[3])
        except ValueError:
            continue
        if not math.isfinite(stamp):
            continue
        if not (math.isfinite(x) and math.isfinite(y)):
            # The phone recordings' touch releases hold NaN positions: the finger lifts where
            # it last was. Other rows without a position are dropped.
            if not parts[1].startswith("Released") or not rows:
                continue
            x, y = rows[-1][2], rows[-1][3]
        rows.append((stamp, parts[1], x, y))
    return width, height, paired(rows)


def paired(rows: list) -> list:
    """The rows with every release that ends no press dropped. The DELBOT recorder logs a second
    `Released` row after most strokes (the release of a click elsewhere on its page, or the
    compatibility mouse event after a touch), with no press before it: sent as is, it would be a
    click with no press, which no mouse makes."""
    kept, held = [], False
    for row in rows:
        if row[1] in ("Pressed", "PressedTouch"):
            held = True
        elif row[1] in ("Released", "ReleasedTouch"):
            if not held:
                continue
            held = False
        kept.append(row)
    return kept


def delbot_bases(root: Path, typists: "Typists") -> list[BaseSession]:
    groups = []
    for folder, device in DELBOT_DEVICES.items():
        files = sorted((root / folder).glob("*.txt"))
        by_split: dict[str, list[Path]] = {"train": [], "holdout": []}
        for path in files:
            relative = f"{folder}/{path.name}"
            by_split["holdout" if is_holdout(relative) else "train"].append(path)
        for split, paths in by_split.items():
            step = 1 if folder == "circles_human_fast" else DELBOT_STROKES_PER_SESSION
            for start in range(0, len(paths), step):
                group = paths[start:start + step]
                source = "delbot-mouse:" + "+".join(f"{folder}/{p.name}" for p in group)
                groups.append((source, device, folder, split, group))
    typing = typists.choose([(s, "delbot/" + folder, split) for s, _, folder, split, _ in groups])
    bases = []
    for source, device, folder, split, group in groups:
        width, height, strokes = 1920, 1080, []
        for path in group:
            width, height, rows = read_delbot_stroke(path)
            strokes.append([(t, DELBOT_KINDS[kind], x, y) for t, kind, x, y in rows if kind in DELBOT_KINDS])
        base = base_session(source, device, "delbot/" + folder, split, width, height, strokes, typing[source],
                            typists.swaps(source, split))
        if base is not None:
            bases.append(base)
    return bases


def delbot_sessions(root: Path, subjects: dict[str, CmuSubject] | None = None,
                    variants=VARIANTS) -> list[HumanSession]:
    return [variant_session(base, v) for base in delbot_bases(root, Typists(subjects or {}, {}))
            for v in variants]


# ---- Balabit Mouse Dynamics ------------------------------------------------------------------


def read_balabit(path: Path) -> tuple[list, int, int]:
    """Rows of the first 600 s (record timestamps: when the monitor saw the RDP packet, so moves
    of one packet share a time) and the screen size they fit."""
    rows = []
    max_x, max_y = 0.0, 0.0
    for line in path.read_text().split("\n")[1:]:
        parts = line.strip().split(",")
        if len(parts) != 6:
            continue
        try:
            stamp, x, y = float(parts[0]), float(parts[4]), float(parts[5])
        except ValueError:
            continue
        if stamp > BALABIT_MAX_SECONDS:
            break
        button, state = parts[2], parts[3]
        right = button == "Right"
        if state in ("Move", "Drag"):
            kind = MOVE
        elif state == "Pressed":
            kind = PRESS_RIGHT if right else PRESS
        elif state == "Released":
            kind = RELEASE_RIGHT if right else RELEASE
        elif button == "Scroll" and state in ("Up", "Down"):
            kind = WHEEL_DOWN if state == "Down" else WHEEL_UP
        else:
            continue
        rows.append((stamp * 1000, kind, x, y))
        max_x, max_y = max(max_x, x), max(max_y, y)
    width, height = (1920, 1200) if max_x > 1680 or max_y > 1050 else (1680, 1050)
    return rows, width, height


def unpack_balabit(archive: Path, unpack_to: Path) -> Path:
    """The archive's `test_files` folder, unpacked under `unpack_to` the first time."""
    folder = unpack_to / "test_files"
    if not folder.is_dir():
        unpack_to.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(unpack_to, filter="data")
    return folder


def balabit_bases(archive: Path, unpack_to: Path, typists: "Typists") -> list[BaseSession]:
    folder = unpack_balabit(archive, unpack_to)
    chosen = []
    for user_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        split = balabit_split(user_dir.name)
        paths = sorted(user_dir.iterdir())
        if paths:
            # A fixed, seeded choice of sessions per user.
            sample = random.Random(f"{user_dir.name}/{split}").sample(paths, min(len(paths), BALABIT_SESSIONS_PER_USER))
            for path in sorted(sample):
                chosen.append((f"balabit:test_files/{user_dir.name}/{path.name}", user_dir.name, split, path))
    typing = typists.choose([(source, "balabit/" + user, split) for source, user, split, _ in chosen])
    bases = []
    for source, user, split, path in chosen:
        rows, width, height = read_balabit(path)
        base = base_session(source, "desktop-rdp", "balabit/" + user, split, width, height, [rows], typing[source],
                            typists.swaps(source, split))
        if base is not None:
            bases.append(base)
    return bases


def balabit_sessions(archive: Path, unpack_to: Path, subjects: dict[str, CmuSubject] | None = None,
                     variants=VARIANTS) -> list[HumanSession]:
    return [variant_session(base, v) for base in balabit_bases(archive, unpack_to, Typists(subjects or {}, {}))
            for v in variants]


# ---- SapiMouse and HMOG (lab/datasets) --------------------------------------------

# Screens a browser window of the recorded extent fits (SapiMouse records no screen size).
SCREENS = ((1366, 768), (1440, 900), (1536, 864), (1920, 1080), (2560, 1440), (3840, 2160))
# HMOG's phone (Samsung Galaxy S4): 1080 x 1920 device pixels, 3 per CSS pixel.
HMOG_PIXEL_RATIO = 3.0
HMOG_MAX_SECONDS = 300
# HMOG's contact size is a share (0-1) of the largest the screen reports; as a radius in CSS px
# (about 10 px for a fingertip). Only its spread is read, so the scale is a convention.
HMOG_RADIUS_PER_SIZE = 500.0


def screen_for(rows: list) -> tuple[int, int]:
    """The smallest common screen the recorded positions fit."""
    width = max((row[2] for row in rows), default=0)
    height = max((row[3] for row in rows), default=0)
    for w, h in SCREENS:
        if width < w and height < h:
            return w, h
    return SCREENS[-1]


def sapimouse_bases(typists: "Typists", folder: Path | None = None) -> list[BaseSession]:
    """SapiMouse: browser mouse sessions of 120 people (1 and 3 minutes), one base each."""
    chosen = []
    for recording in recordings.read_sapimouse(folder):
        split = recordings.split(recordings.SAPIMOUSE, recording.person)
        source = f"sapimouse:{recording.person}/{recording.session}"
        chosen.append((source, recording, split))
    typing = typists.choose([(source, "sapimouse/" + r.person, split) for source, r, split in chosen])
    bases = []
    for source, recording, split in chosen:
        width, height = screen_for(recording.rows)
        base = base_session(source, "browser-mouse", "sapimouse/" + recording.person, split, width, height,
                            [recording.rows], typing[source], typists.swaps(source, split))
        if base is not None:
            bases.append(base)
    return bases


def hmog_bases(folder: Path | None = None) -> list[BaseSession]:
    """HMOG: a phone's touch (the first finger) and its soft keyboard, the same person at the
    same time, the first HMOG_MAX_SECONDS of each session, in CSS pixels."""
    keys_of = {(r.person, r.session): r.keys for r in recordings.read_hmog_typing(folder)}
    bases = []
    for recording in recordings.read_hmog_touch(folder):
        rows = [row for row in recording.rows if row[6] == 0]
        if not rows:
            continue
        first = rows[0][0]
        rows = [row for row in rows if row[0] - first <= HMOG_MAX_SECONDS * 1000]
        split = recordings.split(recordings.HMOG, recording.person)
        source = f"hmog:{recording.person}/session_{recording.session}"
        rng = random.Random(reference_for(source))
        timeline = Timeline(rng)
        timeline.pause(1500, 0.5)
        start = timeline.t
        kinds = {"down": PRESS, "move": MOVE, "up": RELEASE}
        touch = [(start + t - first, Contact(kinds[kind], (size or 0.0) * HMOG_RADIUS_PER_SIZE / HMOG_PIXEL_RATIO,
                                             pressure or 0.0), x / HMOG_PIXEL_RATIO, y / HMOG_PIXEL_RATIO)
                 for t, kind, x, y, pressure, size, _ in rows]
        keys = [key for key in keys_of.get((recording.person, recording.session), [])
                if first <= key[0] <= first + HMOG_MAX_SECONDS * 1000]
        if keys:
            timeline.t = start + keys[0][0] - first
            timeline.replay_keys(keys, soft=True)
        timeline.t = max(timeline.t, touch[-1][0] + 1)
        leave(timeline)
        landscape = max(row[2] for row in touch) > 1080 / HMOG_PIXEL_RATIO
        width, height = (640, 360) if landscape else (360, 640)
        left_at = max(e["t"] for e in timeline.events if e["type"] == "visibility")
        bases.append(BaseSession(source, "phone-touch", "hmog/" + recording.person, split, width, height, touch,
                                 timeline.events, left_at, "soft" if keys else "none"))
    return bases


@dataclass
class Typists:
    """The real typists a base session may type with: CMU subjects and Aalto people."""

    cmu: dict[str, CmuSubject]
    aalto: dict[str, list]  # person -> typed sentences (TypingRecording)

    def choose(self, sources: list[tuple[str, str, str]]) -> dict[str, Typing]:
        return choose_typing(sources, self.cmu, self.aalto)

    def swaps(self, source: str, split: str) -> dict[str, Typing] | None:
        """The typing swaps' typists: HOLDOUT sessions only."""
        return swap_typists(source, split, self.cmu, self.aalto) if split == "holdout" else None


def load_typists(datasets: Path) -> Typists:
    aalto: dict[str, list] = defaultdict(list)
    for sentence in recordings.read_aalto_136m():
        if sentence.keys:
            aalto[sentence.person].append(sentence)
    return Typists(load_cmu(datasets / "cmu-keystroke" / "keystrokes.csv"), dict(aalto))


def all_bases(datasets: Path, work: Path, typists: Typists | None = None) -> list[BaseSession]:
    typists = typists or load_typists(datasets)
    bases = delbot_bases(datasets / "delbot-mouse", typists)
    bases += balabit_bases(datasets / "balabit-mouse-dynamics" / "test_files.tar.gz", work / "balabit", typists)
    bases += sapimouse_bases(typists)
    bases += hmog_bases()
    return bases


# TRAIN sends the `embed` variant of every recorded session and this many others drawn by its
# seed (every variant of every TRAIN session in real time would take hours); HOLDOUT sends
# every variant, and the typing swaps of every session typed after its recording.
TRAIN_OTHER_VARIANTS = 2


def variants_of(base: BaseSession, variants=VARIANTS) -> list[str]:
    if base.split == "holdout":
        return list(variants) + (list(SWAPS) if base.resume is not None else [])
    others = [v for v in variants if v != "embed"]
    drawn = random.Random(base.id + "/variants").sample(others, min(TRAIN_OTHER_VARIANTS, len(others)))
    return [v for v in variants if v == "embed" or v in drawn]


def all_sessions(datasets: Path, work: Path, variants=VARIANTS) -> list[HumanSession]:
    """Every base session in its variants (events are converted when read)."""
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown variants: {', '.join(sorted(unknown))}")
    return [variant_session(base, v) for base in all_bases(datasets, work) for v in variants_of(base, variants)]


def batches(session: HumanSession, start_ms: int, max_events: int = 200) -> list[bytes]:
    """The session's events as the embed would batch them, with absolute Unix-ms timestamps."""
    import json

    events = sorted(session.events, key=lambda e: e["t"])
    bodies = []
    for index in range(0, len(events), max_events):
        chunk = [{"type": e["type"], "timestamp": start_ms + int(round(e["t"])), "data": e["data"]}
                 for e in events[index:index + max_events]]
        bodies.append(json.dumps({"events": chunk}, separators=(",", ":")).encode())
    return bodies


def replay_strokes(datasets: Path, work: Path, limit: int = 2000) -> list[list[list[float]]]:
    """Human aimed movements for the replay bot, [[t, x, y], ...] each: from Balabit TRAIN
    users' sessions (never a HOLDOUT person), the moves with no button held that end in a press,
    from the last pause over 300 ms (or the last press) up to that press. These are the real
    pointing movements a fraudster with recorded mouse data would replay (the DELBOT strokes are
    drags of a drawing task, not aimed movements)."""
    folder = unpack_balabit(datasets / "balabit-mouse-dynamics" / "test_files.tar.gz", work / "balabit")
    strokes = []
    for user_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        if balabit_split(user_dir.name) != "train":
            continue
        for path in sorted(user_dir.iterdir()):
            rows, _, _ = read_balabit(path)
            current: list[list[float]] = []
            held = False
            for t, kind, x, y in rows:
                if kind == MOVE and not held:
                    if current and t - current[-1][0] > 300:
                        current = []
                    current.append([t, x, y])
                elif kind in (PRESS, PRESS_RIGHT):
                    held = True
                    if len(current) >= 5 and current[-1][0] - current[0][0] <= 3000 and \
                            math.hypot(current[-1][1] - current[0][1], current[-1][2] - current[0][2]) >= 40:
                        strokes.append(current)
                    current = []
                elif kind in (RELEASE, RELEASE_RIGHT):
                    held = False
                    current = []
    # A seeded sample across users, so no single user's style dominates.
    random.Random("replay-strokes").shuffle(strokes)
    return strokes[:limit]
