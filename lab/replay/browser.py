"""Debian's Chromium, headed, in a window of a virtual display: the one browser launch of every
recorded session, people replayed and automation alike. Whoever drives a session, its browser is
started here with the same flags and a window drawn from the same sizes; automation that drives
through DevTools attaches to it over its debugging port (`Browser.devtools`), people and the
XTEST automation never do.

The flags are the ones a sandboxed CI machine needs (no sandbox as root, no background network
on a closed network), a DevTools port for whoever attaches, and nothing that changes how input or
pages behave: no `--headless`, no automation switches (`--enable-automation` would add an infobar
and `navigator.webdriver` for one class only).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--no-sandbox", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic", "--password-store=basic",
         "--disable-features=Translate,MediaRouter,OptimizationHints", "--disable-session-crashed-bubble",
         # Every session's browser listens for DevTools, whether or not anything attaches.
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
         # A DevTools port alone makes navigator.webdriver true (Chromium 156): off for every session.
         "--disable-blink-features=AutomationControlled")
# Desktop windows (outer size) and where they sit: drawn per session, the same draw for people
# and automation (bots.js's drawWindow mirrors it).
WINDOW_SIZES = ((1280, 800), (1366, 768), (1440, 900), (1536, 864), (1600, 1000), (1280, 1024))
# The window of a phone layout's session (the page inside is an emulated phone, set through
# DevTools by whoever drives it: people's touch and touch automation alike).
PHONE_WINDOW = (480, 980)


@dataclass
class Window:
    x: int
    y: int
    width: int
    height: int


def draw_window(rng: random.Random, screen: tuple[int, int], phone: bool = False) -> Window:
    width, height = PHONE_WINDOW if phone else rng.choice(WINDOW_SIZES)
    width, height = min(width, screen[0]), min(height, screen[1])
    return Window(rng.randint(0, screen[0] - width), rng.randint(0, screen[1] - height), width, height)


class Browser:
    """One Chromium process on `display` with a fresh profile, showing `url` in one window."""

    def __init__(self, display: str, url: str, window: Window, extra: tuple[str, ...] = ()):
        if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
            raise RuntimeError(f"{CHROMIUM} is missing (apt-get install -y chromium)")
        self.profile = tempfile.mkdtemp(prefix="telltale-replay-profile-")
        args = [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                f"--window-position={window.x},{window.y}", f"--window-size={window.width},{window.height}",
                *extra, "--new-window", url]
        self.process = subprocess.Popen(args, env={**os.environ, "DISPLAY": display},
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)

    def devtools(self, timeout: float = 20.0) -> str:
        """The browser's DevTools endpoint (`http://127.0.0.1:PORT`), for automation that attaches
        to it: Chromium writes the port it picked into the profile once it listens."""
        import time

        path = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited ({self.process.returncode}) before listening for DevTools")
            try:
                port = path.read_text().split("\n")[0].strip()
            except FileNotFoundError:
                port = ""
            if port.isdigit():
                return f"http://127.0.0.1:{port}"
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not listen for DevTools within {timeout:.0f} s")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)
