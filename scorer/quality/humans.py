"""Human sessions for the scoring-quality harness, built from the recorded data sets.

Each session is real human pointer data from `../shared/datasets/` converted into the embed's
event format, with the embed's own sampling (a pointer or touch move at most every 16 ms), plus
keyboard, scrolling and focus rhythms drawn from published distributions where the data sets have
none. docs/evaluation.md lists every source and assumption; the constants below cite them.

Split: a file is HOLDOUT when the first hex digit of the SHA-1 of its path relative to its data
set's folder is 0-4, and every Balabit session of user29 and user35 is HOLDOUT (datasets README).
"""

from __future__ import annotations

import hashlib
import math
import random
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MOVE_INTERVAL_MS = 16  # the embed keeps one pointer or touch move per 16 ms
BALABIT_HOLDOUT_USERS = {"user29", "user35"}
BALABIT_MAX_SECONDS = 600  # a survey-sized slice of each Balabit session
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


def is_holdout(relative_path: str) -> bool:
    return hashlib.sha1(relative_path.encode()).hexdigest()[0] in "01234"


@dataclass
class HumanSession:
    reference: str
    source: str  # data set and the files it came from
    device: str
    cluster: str  # the bootstrap's resampling unit: a Balabit user or a DELBOT device folder
    split: str
    events: list = field(default_factory=list)

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
        }


def reference_for(source: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "telltale-quality/" + source))


