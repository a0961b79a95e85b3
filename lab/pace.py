"""Sending recorded sessions to the collector as the embed does, in real time.

The server knows when each request arrived, and the scorer compares that with the events' own
timestamps (a recording posted after the fact arrives minutes "late" by its own clock). So the
harness's human sessions, converted recordings, must reach the collector the way the embed
sends: `embed_batches` replays the embed's batching rules (ingest/embed/telltale.js) over a
session's events, and `Pacer` posts each batch when the embed would have, many sessions at once,
each on a browser clock of its own.

`bulk_batches` is the other way, a recording posted at once after the fact (the direct
injection generator's bulk mode).
"""

from __future__ import annotations

import heapq
import http.client
import json
import random
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

# The embed's rules (ingest/embed/telltale.js).
FLUSH_INTERVAL_MS = 2000
MAX_BATCH_EVENTS = 200
# What the collector takes in one request.
COLLECTOR_MAX_EVENTS = 1000
# A browser's clock is off the server's by this much at most (seconds), drawn per session.
CLOCK_SKEW_S = 90.0


def embed_batches(events: list[dict]) -> list[tuple[float, list[dict]]]:
    """(send time, events) of every request the embed makes for `events` (time-ordered, `t` in
    ms on the session's clock), assuming a collector that answers at once: the first event
    queued after a send starts a 2 s timer; 200 queued events go at once; the page hidden or
    left sends everything queued at once (sendBeacon, 200 a request); a submit sends at once."""
    batches: list[tuple[float, list[dict]]] = []
    queue: list[dict] = []
    timer: float | None = None

    def send(at: float, everything: bool) -> None:
        nonlocal queue
        while queue:
            batches.append((at, queue[:MAX_BATCH_EVENTS]))
            queue = queue[MAX_BATCH_EVENTS:]
            if not everything:
                break

    for event in events:
        t = event["t"]
        # Timers that fired before this event: each sends a batch, and what is left waits for
        # the next timer (the answer re-arms it).
        while timer is not None and timer <= t:
            send(timer, everything=False)
            timer = timer + FLUSH_INTERVAL_MS if queue else None
        queue.append(event)
        kind = event["type"]
        leaving = kind == "pagehide" or (kind == "visibility" and event["data"].get("state") == "hidden")
        if leaving:
            send(t, everything=True)
            timer = None
        elif len(queue) >= MAX_BATCH_EVENTS or kind == "submit":
            send(t, everything=False)
            timer = t + FLUSH_INTERVAL_MS if queue else None
        elif timer is None:
            timer = t + FLUSH_INTERVAL_MS
    while queue:
        at = timer if timer is not None else events[-1]["t"]
        send(at, everything=False)
        timer = at + FLUSH_INTERVAL_MS
    return batches


def bulk_batches(events: list[dict]) -> list[tuple[float, list[dict]]]:
    """Every event posted at once after the session's last one, as many to a request as the
    collector takes."""
    end = events[-1]["t"] if events else 0.0
    return [(end, events[i:i + COLLECTOR_MAX_EVENTS]) for i in range(0, len(events), COLLECTOR_MAX_EVENTS)]


def body(batch: list[dict], clock_ms: float) -> bytes:
    """A request body: the events with Unix-ms timestamps on the browser's clock."""
    chunk = [{"type": e["type"], "timestamp": int(round(clock_ms + e["t"])), "data": e["data"]} for e in batch]
    return json.dumps({"events": chunk}, separators=(",", ":")).encode()


@dataclass
class Paced:
    """A session to send: where to, its requests' schedule (or how to make it when the session
    starts, so that sessions waiting their turn hold no events), and its browser's clock offset."""

    path: str  # /event/{trackingKey}/{identifier}
    batches: list[tuple[float, list[dict]]] | None = None
    skew_ms: float = 0.0
    started: float = field(default=0.0)  # wall-clock seconds when the session began
    make: Callable[[], list[tuple[float, list[dict]]]] | None = field(default=None, repr=False)


class Pacer:
    """Posts many sessions' batches at the wall-clock times the embed would, `active` sessions
    at once, from `workers` threads each with its own kept-alive connection. The collector
    answers once a batch is fsync'd, and the batches in flight share a sync: with a sync of
    100-500 ms on a loaded disk, a dozen threads sent 60 requests a second and fell ten seconds
    behind the embed's schedule within minutes; 64 keep up."""

    def __init__(self, base_url: str, active: int = 600, workers: int = 64):
        parsed = urllib.parse.urlsplit(base_url)
        self.host, self.port = parsed.hostname, parsed.port
        self.active = active
        self.workers = workers
        self.local = threading.local()
        self.errors: list[str] = []
        self.sent = 0

    def connection(self) -> http.client.HTTPConnection:
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        return self.local.connection

    def post(self, path: str, payload: bytes) -> None:
        for attempt in range(5):
            try:
                connection = self.connection()
                connection.request("POST", path, payload, {"Content-Type": "text/plain"})
                response = connection.getresponse()
                response.read()
                if response.status == 201:
                    self.sent += 1
                    return
                if response.status in (429, 503):
                    time.sleep(0.2 * (attempt + 1))
                    continue
                self.errors.append(f"{path}: {response.status}")
                return
            except (OSError, http.client.HTTPException):
                self.local.connection = None
                time.sleep(0.2 * (attempt + 1))
        self.errors.append(f"{path}: no answer")

    def run(self, sessions: list[Paced], seed: int = 0) -> None:
        """Sends every session; returns when all are sent. Sessions start as earlier ones end,
        the first `active` spread over the first 2 s."""
        rng = random.Random(seed)
        pending = list(reversed(sessions))
        due: list[tuple[float, int, int, int]] = []  # (wall time, order, session, batch)
        order = 0
        running = 0

        def admit(now: float) -> None:
            nonlocal order, running
            while pending and running < self.active:
                paced = pending.pop()
                index = len(sessions) - len(pending) - 1
                if paced.batches is None:
                    paced.batches = paced.make() if paced.make else []
                if not paced.batches:
                    continue
                paced.started = now + rng.uniform(0, 2.0)
                if not paced.skew_ms:
                    paced.skew_ms = rng.uniform(-CLOCK_SKEW_S, CLOCK_SKEW_S) * 1000
                running += 1
                for number, (at, _) in enumerate(paced.batches):
                    heapq.heappush(due, (paced.started + at / 1000, order, index, number))
                    order += 1

        with ThreadPoolExecutor(self.workers) as pool:
            admit(time.time())
            futures = []
            while due:
                at, _, index, number = heapq.heappop(due)
                delay = at - time.time()
                if delay > 0:
                    time.sleep(delay)
                paced = sessions[index]
                clock = paced.started * 1000 + paced.skew_ms
                payload = body(paced.batches[number][1], clock)
                futures.append(pool.submit(self.post, paced.path, payload))
                if number == len(paced.batches) - 1:
                    running -= 1
                    paced.batches = []  # sent: its events can go
                    admit(time.time())
                if len(futures) > 10_000:
                    futures = [f for f in futures if not f.done()]
            for future in futures:
                future.result()
