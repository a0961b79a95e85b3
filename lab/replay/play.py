"""Fills a survey layout through the operating system's input path: a plan (what to answer) is
carried out by a *hand* (where the movements, presses, pauses and keys come from) on a real page
in a real browser, through XTEST. The page is asked where its controls are through its probe
(pages.py); the browser never has DevTools attached.

Hands:
- `PersonHand`: a recorded person's movements, presses and pauses (sources.PointerPerson),
  retargeted onto the page's controls, and a real typist's keys (sources.Typist).
- `TwinHand`: the same plan with timing no person made (straight minimum-jerk movements, a
  metronome's keys, fixed pauses): the automation twin that the replay test compares a person's
  session with, field by field, and an OS-level injection family.

Both hands run through the same `Runner`: the same browser, page, window and input path, so the
two classes of the recordings differ in the hand alone.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from .sources import PointerPerson, Segment, Typist
from .xinput import Clock, Display, keysym_for

HERE = Path(__file__).resolve().parent
LAYOUTS = json.loads((HERE.parent / "survey" / "layouts.json").read_text())
FILLER = "thequickbrownfoxjumpsoverthelazydogwhilesurveysaskaboutdailylife"
# Reading: adults read 175-300 words a minute silently (Brysbaert 2019, mean 238); the data sets
# hold no reading, so a replay waits this long on each question before its recorded pause.
READING_WPM_MEAN, READING_WPM_SD = 238.0, 40.0
NOTCH_SETTLE_MS = 350.0  # after a wheel burst: the smooth scroll ends, the eyes follow


class ReplayError(RuntimeError):
    pass


# One letter per key class, for an answer's classes in a label (a twin types the same ones).
CLASS_CODES = {"char": "c", "digit": "d", "space": "s", "backspace": "b", "delete": "x", "enter": "e",
               "arrow": "a", "modifier": "m"}
CODE_CLASSES = {code: name for name, code in CLASS_CODES.items()}


# ---- plans -------------------------------------------------------------------------------------


def radio_selector(name: str, value: str) -> str:
    return f'input[name="{name}"][value="{value}"]'


def draw_plan(layout: str, rng: random.Random) -> list[list[dict]]:
    """What one session answers on `layout`, page by page: a list of actions each."""
    pages = []
    for steps in LAYOUTS["layouts"][layout]["pages"]:
        actions = []
        for step in steps:
            kind = step["kind"]
            if kind == "radio":
                actions.append({"do": "choose", "selector": radio_selector(step["name"], rng.choice(step["values"]))})
            elif kind == "checkbox":
                chosen = [v for v in step["values"] if rng.random() < 0.45] or [rng.choice(step["values"])]
                actions += [{"do": "choose", "selector": radio_selector(step["name"], v).replace("radio", "checkbox")}
                            for v in chosen]
            elif kind == "text":
                actions.append({"do": "type", "selector": step["selector"], "length": step["answer"]})
            elif kind == "range":
                actions.append({"do": "range", "selector": step["selector"], "min": step["min"], "max": step["max"],
                                "value": rng.randint(step["min"], step["max"])})
            elif kind == "button":
                actions.append({"do": "button", "selector": step["selector"]})
            else:
                raise ValueError(f"unknown step kind {kind}")
        pages.append(actions)
    return pages


# ---- hands -------------------------------------------------------------------------------------


@dataclass
class Approach:
    points: list  # [(t_ms, x, y)] in screen pixels, from the movement's start
    press_ms: float
    dwell_ms: float
    scale: float = 1.0


class Hand:
    keyboard_only = False

    def reading_ms(self, words: int) -> float:
        raise NotImplementedError

    def pause_ms(self) -> float:
        raise NotImplementedError

    def approach(self, start: tuple[float, float], aim: tuple[float, float]) -> Approach:
        raise NotImplementedError

    def answer(self, length: str) -> list:
        raise NotImplementedError

    def wheel_gaps(self, notches: int) -> list[float]:
        raise NotImplementedError

    def nav_key(self) -> tuple[float, float]:
        """(hold, gap before the next key) of one navigation key (Tab, Space, an arrow)."""
        raise NotImplementedError

    def aim(self, box: dict) -> tuple[float, float]:
        raise NotImplementedError


def retarget(segment: Segment, start: tuple[float, float], aim: tuple[float, float]) -> list:
    """The segment's points under the similarity transform that takes its first point to
    `start` and its last to `aim`; times as recorded."""
    (_, x0, y0), (_, x1, y1) = segment.points[0], segment.points[-1]
    chord = complex(x1 - x0, y1 - y0)
    wanted = complex(aim[0] - start[0], aim[1] - start[1])
    factor = wanted / chord if abs(chord) > 0 else 0
    out = []
    for t, x, y in segment.points:
        z = complex(start[0], start[1]) + factor * complex(x - x0, y - y0)
        out.append((t, z.real, z.imag))
    return out


class PersonHand(Hand):
    """A recorded person: pointer person for pointing, pauses and wheel, typist for keys."""

    def __init__(self, person: PointerPerson | None, typist: Typist | None, rng: random.Random,
                 keyboard_only: bool = False, wheel_donor: PointerPerson | None = None):
        self.person, self.typist, self.rng = person, typist, rng
        self.keyboard_only = keyboard_only
        self.wheel_donor = wheel_donor
        self.wpm = min(max(rng.gauss(READING_WPM_MEAN, READING_WPM_SD), 150.0), 400.0)
        self.aim_sd = rng.uniform(0.08, 0.2)  # how far from a control's centre this person presses
        self.burst = 0
        self.nav_index = 0
        self.scales: list[float] = []

    def reading_ms(self, words: int) -> float:
        return words * 60000.0 / self.wpm * math.exp(0.35 * self.rng.gauss(0, 1))

    def pause_ms(self) -> float:
        if self.person is None:
            return self.rng.choice(self.typist.flights()) * 3 if self.typist else 800.0
        return self.person.take_pause()

    def approach(self, start, aim) -> Approach:
        distance = math.hypot(aim[0] - start[0], aim[1] - start[1])
        segment, scale = self.person.take(distance)
        self.scales.append(scale)
        return Approach(retarget(segment, start, aim), segment.press_ms, segment.dwell_ms, scale)

    def answer(self, length: str) -> list:
        return self.typist.answer(length, self.rng) if self.typist else []

    def wheel_gaps(self, notches: int) -> list[float]:
        donor = self.person if self.person is not None and self.person.bursts else self.wheel_donor
        if donor is None or not donor.bursts:
            raise ReplayError("no recorded wheel to scroll with")
        gaps: list[float] = []
        while len(gaps) < notches - 1:
            gaps += donor.bursts[self.burst % len(donor.bursts)].gaps_ms
            self.burst += 1
        return gaps[:max(0, notches - 1)]

    def nav_key(self) -> tuple[float, float]:
        holds, flights = self.typist.holds(), self.typist.flights()
        self.nav_index += 1
        return holds[self.nav_index % len(holds)], flights[(7 * self.nav_index) % len(flights)]

    def aim(self, box: dict) -> tuple[float, float]:
        share = lambda: min(0.85, max(0.15, 0.5 + self.aim_sd * self.rng.gauss(0, 1)))  # noqa: E731
        return box["x"] + box["width"] * share(), box["y"] + box["height"] * share()


class TwinHand(Hand):
    """Automation's timing on the same path: straight minimum-jerk movements of Fitts-law
    duration sampled every 16 ms, a fixed 90 ms press, metronome keys (100 ms hold, 180 ms
    apart), 700 ms between actions, the exact centre of every control. `answers` holds the key
    classes of the answers to type (CLASS_CODES letters, one string an answer), so a twin types
    the keys of the person it mirrors, at its own timing."""

    def __init__(self, answers: list[str] | None = None, keyboard_only: bool = False):
        self.answers = list(answers or [])
        self.keyboard_only = keyboard_only

    def reading_ms(self, words: int) -> float:
        return 0.0

    def pause_ms(self) -> float:
        return 700.0

    def approach(self, start, aim) -> Approach:
        distance = math.hypot(aim[0] - start[0], aim[1] - start[1])
        duration = 150.0 + 120.0 * math.log2(1.0 + distance / 16.0)
        points = []
        steps = max(2, int(duration / 16.0))
        for k in range(steps + 1):
            tau = k / steps
            s = tau ** 3 * (10 - 15 * tau + 6 * tau * tau)
            points.append((tau * duration, start[0] + s * (aim[0] - start[0]), start[1] + s * (aim[1] - start[1])))
        return Approach(points, duration + 80.0, 90.0)

    def answer(self, length: str) -> list:
        codes = self.answers.pop(0) if self.answers else "c" * {"word": 6, "short": 30, "long": 80}[length]
        return [(k * 180.0, k * 180.0 + 100.0, CODE_CLASSES.get(code, "char")) for k, code in enumerate(codes)]

    def wheel_gaps(self, notches: int) -> list[float]:
        return [50.0] * max(0, notches - 1)

    def nav_key(self) -> tuple[float, float]:
        return 100.0, 180.0

    def aim(self, box: dict) -> tuple[float, float]:
        return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


# ---- the runner --------------------------------------------------------------------------------


@dataclass
class Outcome:
    actions: int = 0
    notches: int = 0
    keys: int = 0
    typed: list = field(default_factory=list)  # the classes of the keys pressed, a string an answer
    late_ms: list = field(default_factory=list)  # how late each scheduled input was sent


class Runner:
    def __init__(self, display: Display, server, probe: str, hand: Hand, rng: random.Random, done: str = "#done"):
        self.display, self.server, self.probe, self.hand, self.rng = display, server, probe, hand, rng
        self.done = done
        self.cursor = display.pointer()
        self.held: set[str] = set()
        self.letter = 0
        self.outcome = Outcome()

    # ---- the page ----

    def ask(self, query: dict):
        return self.server.ask(self.probe, query)

    def box(self, selector: str, label: bool = False) -> tuple[dict, dict]:
        """The control's box in screen pixels, and the page's frame (viewport, scroll)."""
        answer = self.ask({"kind": "box", "selector": selector, "label": label})
        if not answer or not answer.get("box"):
            raise ReplayError(f"{selector} is not displayed")
        frame, b = answer["frame"], answer["box"]
        offset = frame["offset"]
        return {"x": b["x"] + offset["x"], "y": b["y"] + offset["y"], "width": b["width"], "height": b["height"],
                "top": b["y"], "bottom": b["y"] + b["height"]}, frame

    def visible(self, selector: str, label: bool = False) -> dict:
        """Scrolls with the wheel until the control is wholly in view (40 px clear of the edges
        where the page can scroll that far); returns its screen box."""
        for _ in range(40):
            box, frame = self.box(selector, label)
            margin = 40.0
            below = box["bottom"] - (frame["viewHeight"] - margin)
            above = margin - box["top"]
            can_down = frame["scrollY"] < frame["scrollMax"] - 1
            can_up = frame["scrollY"] > 0
            if (below <= 0 or not can_down) and (above <= 0 or not can_up):
                if box["top"] < 0 or box["bottom"] > frame["viewHeight"]:
                    raise ReplayError(f"{selector} cannot be scrolled into view")
                return box
            direction = 1 if below > 0 and can_down else -1
            need = below if direction > 0 else above
            notches = max(1, min(int(math.ceil((need + self.rng.uniform(20, 160)) / 100.0)), self.rng.randint(3, 7)))
            self.wheel(direction * notches)
        raise ReplayError(f"could not scroll {selector} into view")

    # ---- input ----

    def wait(self, ms: float) -> None:
        Clock().wait_until(ms)

    def wheel(self, notches: int) -> None:
        gaps = self.hand.wheel_gaps(abs(notches))
        clock = Clock()
        at = 0.0
        for k in range(abs(notches)):
            if k:
                at += gaps[k - 1]
            self.outcome.late_ms.append(clock.wait_until(at))
            self.display.wheel(1 if notches > 0 else -1)
        self.outcome.notches += abs(notches)
        self.wait(NOTCH_SETTLE_MS)

    def press_at(self, aim: tuple[float, float]) -> None:
        """Moves the hand to `aim` and presses there."""
        approach = self.hand.approach(self.cursor, aim)
        clock = Clock()
        for t, x, y in approach.points:
            self.outcome.late_ms.append(clock.wait_until(t))
            self.cursor = self.display.move(x, y)
        self.outcome.late_ms.append(clock.wait_until(max(approach.press_ms, approach.points[-1][0])))
        self.display.button(1, True)
        clock.wait_until(max(approach.press_ms, approach.points[-1][0]) + approach.dwell_ms)
        self.display.button(1, False)

    def keys(self, keys: list, single_line: bool) -> str:
        """Plays recorded keys [(down, up, class)] from now, each down and up at its recorded
        time (overlaps and all); returns the classes of the keys pressed (CLASS_CODES)."""
        events = []
        for index, (down, up, key_class) in enumerate(keys):
            if key_class in ("tab", "other") or (key_class == "enter" and single_line):
                continue  # Tab would leave the field, an unknown key could be anything
            events.append((down, 0, index, key_class))
            events.append((max(up, down + 1.0), 1, index, key_class))
        events.sort(key=lambda e: (e[0], e[1]))
        clock = Clock()
        names: dict[int, str] = {}
        pressed = []
        for t, up, index, key_class in events:
            if up:
                name = names.pop(index, None)
                if name is not None and name in self.held:
                    self.outcome.late_ms.append(clock.wait_until(t))
                    self.display.key(name, False)
                    self.held.discard(name)
                continue
            name = self.next_keysym(key_class)
            if name is None:
                continue
            self.outcome.late_ms.append(clock.wait_until(t))
            if name in self.held:  # the same key again before its release: let it go first
                self.display.key(name, False)
            self.display.key(name, True)
            self.held.add(name)
            names[index] = name
            pressed.append(CLASS_CODES.get(key_class, "c"))
        return "".join(pressed)

    def next_keysym(self, key_class: str) -> str | None:
        if key_class == "char":
            for _ in range(len(FILLER)):
                letter = FILLER[self.letter % len(FILLER)]
                self.letter += 1
                if letter not in self.held:
                    return letter
            return None
        if key_class == "modifier":
            return "Shift_R" if "Shift_L" in self.held else "Shift_L"
        return keysym_for(key_class)

    def nav(self, key: str, shifted: bool = False) -> None:
        hold, gap = self.hand.nav_key()
        if shifted:
            self.display.key("Shift_L", True)
            self.wait(min(gap, 120.0) * 0.5)
        self.display.key(key, True)
        self.wait(hold)
        self.display.key(key, False)
        if shifted:
            self.wait(30.0)
            self.display.key("Shift_L", False)
        self.wait(gap)
        self.outcome.keys += 1

    # ---- actions ----

    def think(self, selector: str | None = None, page: bool = False) -> None:
        words = self.ask({"kind": "words", "selector": selector, "page": page}) if (selector or page) else 0
        self.wait(self.hand.reading_ms(int(words or 0)) + self.hand.pause_ms())

    def choose(self, selector: str) -> None:
        label = self.rng.random() < 0.5
        if self.hand.keyboard_only:
            return self.key_choose(selector)
        box = self.visible(selector, label)
        self.press_at(self.hand.aim(box))

    def range(self, action: dict) -> None:
        if self.hand.keyboard_only:
            state = self.tab_to(action["selector"])
            key = "Right" if action["value"] > (state["value"] or 0) else "Left"
            for _ in range(abs(action["value"] - (state["value"] or 0))):
                self.nav(key)
            return
        box = self.visible(action["selector"])
        share = (action["value"] - action["min"]) / (action["max"] - action["min"])
        x = box["x"] + 8 + (box["width"] - 16) * share + self.rng.gauss(0, 1)
        self.press_at((x, box["y"] + box["height"] / 2))

    def type_into(self, action: dict) -> None:
        if self.hand.keyboard_only:
            self.tab_to(action["selector"])
        else:
            box = self.visible(action["selector"])
            self.press_at(self.hand.aim(box))
        self.wait(self.hand.pause_ms())
        keys = self.hand.answer(action["length"])
        # A one-word answer goes in a one-line field, where Enter would submit the form.
        pressed = self.keys(keys, single_line=action["length"] == "word")
        self.outcome.keys += len(pressed)
        self.outcome.typed.append(pressed)

    def button(self, selector: str) -> None:
        if self.hand.keyboard_only:
            self.tab_to(selector, slip=False)
            self.nav("Return")
            return
        box = self.visible(selector)
        self.press_at(self.hand.aim(box))

    # ---- keyboard navigation ----

    def tab_to(self, selector: str, slip: bool = True) -> dict:
        for _ in range(60):
            state = self.ask({"kind": "focus", "selector": selector})
            if state is None:
                raise ReplayError(f"{selector} is not on the page")
            if state["focused"]:
                return state
            self.nav("Tab", shifted=not state["forward"])
        raise ReplayError(f"could not tab to {selector}")

    def key_choose(self, selector: str) -> None:
        state = self.tab_to(selector)
        if state["group"]:
            value = selector.split('value="')[1].rstrip('"]')
            group = state["group"]
            steps = (group.index(value) - group.index(state["activeValue"])) % len(group)
            if steps == 0:
                if not state["activeChecked"]:
                    self.nav("space")
                return
            key, count = ("Down", steps) if steps <= len(group) / 2 else ("Up", len(group) - steps)
            for _ in range(count):
                self.nav(key)
        elif not state["checked"]:
            self.nav("space")

    # ---- a whole session ----

    def run(self, plan: list[list[dict]]) -> Outcome:
        for actions in plan:
            self.think(page=True)
            for action in actions:
                self.think(action.get("selector"))
                if action["do"] == "choose":
                    self.choose(action["selector"])
                elif action["do"] == "type":
                    self.type_into(action)
                elif action["do"] == "range":
                    self.range(action)
                elif action["do"] == "button":
                    self.button(action["selector"])
                self.outcome.actions += 1
            self.wait(400.0)  # the next page shows
        if not self.ask({"kind": "shown", "selector": self.done}):
            raise ReplayError("the survey did not reach its end")
        return self.outcome
