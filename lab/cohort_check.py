"""The cohort step (scorer/src/cohort.rs) on real people's behaviour, before any recording.

One survey on a real server holds every TRAIN person's converted recordings from the data sets
(humans.py's `embed` conversion: SapiMouse, Balabit, DELBOT and HMOG, each person's sessions
side by side, so the people who recorded several sessions come back), and a replay farm: FARM
other TRAIN recordings (left out of the people) posted COPIES times each under new references,
as a fraudster replaying a few real people's sessions would. One scoring run with the built-in model; the report counts, by
session and by person, how many people the cohort reason moved and how many of the farm's
sessions it found.

    TELLTALE_BIN=target/debug/telltale python3 lab/cohort_check.py [--farm 5 --copies 20]

TRAIN only: no HOLDOUT person is read. The sessions are posted as JSON in bulk (no browser), so
their transport features say so; the cohort reads behaviour features only (COHORT_FEATURES).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import humans
import pace
from pipeline import DATASETS, Server, lake_rows, log

ALIKE = re.compile(r"^(\d+) sessions in this survey move alike( \((pointing|typing|touch)\))?$")


def posted(base: humans.BaseSession, reference: str, tracking_key: str) -> pace.Paced:
    events = humans.convert(base, "embed")
    session = dict(events[0]["data"], sessionId=reference, interviewId=reference, embedVersion="1.3.0")
    events = [{"type": "session", "t": 0.0, "data": session}] + events[1:]
    return pace.Paced(f"/event/{tracking_key}/{reference}", pace.bulk_batches(events))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--farm", type=int, default=5, help="recordings the farm replays")
    parser.add_argument("--copies", type=int, default=20, help="times the farm posts each")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="telltale-cohort-"))
    bases = [b for b in humans.all_bases(DATASETS, work, humans.load_typists(DATASETS)) if b.split == "train"]
    server = Server(work)
    try:
        survey = server.api("PUT", "/integrations/v1/surveys/cohort-check", {"name": "Cohort check"})
        key = survey["trackingKey"]
        labels: dict[str, dict] = {}
        schedules = []
        # The farm replays recordings the survey's people did not make (a replayed recording is
        # alike with its original: that one would be in the farm's cluster too).
        rng = random.Random("cohort-farm")
        replayed = rng.sample([b for b in bases if b.device == "browser-mouse"], args.farm)
        for base in bases:
            if any(base is r for r in replayed):
                continue
            reference = humans.reference_for(f"cohort/{base.source}")
            labels[reference] = {"class": "person", "person": base.cluster, "device": base.device}
            schedules.append(posted(base, reference, key))
        for number, base in enumerate(replayed):
            for copy in range(args.copies):
                reference = humans.reference_for(f"cohort-farm/{number}/{copy}/{base.source}")
                labels[reference] = {"class": "farm", "recording": number}
                schedules.append(posted(base, reference, key))
        log(f"posting {len(bases) - args.farm} TRAIN people's sessions and a farm of {args.farm} x {args.copies}")
        pacer = pace.Pacer(server.base, active=len(schedules))
        pacer.run(schedules)
        if pacer.errors:
            raise SystemExit(f"{len(pacer.errors)} batches refused: {pacer.errors[:3]}")
        run = server.score(survey["surveyId"], force=True)
        scores = lake_rows(work, "scores", survey["surveyId"], run)
        features = {row["reference"]: row for row in lake_rows(work, "features", survey["surveyId"], run)}
    finally:
        server.stop()

    moved = Counter()
    sessions = Counter()
    persons_moved: dict[str, set] = defaultdict(set)
    persons: set = set()
    placed = Counter()
    for row in scores:
        label = labels.get(row["reference"])
        if label is None:
            continue
        cls = label["class"]
        sessions[cls] += 1
        alike = features.get(row["reference"], {}).get("cohort_alike")
        if alike is not None and alike == alike:
            placed[cls] += 1
        clustered = bool(row["reasons"]) and ALIKE.match(row["reasons"][0]) is not None
        if cls == "person":
            persons.add(label["person"])
        if clustered:
            moved[cls] += 1
            if cls == "person":
                persons_moved[label["person"]].add(row["reference"])
    farm_bands = Counter(row["score_band"] for row in scores if labels.get(row["reference"], {}).get("class") == "farm")
    result = {
        "people_sessions": sessions["person"], "people_placed": placed["person"],
        "people_sessions_moved": moved["person"], "persons": len(persons), "persons_moved": len(persons_moved),
        "farm_sessions": sessions["farm"], "farm_placed": placed["farm"], "farm_moved": moved["farm"],
        "farm_bands": dict(farm_bands),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
