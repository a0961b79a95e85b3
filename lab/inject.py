"""Direct injection: a recorded person's events posted straight to the collector, no browser.

What a fraudster with recorded sessions does: take real behaviour (here the TRAIN people's
converted recordings, never a HOLDOUT person's) and post it under new identifiers, either
- `bulk`: the whole session at once after the fact, as many events to a request as the
  collector takes (1000), or
- `paced`: batch by batch at the times the embed would have sent them (pace.embed_batches),
  with the session event saying the embed's current version.

A paced replay of a real person is that person's behaviour delivered as the embed delivers it:
nothing in the events can tell it from the person, which docs/scoring.md says plainly. Bulk
replays are what the transport features (`late_event_fraction`, `oversized_batch`) are for.
Evaluation only: these sessions are never trained on.
"""

from __future__ import annotations

import random

import humans
import pace

MODES = ("bulk", "paced")


def injected(base: humans.BaseSession, mode: str, seed: int) -> tuple[dict, pace.Paced | None, list]:
    """The label and the schedule of one injected session replaying `base` (its `embed`
    conversion) under a reference of its own."""
    reference = humans.reference_for(f"inject/{mode}/{seed}/{base.source}")
    events = humans.convert(base, "embed")
    session = dict(events[0]["data"], sessionId=reference, interviewId=reference, embedVersion="1.3.0")
    events = [{"type": "session", "t": 0.0, "data": session}] + events[1:]
    batches = pace.embed_batches(events) if mode == "paced" else pace.bulk_batches(events)
    label = {"reference": reference, "class": "bot", "generator": f"inject-{mode}", "family": "injection",
             "factors": {"injection": mode}, "seed": seed, "device": "none", "cluster": f"inject/{seed}",
             "split": "holdout", "source": base.source, "evaluation_only": True}
    return label, batches, events


def sessions(bases: list[humans.BaseSession], count: int, tracking_key: str, seed: int = 1) -> tuple[list, list]:
    """`count` injected sessions of each mode, each replaying a TRAIN base session chosen by
    seed: (labels, paced schedules)."""
    train = [base for base in bases if base.split == "train"]
    rng = random.Random(f"inject/{seed}")
    labels, schedules = [], []
    for mode in MODES:
        for number in range(count):
            base = rng.choice(train)
            label, batches, _ = injected(base, mode, seed * 100_000 + number)
            labels.append(label)
            schedules.append(pace.Paced(f"/event/{tracking_key}/{label['reference']}", batches))
    return labels, schedules
