"""What a replayed person is made of: their recorded aimed movements, pauses, presses and wheel
notches (a pointer person: SapiMouse, Balabit), and a real typist's key timings (CMU, Aalto).

A *segment* is one recorded approach to a press: the moves with no button held from the first
move after the previous release up to the press (at most MAX_APPROACH_MS of it, cut at a pause),
the pause before it, and how long the button was held. Segments whose press was a drag (the
pointer moved more than DRAG_PX while held) are not clicks and are skipped. A replay retargets a
segment onto a control of the page with a similarity transform (rotation, uniform scale,
translation) that takes its start to where the cursor is and its end to the aim point; its
timing is kept as recorded.

Nothing here is synthetic but the choices a survey forces on a recording: which control a
movement goes to (the aim point inside it), which of the person's next movements fits that
distance best, and which letters the typed key classes become.
"""

from __future__ import annotations

import hashlib
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from datasets import readers  # noqa: E402

MOVE, PRESS, RELEASE = readers.MOVE, readers.PRESS, readers.RELEASE
MAX_APPROACH_MS = 6000.0  # an approach longer than this is cut at a pause (a person wandering)
MAX_PAUSE_MS = 8000.0  # a pause before a movement longer than this was the person away
DRAG_PX = 8.0
MIN_CHORD_PX = 4.0
LOOKAHEAD = 12  # the person's next unused segments a retarget chooses among
FAR_FIT = 2.0  # beyond this scale (or its inverse) every unused segment is searched
WHEEL_BURST_GAP_MS = 600.0
FOLDS = 5


def fold_of(name: str) -> int:
    """The cross-validation fold of a person or a typist (TRAIN only): five by SHA-1."""
    return int(hashlib.sha1(f"telltale-fold/{name}".encode()).hexdigest(), 16) % FOLDS


@dataclass
class Segment:
    pause_ms: float  # from the previous release (or the recording's start) to the first move
    points: list  # [(t_ms from the first point, x, y)], the last at the press position
    press_ms: float  # when the button went down, from the first point
    dwell_ms: float  # how long it was held
    order: int  # its place in the person's recordings

    @property
    def chord(self) -> float:
        (_, x0, y0), (_, x1, y1) = self.points[0], self.points[-1]
        return math.hypot(x1 - x0, y1 - y0)


def segments_of(rows: list, order_from: int = 0) -> list[Segment]:
    """The click approaches of one recording's pointer rows (t, kind, x, y), in order."""
    segments: list[Segment] = []
    current: list = []  # moves with no button held since the last release
    last_release = rows[0][0] if rows else 0.0
    pending = None  # (approach, release before it, press time, x, y) while the left button is down
    drag = 0.0
    other_button = False
    for t, kind, x, y in rows:
        if kind == MOVE:
            if pending is not None:
                drag = max(drag, math.hypot(x - pending[3], y - pending[4]))
            elif not other_button:
                current.append((t, x, y))
        elif kind == PRESS:
            pending, drag = (current + [(t, x, y)], last_release, t, x, y), 0.0
            current = []
        elif kind == RELEASE:
            if pending is not None and drag <= DRAG_PX:
                segment = make_segment(pending[0], pending[1], t - pending[2], order_from + len(segments))
                if segment is not None:
                    segments.append(segment)
            pending, last_release, current = None, t, []
        elif kind in (readers.PRESS_RIGHT, readers.RELEASE_RIGHT):
            other_button = kind == readers.PRESS_RIGHT
            current, last_release = [], t
        else:  # wheel notches break an approach: the hand was on the wheel
            current, last_release = [], t
    return segments


