"""Print the figures of each extra data set as its reader returns it (the numbers in SOURCE.md).

    python3 lab/datasets/summary.py [SET ...]     (sapimouse, aalto-136m, hmog)

Definitions: a recording's duration is its last time minus its first; the sampling interval is
the median of the positive time steps between consecutive move rows (touch: of the same pointer);
the typing figures are over keys other than modifiers: per person the median keydown-to-keydown
interval (consecutive keys of one recording) and the median hold (up - down), then the 10th, 50th
and 90th percentile of those per-person medians across people.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datasets import readers  # noqa: E402


def pct(values, qs=(10, 50, 90)) -> str:
    if len(values) == 0:
        return "n/a"
    return " / ".join(f"{v:.0f}" for v in np.percentile(np.asarray(values, dtype=float), qs))


def people_line(set_name: str, people) -> str:
    holdout = sum(1 for p in people if readers.split(set_name, p) == "holdout")
    return f"people {len(people)} (TRAIN {len(people) - holdout}, HOLDOUT {holdout})"


def pointer_summary(recordings) -> None:
    if not recordings:
        print("  no recordings")
        return
    set_name = recordings[0].set
    people = {r.person for r in recordings}
    events = sum(len(r.rows) for r in recordings)
    durations = [(r.rows[-1][0] - r.rows[0][0]) / 1000 for r in recordings]
    intervals = []
    kinds = defaultdict(int)
    for r in recordings:
        moves = np.array([row[0] for row in r.rows if row[1] == readers.MOVE])
        steps = np.diff(moves)
        steps = steps[steps > 0]
        if len(steps):
            intervals.append(np.median(steps))
        for row in r.rows:
            kinds[row[1]] += 1
    print(f"  {people_line(set_name, people)}; sessions {len(recordings)}; events {events}")
    print(f"  duration s, p10/p50/p90: {pct(durations)}; move interval ms (per-session medians) p10/p50/p90: {pct(intervals)}")
    print(f"  row kinds: {dict(kinds)}")
    per_person = defaultdict(int)
    for r in recordings:
        per_person[r.person] += 1
    print(f"  sessions per person: min {min(per_person.values())}, max {max(per_person.values())}")


def touch_summary(recordings) -> None:
    if not recordings:
        print("  no recordings")
        return
    set_name = recordings[0].set
    people = {r.person for r in recordings}
    events = sum(len(r.rows) for r in recordings)
    durations = [(r.rows[-1][0] - r.rows[0][0]) / 1000 for r in recordings]
    intervals, strokes, stroke_ms = [], 0, []
    pressures, sizes = [], []
    kinds = defaultdict(int)
    for r in recordings:
        last_move = {}
        steps = []
        down_at = {}
        for t, kind, _x, _y, pressure, size, pointer in r.rows:
            kinds[kind] += 1
            if pressure is not None:
                pressures.append(pressure)
            if size is not None:
                sizes.append(size)
            if kind == readers.TOUCH_DOWN:
                strokes += 1
                down_at[pointer] = t
                last_move.pop(pointer, None)
            elif kind == readers.TOUCH_MOVE:
                if pointer in last_move and t > last_move[pointer]:
                    steps.append(t - last_move[pointer])
                last_move[pointer] = t
            else:
                if pointer in down_at:
                    stroke_ms.append(t - down_at.pop(pointer))
                last_move.pop(pointer, None)
        if steps:
            intervals.append(np.median(steps))
    pressures, sizes = np.asarray(pressures), np.asarray(sizes)
    print(f"  {people_line(set_name, people)}; sessions {len(recordings)}; events {events}; touches (downs) {strokes}")
    print(f"  duration s, p10/p50/p90: {pct(durations)}; move interval ms (per-session medians) p10/p50/p90: {pct(intervals)}")
    print(f"  touch down-to-up ms p10/p50/p90: {pct(stroke_ms)}; row kinds: {dict(kinds)}")
    for name, values in (("pressure", pressures), ("size", sizes)):
        if len(values):
            print(f"  {name}: {len(np.unique(values))} distinct values, min {values.min():.4g}, p50 {np.median(values):.4g},"
                  f" max {values.max():.4g}, sd {values.std():.3g}")


def typing_summary(recordings) -> None:
    if not recordings:
        print("  no recordings")
        return
    set_name = recordings[0].set
    people = {r.person for r in recordings}
    events = sum(len(r.keys) for r in recordings)
    durations = [(r.keys[-1][1] - r.keys[0][0]) / 1000 for r in recordings if r.keys]
    flights, holds = defaultdict(list), defaultdict(list)
    classes = defaultdict(int)
    all_holds = []
    for r in recordings:
        typed = [k for k in r.keys if k[2] != readers.MODIFIER]
        for k in r.keys:
            classes[k[2]] += 1
        downs = np.array([k[0] for k in typed])
        if len(downs) > 1:
            flights[r.person].extend(np.diff(downs))
        hold = [k[1] - k[0] for k in typed]
        holds[r.person].extend(hold)
        all_holds.extend(hold)
    flight_medians = [np.median(v) for v in flights.values() if v]
    hold_medians = [np.median(v) for v in holds.values() if v]
    all_holds = np.asarray(all_holds)
    print(f"  {people_line(set_name, people)}; sessions {len(recordings)}; keys {events}")
    print(f"  duration s, p10/p50/p90: {pct(durations)}")
    print(f"  per-person median keydown-to-keydown ms, p10/p50/p90 across people: {pct(flight_medians)}")
    print(f"  per-person median hold ms, p10/p50/p90 across people: {pct(hold_medians)}")
    print(f"  holds > 2 s: {(all_holds > 2000).sum()} of {len(all_holds)}; zero holds: {(all_holds == 0).sum()}")
    print(f"  key classes: {dict(classes)}")


def main(sets) -> None:
    for set_name in sets:
        print(f"== {set_name} ({readers.dataset_folder(set_name)})")
        for reader in readers.READERS[set_name]:
            print(f" {reader.__name__}")
            recordings = reader()
            if reader is readers.read_sapimouse:
                pointer_summary(recordings)
            elif reader is readers.read_hmog_touch:
                touch_summary(recordings)
            else:
                typing_summary(recordings)


if __name__ == "__main__":
    main(sys.argv[1:] or list(readers.SETS))
