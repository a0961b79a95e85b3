"""A cohort rule for farms of tools that draw each session's style afresh, explored on TRAIN.

The product's cohort (scorer/src/cohort.rs) calls two sessions alike when they lie within 3
percentile points of each other on every feature of a modality, and a session clustered when
at least 5 others are alike and that count is 20 times what the survey's spread or (x 1000) the
people's spread, features taken as independent, would give by chance. It names copies of one
setting (xtest-minjerk, replays of one recording) and none of the red team's farms nor of the
corpus's TRAIN farms (chunk 008): one generator's sessions are tight on most axes and spread
over one (ghost-cursor's peak time, perlin's deviation, bezier's submovements), and the
people's-spread test assumes independent axes, so it asks for a margin of 1000.

This program replays a candidate rule in Python on the corpus's TRAIN feature rows (people's
rows as recorded, automation's as recorded), nothing of HOLDOUT:

- **alike**: the same features measured, and within R percentile points on all of them but at
  most `skip`;
- **expected by chance**: how many of the TRAIN people (their percentile places; a person's own
  fold left out when the session is a person's, folds by person as `corpus.fold_of`) are alike
  with the session, +1 smoothed, as a share, times the survey's placed sessions: the people's
  correlations are in the reference, so no independence margin is needed;
- **clustered**: at least 5 alike and at least S times the expected count.

Each TRAIN farm is scored in a survey with the 167 TRAIN people (`corpus.farms`' surveys), and all
of TRAIN as one survey. Percentiles come from the built-in model's `human_ranges`, by linear
interpolation between its quantiles (an approximation of the product's `Percentiles`: the
product's own rule replayed on these places clustered the same 29 automation sessions of all
TRAIN that `telltale score-features` does).

    python3 lab/cohort_rule.py                          # the grid of rules, a line each
    python3 lab/cohort_rule.py --model scorer/models/telltale-v6.json 8,1,3 10,2,4
                                                        # places by that model's ranges; rules R,skip,S
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402

# scorer/src/cohort.rs: COHORT_FEATURES and MODALITIES (features, minimum measured).
MODALITIES = {
    "pointing": (["movement_peak_speed_ratio", "movement_peak_time", "movement_submovements",
                  "movement_deviation", "movement_efficiency", "movement_log_jerk", "press_dwell_mean_ms"], 5),
    "typing": (["key_hold_mean_ms", "key_flight_mean_ms", "key_hold_log_sd", "key_flight_log_sd",
                "key_flight_lag1"], 4),
    "touch": (["tap_dwell_mean_ms", "tap_dwell_log_sd", "swipe_peak_time", "swipe_log_jerk"], 3),
}
# In the order of the product's COHORT_FEATURES.
COHORT_FEATURES = [name for features, _ in MODALITIES.values() for name in features]
MIN_ALIKE = 5


def percentiles(model: dict, rows: list[dict], features: list[str]) -> np.ndarray:
    """Each row's percentile (0-100) among the model's TRAIN people on each feature; NaN where
    unmeasured or the model has no range for it."""
    ranges = {r["feature"]: np.array(r["quantiles"]) for r in model["human_ranges"]}
    out = np.full((len(rows), len(features)), np.nan)
    for j, feature in enumerate(features):
        quantiles = ranges.get(feature)
        if quantiles is None:
            continue
        grid = np.linspace(0, 100, len(quantiles))
        for i, row in enumerate(rows):
            value = row.get(feature)
            if value is not None and np.isfinite(value):
                out[i, j] = np.interp(value, quantiles, grid)
    return out


def alike(places: np.ndarray, x: np.ndarray, radius: float, skip: int) -> np.ndarray:
    measured = ~np.isnan(x)
    same_set = np.all(np.isnan(places) == ~measured, axis=1)
    within = np.sum(np.abs(places[:, measured] - x[measured]) <= radius, axis=1)
    return same_set & (within >= measured.sum() - skip)


def clustered(model: dict, survey: list[tuple[dict, dict]], reference: list[tuple[dict, dict]],
              radius: float, skip, surprise: float, minimum_alike: int = MIN_ALIKE) -> np.ndarray:
    """Which of the survey's sessions the candidate rule clusters, in any modality."""
    out = np.zeros(len(survey), bool)
    skips = skip if isinstance(skip, tuple) else (skip,) * len(MODALITIES)
    for (features, minimum), skip in zip(MODALITIES.values(), skips):
        places = percentiles(model, [row for _, row in survey], features)
        placed = np.sum(~np.isnan(places), axis=1) >= minimum
        people = percentiles(model, [row for _, row in reference], features)
        people_placed = np.sum(~np.isnan(people), axis=1) >= minimum
        people, people_labels = people[people_placed], [l for (l, _), p in zip(reference, people_placed) if p]
        people_folds = np.array([corpus.fold_of(label) for label in people_labels])
        survey_places = places[placed]
        for i in np.where(placed)[0]:
            label = survey[i][0]
            count = int(alike(survey_places, places[i], radius, skip).sum()) - 1
            if count < minimum_alike:
                continue
            usable = people_folds != corpus.fold_of(label) if label["class"] == "human" else np.ones(len(people), bool)
            by_chance = (alike(people[usable], places[i], radius, skip).sum() + 1) / (usable.sum() + 1)
            if count >= surprise * by_chance * len(survey_places):
                out[i] = True
    return out