def make_segment(approach: list, last_release: float, dwell: float, order: int) -> Segment | None:
    # Repeated timestamps (a recorder's batching) keep the last position of each time.
    points: list = []
    for t, x, y in approach:
        if points and t <= points[-1][0]:
            points[-1] = (points[-1][0], x, y)
        else:
            points.append((t, x, y))
    if len(points) < 3:
        return None
    end = points[-1][0]
    if end - points[0][0] > MAX_APPROACH_MS:
        # Cut at the last pause of 300 ms or more before the limit, else at the limit.
        start_index = None
        for i in range(1, len(points)):
            if points[i][0] - points[i - 1][0] >= 300 and end - points[i][0] <= MAX_APPROACH_MS:
                start_index = i
                break
        if start_index is None:
            start_index = next(i for i, p in enumerate(points) if end - p[0] <= MAX_APPROACH_MS)
        points = points[start_index:]
        if len(points) < 3:
            return None
    first = points[0][0]
    pause = min(max(0.0, first - last_release), MAX_PAUSE_MS)
    rel = [(t - first, x, y) for t, x, y in points]
    return Segment(pause, rel, rel[-1][0], max(dwell, 0.0), order)


@dataclass
class WheelBurst:
    gaps_ms: list  # between consecutive notches of one burst
    pause_ms: float  # before the burst


def wheel_bursts(rows: list) -> list[WheelBurst]:
    bursts: list[WheelBurst] = []
    last_any = rows[0][0] if rows else 0.0
    last_notch = None
    for t, kind, _, _ in rows:
        if kind in (readers.WHEEL_UP, readers.WHEEL_DOWN):
            if last_notch is not None and t - last_notch <= WHEEL_BURST_GAP_MS:
                bursts[-1].gaps_ms.append(t - last_notch)
            else:
                bursts.append(WheelBurst([], min(t - last_any, MAX_PAUSE_MS)))
            last_notch = t
        last_any = t
    return [b for b in bursts if b.gaps_ms]