class Timeline:
    """Builds one session's events in time order, relative to its start."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.events: list[dict] = []
        self.t = 0.0
        self.last_move = -1e9
        self.last_touch_move = -1e9
        self.field = 0
        self.scroll_y = 0

    def push(self, kind: str, t: float, data: dict) -> None:
        self.events.append({"type": kind, "t": t, "data": data})
        self.t = max(self.t, t)

    def pause(self, median_ms: float, sigma: float) -> None:
        self.t += median_ms * math.exp(sigma * self.rng.gauss(0, 1))

    def pointer_move(self, t: float, x: float, y: float, pointer: str) -> None:
        if t - self.last_move < MOVE_INTERVAL_MS:
            return
        self.last_move = t
        self.push("pointermove", t, {"x": round(x), "y": round(y), "pointerType": pointer, "trusted": True})

    def touch_move(self, t: float, x: float, y: float) -> None:
        if t - self.last_touch_move >= MOVE_INTERVAL_MS:
            self.last_touch_move = t
            self.push("touchmove", t, {"x": round(x), "y": round(y), "force": 1, "radius": 12, "trusted": True})
        self.pointer_move(t, x, y, "touch")

    def press(self, kind: str, t: float, x: float, y: float, pointer: str, button: int, target: str) -> None:
        self.push(kind, t, {"x": round(x), "y": round(y), "pointerType": pointer, "trusted": True,
                            "button": button, "target": target})

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

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.iki = min(900.0, max(100.0, rng.gauss(IKI_MEAN_MS, IKI_SD_MS)))
        self.hold_mean = min(250.0, max(50.0, rng.gauss(HOLD_MEAN_MS, HOLD_SD_MS)))

    def flight(self) -> float:
        # A lognormal whose mean is the person's mean inter-key interval.
        sigma = 0.45
        return self.iki * math.exp(sigma * self.rng.gauss(0, 1) - sigma * sigma / 2)

    def hold(self) -> float:
        sigma = 0.25
        return self.hold_mean * math.exp(sigma * self.rng.gauss(0, 1) - sigma * sigma / 2)


def session_event(reference: str, device: str, width: int, height: int) -> dict:
    phone = device == "phone-touch"
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
        "devicePixelRatio": 2.625 if phone else 1,
        "maxTouchPoints": 5 if phone else 0,
        "hardwareConcurrency": 8,
        "webdriver": False,
    }


def finish(timeline: Timeline, with_typing: bool) -> None:
    """The survey-shaped rest of a session: typed answers, scrolling, sometimes a tab switch."""
    rng = timeline.rng
    typist = Typist(rng)
    if with_typing:
        for _ in range(rng.randint(1, 2)):
            timeline.pause(1500, 0.5)
            timeline.typing(typist, rng.randint(8, 60))
    if rng.random() < 0.7:
        timeline.pause(1000, 0.5)
        timeline.scrolling()
    if rng.random() < 0.15:
        timeline.pause(2000, 0.5)
        timeline.away()
    # Leaving the page: what the browser fires as the survey's last page unloads.
    timeline.pause(800, 0.5)
    timeline.push("visibility", timeline.t, {"state": "hidden"})
    timeline.push("pagehide", timeline.t + 2, {})


# ---- DELBOT-Mouse ----------------------------------------------------------------------------


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
        if all(math.isfinite(v) for v in (stamp, x, y)):  # a few recordings hold NaN positions
            rows.append((stamp, parts[1], x, y))
    return width, height, rows


def delbot_sessions(root: Path) -> list[HumanSession]:
    sessions = []
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
                sessions.append(delbot_session(source, device, folder, split, group))
    return sessions


def delbot_session(source: str, device: str, folder: str, split: str, paths: list[Path]) -> HumanSession:
    reference = reference_for(source)
    rng = random.Random(reference)
    timeline = Timeline(rng)
    touch = device == "phone-touch"
    pointer = "touch" if touch else "mouse"
    width, height = 1920, 1080
    for path in paths:
        width, height, rows = read_delbot_stroke(path)
        if not rows:
            continue
        timeline.pause(1500 if timeline.t == 0 else 1200, 0.5)
        base, first = timeline.t, rows[0][0]
        for stamp, kind, x, y in rows:
            t = base + (stamp - first)
            if kind in ("Move", "MoveTouch"):
                if touch:
                    timeline.touch_move(t, x, y)
                else:
                    timeline.pointer_move(t, x, y, pointer)
            elif kind in ("Pressed", "PressedTouch"):
                timeline.press("pointerdown", t, x, y, pointer, 0, "other")
                if touch:
                    timeline.push("touchstart", t, {"x": round(x), "y": round(y), "force": 1, "radius": 12, "trusted": True})
            elif kind in ("Released", "ReleasedTouch"):
                timeline.press("pointerup", t, x, y, pointer, 0, "other")
                if touch:
                    timeline.push("touchend", t, {"x": round(x), "y": round(y), "force": 0, "radius": 12, "trusted": True})
                else:
                    # A mouse press and release on the same element is a click.
                    timeline.press("click", t + 1, x, y, pointer, 0, "other")
    finish(timeline, with_typing=True)
    session = HumanSession(reference, source, device, "delbot/" + folder, split)
    session.events = [{"type": "session", "t": 0.0, "data": session_event(reference, device, width, height)}]
    session.events += timeline.events
    return session


# ---- Balabit Mouse Dynamics ------------------------------------------------------------------


def balabit_sessions(archive: Path, unpack_to: Path) -> list[HumanSession]:
    folder = unpack_to / "test_files"
    if not folder.is_dir():
        unpack_to.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(unpack_to, filter="data")
    sessions = []
    for user_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        by_split: dict[str, list[Path]] = {"train": [], "holdout": []}
        for path in sorted(user_dir.iterdir()):
            relative = f"test_files/{user_dir.name}/{path.name}"
            holdout = user_dir.name in BALABIT_HOLDOUT_USERS or is_holdout(relative)
            by_split["holdout" if holdout else "train"].append(path)
        for split, paths in by_split.items():
            # A fixed, seeded choice of sessions per user and split.
            chosen = sorted(random.Random(f"{user_dir.name}/{split}").sample(paths, min(len(paths), BALABIT_SESSIONS_PER_USER)))
            for path in chosen:
                session = balabit_session(path, user_dir.name, split)
                if session is not None:
                    sessions.append(session)
    return sessions


def balabit_session(path: Path, user: str, split: str) -> HumanSession | None:
    source = f"balabit:test_files/{user}/{path.name}"
    reference = reference_for(source)
    rng = random.Random(reference)
    timeline = Timeline(rng)
    timeline.pause(1500, 0.5)
    base = timeline.t
    max_x, max_y = 0, 0
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
        t = base + stamp * 1000
        max_x, max_y = max(max_x, x), max(max_y, y)
        if state in ("Move", "Drag"):
            timeline.pointer_move(t, x, y, "mouse")
        elif state == "Pressed":
            timeline.press("pointerdown", t, x, y, "mouse", 2 if button == "Right" else 0, "other")
        elif state == "Released":
            code = 2 if button == "Right" else 0
            timeline.press("pointerup", t, x, y, "mouse", code, "other")
            if code == 0:
                timeline.press("click", t + 1, x, y, "mouse", 0, "other")
        elif button == "Scroll" and state in ("Up", "Down"):
            dy = 100 if state == "Down" else -100
            timeline.push("wheel", t, {"dx": 0, "dy": dy, "deltaMode": 0, "trusted": True})
            timeline.scroll_y = max(0, timeline.scroll_y + dy)
            timeline.push("scroll", t + 8, {"x": 0, "y": timeline.scroll_y})
    if len(timeline.events) < 5:
        return None
    finish(timeline, with_typing=True)
    width, height = (1920, 1200) if max_x > 1680 or max_y > 1050 else (1680, 1050)
    session = HumanSession(reference, source, "desktop-rdp", "balabit/" + user, split)
    session.events = [{"type": "session", "t": 0.0, "data": session_event(reference, "desktop-rdp", width, height)}]
    session.events += timeline.events
    return session


def all_sessions(datasets: Path, work: Path) -> list[HumanSession]:
    sessions = delbot_sessions(datasets / "delbot-mouse")
    sessions += balabit_sessions(datasets / "balabit-mouse-dynamics" / "test_files.tar.gz", work / "balabit")
    return sessions


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


def replay_strokes(datasets: Path, limit: int = 400) -> list[list[list[float]]]:
    """Human TRAIN mouse strokes for the replay bot: [[t, x, y], ...] per stroke."""
    strokes = []
    for folder in ("circles_human_pc1", "circles_human_pc2", "circles_human_pc2_pad"):
        for path in sorted((datasets / "delbot-mouse" / folder).glob("*.txt")):
            if is_holdout(f"{folder}/{path.name}"):
                continue
            _, _, rows = read_delbot_stroke(path)
            stroke = [[t, x, y] for t, kind, x, y in rows if kind == "Move"]
            if len(stroke) >= 5:
                strokes.append(stroke)
    return strokes[:limit]