GRID = [(3, 0, 5), (6, 1, 5), (8, 1, 3), (8, 1, 5), (10, 1, 3), (10, 1, 5), (10, 1, 8), (12, 1, 5), (12, 1, 8)]


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=HERE.parent / "scorer" / "models" / "telltale-v4.json",
                        help="the model file whose human_ranges place the sessions")
    parser.add_argument("rules", nargs="*", help="R,skip,S[,A] (percentile points, features left out (one number, "
                        "or pointing:typing:touch), surprise, and the fewest others alike, 5 unless given)")
    parser.add_argument("--people", action="store_true",
                        help="also name the people each rule clusters, with their sessions in the survey")
    args = parser.parse_args()
    grid = [(float(r), tuple(int(x) for x in k.split(":")) if ":" in k else int(k), float(s),
             int(rest[0]) if rest else MIN_ALIKE)
            for r, k, s, *rest in (rule.split(",") for rule in args.rules)] or [g + (MIN_ALIKE,) for g in GRID]
    model = json.loads(args.model.read_text())
    samples = corpus.corpus_samples(corpus.chunks_of(corpus.load_manifest(), "train"), None)
    people = [(label, row) for label, row in samples if label["class"] == "human"]
    farms: dict[str, list[tuple[dict, dict]]] = {}
    for label, row in samples:
        if label.get("farm"):
            farms.setdefault(label["farm"], []).append((label, row))
    others = [(label, row) for label, row in samples if label["class"] == "bot" and not label.get("farm")]
    print(f"TRAIN: {len(people)} people's sessions, {len(farms)} farms, {len(others)} other automation sessions")
    # S is bounded by the reference's size: with about a hundred people placed, a session alike
    # with none of them is expected (1 / 100) x N times, so a farm of 20 in a survey of 187 is at
    # most about 10 times what chance gives.
    sessions_of = Counter(label["person"] for label, _ in people)
    repeated = sum(count > 1 for count in sessions_of.values())
    print(f"TRAIN people: {len(sessions_of)}, {repeated} of them with more than one session")
    for radius, skip, surprise, minimum in grid:
        named, moved, who = [], 0, {}
        for name, farm in sorted(farms.items()):
            flags = clustered(model, people + farm, people, radius, skip, surprise, minimum)
            named.append(f"{name} {int(flags[len(people):].sum())}/{len(farm)}")
            moved = max(moved, int(flags[:len(people)].sum()))
            for (label, _), flag in zip(people, flags[:len(people)]):
                if flag:
                    who.setdefault(label["person"], set()).add(name)
        every = people + others + [s for farm in farms.values() for s in farm]
        flags = clustered(model, every, people, radius, skip, surprise, minimum)
        print(f"R {radius}, skip {skip}, S {surprise}, A {minimum}: " + ", ".join(named)
              + f"; people clustered, worst farm survey {moved}; all TRAIN as one survey: people "
              f"{int(flags[:len(people)].sum())}, other automation {int(flags[len(people):len(people) + len(others)].sum())}"
              f"/{len(others)}, farms {int(flags[len(people) + len(others):].sum())}/{len(every) - len(people) - len(others)}",
              flush=True)
        if args.people:
            for person, surveys in sorted(who.items()):
                print(f"    {person} ({sessions_of[person]} sessions): clustered in {len(surveys)} of {len(farms)} "
                      "farm surveys", flush=True)


if __name__ == "__main__":
    main()
