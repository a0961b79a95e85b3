"""A person's session and its automation twin, recorded the same way (the replay path's own
check, run by tests/it/replay.rs):

    python3 -m replay.twin --base TELLTALE_URL --key TRACKING_KEY [--layout demo]

records one session of a person through XTEST into a headed Chromium on the layout, then the
same plan, window and draws with `TwinHand` (straight minimum-jerk paths, metronome keys of the
same classes), and prints {"person": reference, "twin": reference, ...}. The test then compares
the two event streams field by field: they may differ in where the pointer went and when things
happened, nothing else.

The person is a fixed, hand-made recording (`fixture_person`), so the check needs no data set.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay import browser, play, session  # noqa: E402
from replay.pages import PageServer  # noqa: E402
from replay.sources import PointerPerson, Segment, Typist, WheelBurst  # noqa: E402
from replay.xinput import Display  # noqa: E402


def fixture_person() -> PointerPerson:
    """Forty curved aimed movements of 40 to 900 px with a bell-shaped, skewed speed profile
    sampled about every 8 ms, pauses, presses of 60 to 130 ms, and wheel bursts."""
    rng = random.Random("telltale-replay/fixture")
    segments = []
    for index in range(40):
        distance = rng.uniform(40, 900)
        angle = rng.uniform(0, 2 * math.pi)
        duration = 180 + 140 * math.log2(1 + distance / 20) * rng.uniform(0.8, 1.2)
        bow = rng.uniform(-0.12, 0.12) * distance
        points, t = [], 0.0
        while t < duration:
            u = t / duration
            s = u ** 2.2 * (3 - 2.2 * u) / (3 - 2.2)  # faster early, a long approach
            s = min(max(s, 0.0), 1.0)
            along, across = s * distance, bow * math.sin(math.pi * s)
            points.append((t, along * math.cos(angle) - across * math.sin(angle),
                           along * math.sin(angle) + across * math.cos(angle)))
            t += rng.uniform(6, 10)
        points.append((duration, distance * math.cos(angle), distance * math.sin(angle)))
        segments.append(Segment(rng.uniform(250, 1500), points, duration + rng.uniform(40, 160),
                                rng.uniform(60, 130), index))
    bursts = [WheelBurst([rng.uniform(40, 110) for _ in range(6)], 500.0) for _ in range(10)]
    return PointerPerson("fixture", "fixture/person", "train", "browser-mouse", segments, bursts)


def fixture_typist() -> Typist:
    """Sentences of letters, spaces, a digit, a Shift and a correction, with uneven timing."""
    rng = random.Random("telltale-replay/fixture-typist")
    runs = []
    for _ in range(6):
        keys, t = [], 0.0
        for position in range(40):
            key_class = ("modifier" if position == 0 else "space" if position % 6 == 5 else
                         "backspace" if position == 17 else "digit" if position == 23 else "char")
            hold = rng.uniform(70, 140)
            keys.append((t, t + hold, key_class))
            t += hold * 0.4 if key_class == "modifier" else rng.lognormvariate(math.log(190), 0.4)
        runs.append(keys)
    return Typist("fixture", "fixture/typist", "train", runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the Telltale server's base URL")
    parser.add_argument("--key", required=True, help="the survey's tracking key")
    parser.add_argument("--layout", default="demo")
    args = parser.parse_args()
    display = Display.start()
    server = PageServer(args.base)
    try:
        draws = "telltale-replay/twin-check"
        window = browser.draw_window(random.Random(f"{draws}/window"), (display.width, display.height))
        plan = play.draw_plan(args.layout, random.Random(f"{draws}/plan"))
        person_ref, twin_ref = str(uuid.uuid4()), str(uuid.uuid4())
        person = play.PersonHand(fixture_person(), fixture_typist(), random.Random(f"{draws}/hand"))
        outcome = session.record_session(display, server, args.key, person_ref, args.layout, person,
                                         random.Random(f"{draws}/runner"), window, plan)
        twin = play.TwinHand(answers=list(outcome.typed))
        twinned = session.record_session(display, server, args.key, twin_ref, args.layout, twin,
                                         random.Random(f"{draws}/runner"), window, plan)
        late = sorted(outcome.late_ms)
        print(json.dumps({"person": person_ref, "twin": twin_ref, "actions": [outcome.actions, twinned.actions],
                          "keys": [outcome.keys, twinned.keys], "notches": [outcome.notches, twinned.notches],
                          "schedule_late_p99_ms": late[int(0.99 * (len(late) - 1))] if late else 0.0}))
    finally:
        server.close()
        display.close()


if __name__ == "__main__":
    main()
