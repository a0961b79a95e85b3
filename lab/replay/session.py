"""One recorded session: a fresh headed Chromium on a worker's display, a survey layout from
the page server, a plan carried out by a hand through XTEST, and the page left as a person
leaves it (the embed's last batch goes by beacon on pagehide)."""

from __future__ import annotations

import random
import time
import uuid

from .browser import Browser, Window
from .pages import PageServer
from .play import Hand, Outcome, Runner, draw_plan
from .xinput import Display

LEAVE_AFTER_MS = 2300  # past the embed's 2 s batching interval


def record_session(display: Display, server: PageServer, tracking_key: str, reference: str, layout: str,
                   hand: Hand, rng: random.Random, window: Window, plan: list | None = None) -> Outcome:
    probe = uuid.uuid4().hex
    # The hand rests somewhere over the window when the page opens.
    display.move(window.x + rng.uniform(0.2, 0.8) * window.width, window.y + rng.uniform(0.3, 0.8) * window.height)
    browser = Browser(display.name, server.url(layout, tracking_key, reference, probe), window)
    try:
        server.wait_loaded(probe)
        runner = Runner(display, server, probe, hand, rng)
        outcome = runner.run(plan if plan is not None else draw_plan(layout, rng))
        time.sleep(LEAVE_AFTER_MS / 1000)
        server.ask(probe, {"kind": "leave"})
        time.sleep(1.0)
        return outcome
    finally:
        display.release_all()
        browser.close()
        server.forget(probe)
