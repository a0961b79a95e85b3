"""People's touch for the phone layout, from HMOG (a Galaxy S4's touch screen and soft keyboard).

Touch cannot go through the operating system here: the kernel of these machines has no uinput
(no virtual touchscreen can be made), and Xvfb has no touch devices. So people's taps and swipes
reach the phone layout through Chromium's DevTools touch input, the same channel the touch bots
use (bots.js's `touch-person` generator plays these recordings), and the report counts touch
apart from the OS-level recordings.

What is exported (`export`): per person, their taps (how long the finger stayed, the contact's
size as a radius, the pause before), swipes (the finger's path relative to where it landed,
with its timing), and soft-keyboard typing (key classes with down and up times); and the jobs:
which person fills the phone layout with which share of their gestures, under which reference.
"""

from __future__ import annotations

import math
import uuid

from datasets import readers

TAP_MAX_PX = 10.0  # CSS px: a tap moves less than this (as the scorer counts taps)
TAP_MAX_MS = 500.0
SWIPE_MIN_PX = 30.0
PIXEL_RATIO = 3.0  # HMOG's phone: 1080 x 1920 device pixels, 3 per CSS pixel
RADIUS_PER_SIZE = 500.0 / PIXEL_RATIO  # MotionEvent.getSize() to a radius in CSS px (a convention)
MAX_PAUSE_MS = 8000.0
SESSIONS = {"train": 6, "holdout": 12}


def gestures(recording) -> tuple[list, list]:
    """(taps, swipes) of the first finger: taps [dwell_ms, radius, force, pause_ms], swipes
    {"points": [[t, dx, dy]], "radius", "force", "pause"} (CSS px from where the finger landed)."""
    taps, swipes = [], []
    current = None
    last_up = None
    for t, kind, x, y, pressure, size, pointer in recording.rows:
        if pointer != 0:
            continue
        x, y = x / PIXEL_RATIO, y / PIXEL_RATIO
        if kind == readers.TOUCH_DOWN:
            current = [(t, x, y, size or 0.0, pressure or 0.0)]
        elif current is not None and kind == readers.TOUCH_MOVE:
            current.append((t, x, y, size or 0.0, pressure or 0.0))
        elif current is not None and kind == readers.TOUCH_UP:
            current.append((t, x, y, size or 0.0, pressure or 0.0))
            t0, x0, y0, size0, force0 = current[0]
            pause = min(max(0.0, t0 - last_up), MAX_PAUSE_MS) if last_up is not None else 1000.0
            reach = max(math.hypot(p[1] - x0, p[2] - y0) for p in current)
            duration = current[-1][0] - t0
            radius = round(size0 * RADIUS_PER_SIZE, 2)
            if reach < TAP_MAX_PX and duration < TAP_MAX_MS:
                taps.append([round(duration, 1), radius, round(force0, 3), round(pause, 1)])
            elif reach >= SWIPE_MIN_PX:
                points = [[round(p[0] - t0, 1), round(p[1] - x0, 2), round(p[2] - y0, 2)] for p in current]
                swipes.append({"points": points, "radius": radius, "force": round(force0, 3), "pause": round(pause, 1)})
            last_up = t
            current = None
    return taps, swipes


def export(folder=None) -> dict:
    """{"people": {name: {split, taps, swipes, keys}}, "jobs": [{reference, person, split, block,
    blocks}]} for bots.js --touch-people."""
    people: dict[str, dict] = {}
    for recording in readers.read_hmog_touch(folder):
        name = f"hmog/{recording.person}"
        person = people.setdefault(name, {"split": readers.split(readers.HMOG, recording.person),
                                          "taps": [], "swipes": [], "keys": []})
        taps, swipes = gestures(recording)
        person["taps"] += taps
        person["swipes"] += swipes
    for typing in readers.read_hmog_typing(folder):
        name = f"hmog/{typing.person}"
        if name in people and len(typing.keys) >= 5:
            origin = typing.keys[0][0]
            people[name]["keys"].append([[round(d - origin, 1), round(u - origin, 1), c] for d, u, c in typing.keys])
    jobs = []
    for name in sorted(people):
        person = people[name]
        count = SESSIONS[person["split"]]
        for block in range(count):
            key = f"{name}/phone/{block}"
            jobs.append({"key": key, "reference": str(uuid.uuid5(uuid.NAMESPACE_URL, "telltale-replay/" + key)),
                         "person": name, "split": person["split"], "block": block, "blocks": count})
    return {"people": people, "jobs": jobs}