@dataclass
class PointerPerson:
    """One person's recorded pointing: their segments in order and their wheel bursts."""

    set: str
    name: str  # e.g. "sapimouse/user12"
    split: str
    device: str  # "browser-mouse" (SapiMouse), "desktop-rdp" (Balabit over remote desktop)
    segments: list = field(default_factory=list)
    bursts: list = field(default_factory=list)
    used: set = field(default_factory=set)

    @property
    def fold(self) -> int:
        return fold_of(self.name)

    def block(self, index: int, count: int) -> "PointerPerson":
        """The person with the `index`-th of `count` equal shares of their segments first (a
        session's own movements), the later shares after it (taken only when its own run out)."""
        size = max(1, len(self.segments) // max(count, 1))
        start = min(index * size, len(self.segments))
        return PointerPerson(self.set, self.name, self.split, self.device,
                             self.segments[start:] + self.segments[:start], self.bursts)

    def remaining(self) -> int:
        return len(self.segments) - len(self.used)

    def take(self, distance: float) -> tuple[Segment, float]:
        """The segment among the next LOOKAHEAD unused ones whose chord is closest to `distance`
        (in ratio), marked used, and the scale that retargets it."""
        candidates = []
        for index, segment in enumerate(self.segments):
            if index in self.used or segment.chord < MIN_CHORD_PX:
                continue
            candidates.append(index)
            if len(candidates) >= LOOKAHEAD:
                break
        if not candidates:
            raise IndexError(f"{self.name} has no recorded movements left")
        misfit = lambda i: abs(math.log(max(distance, 1.0) / self.segments[i].chord))  # noqa: E731
        best = min(candidates, key=misfit)
        if misfit(best) > math.log(FAR_FIT):
            # None of the next ones fits: the closest of all the person's unused movements.
            rest = [i for i, s in enumerate(self.segments) if i not in self.used and s.chord >= MIN_CHORD_PX]
            best = min(rest, key=misfit)
        self.used.add(best)
        segment = self.segments[best]
        return segment, max(distance, 1.0) / segment.chord

    def take_pause(self) -> float:
        """The pause before the next unused segment (a recorded pause between actions), without
        using the segment up."""
        for index, segment in enumerate(self.segments):
            if index not in self.used:
                return segment.pause_ms
        return 1000.0


def sapimouse_people(folder=None) -> list[PointerPerson]:
    people: dict[str, PointerPerson] = {}
    for recording in readers.read_sapimouse(folder):
        name = f"sapimouse/{recording.person}"
        person = people.setdefault(name, PointerPerson(
            readers.SAPIMOUSE, name, readers.split(readers.SAPIMOUSE, recording.person), "browser-mouse"))
        person.segments += segments_of(recording.rows, len(person.segments))
    return list(people.values())


def balabit_people(archive: Path, unpack_to: Path) -> list[PointerPerson]:
    """Balabit's users over remote desktop: every session file of a user, in name order."""
    import humans

    folder = humans.unpack_balabit(archive, unpack_to)
    people = []
    for user_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        person = PointerPerson("balabit", f"balabit/{user_dir.name}", humans.balabit_split(user_dir.name), "desktop-rdp")
        for path in sorted(user_dir.iterdir()):
            rows, _, _ = humans.read_balabit(path)
            person.segments += segments_of(rows, len(person.segments))
            person.bursts += wheel_bursts(rows)
        people.append(person)
    return people


# ---- typists -----------------------------------------------------------------------------------


@dataclass
class Typist:
    """A real typist: answers as runs of recorded keys [(down_ms, up_ms, key_class)]."""

    set: str  # "cmu-keystroke" or "aalto-136m"
    name: str
    split: str
    runs: list  # CMU: repetitions (11 keys each); Aalto: sentences
    cursor: int = 0

    @property
    def fold(self) -> int:
        return fold_of(self.name)

    def answer(self, length: str, rng: random.Random) -> list:
        """Keys of one answer of `length` (word, short, long), taken in order from the
        typist's runs and laid end to end with a flight between runs taken from the typist's
        own keydown-to-keydown times; wraps around when the runs are used up."""
        if self.set == "cmu-keystroke":
            count = {"word": 1, "short": rng.randint(2, 3), "long": rng.randint(4, 6)}[length]
        else:
            count = {"word": 1, "short": 1, "long": rng.randint(2, 3)}[length]
        keys: list = []
        flights = self.flights()
        for _ in range(count):
            run = self.runs[self.cursor % len(self.runs)]
            self.cursor += 1
            if self.set == "cmu-keystroke":
                run = run[:-1]  # the Return that ends each repetition: the answer goes on
            if length == "word" and self.set != "cmu-keystroke":
                spaces = [i for i, key in enumerate(run) if key[2] == "space"]
                run = run[:spaces[0]] if spaces else run
            if not run:
                continue
            origin = run[0][0]
            start = (keys[-1][0] + rng.choice(flights)) if keys else 0.0
            if keys and self.set != "cmu-keystroke":
                keys.append((start, start + run_hold(run), "space"))  # the space between sentences
                start += rng.choice(flights)
            keys += [(start + down - origin, start + up - origin, key_class) for down, up, key_class in run]
        return keys

    def flights(self) -> list[float]:
        values = []
        for run in self.runs:
            downs = [key[0] for key in run if key[2] != "modifier"]
            values += [b - a for a, b in zip(downs, downs[1:]) if 0 < b - a < 2000]
        return values or [200.0]

    def holds(self) -> list[float]:
        return [key[1] - key[0] for run in self.runs for key in run if key[2] != "modifier" and key[1] > key[0]] or [100.0]


def run_hold(run: list) -> float:
    holds = [key[1] - key[0] for key in run if key[2] == "space"]
    return holds[0] if holds else 100.0


CMU_CLASSES = {"period": "char", "five": "digit", "Shift.r": "char", "Return": "enter"}


def cmu_typists(path: Path) -> list[Typist]:
    import humans

    typists = []
    for name, subject in sorted(humans.load_cmu(path).items()):
        runs = []
        for run in subject.runs:
            for rep in run:
                runs.append([(down, down + hold, CMU_CLASSES.get(key, "char"))
                             for key, down, hold in zip(humans.CMU_KEYS, rep.downs, rep.holds)])
        typists.append(Typist("cmu-keystroke", f"cmu-keystroke/{name}", humans.cmu_split(name), runs))
    return typists


def aalto_typists(folder=None) -> list[Typist]:
    by_person: dict[str, list] = {}
    for sentence in readers.read_aalto_136m(folder):
        if len(sentence.keys) >= 10:
            by_person.setdefault(sentence.person, []).append(list(sentence.keys))
    return [Typist("aalto-136m", f"aalto-136m/{person}", readers.split(readers.AALTO_136M, person), runs)
            for person, runs in sorted(by_person.items())]
