"""Debian's Chromium, headed, in a window of a virtual display: the browser every recorded
session runs in, people replayed and automation alike (bots.js launches the same binary with the
same flags and window draws, `WINDOWS` below and in survey/layouts.json's runner notes).

The flags are the ones a sandboxed CI machine needs (no sandbox as root, no background network
on a closed network) and nothing that changes how input or pages behave: no `--headless`, no
automation switches, no remote debugging port for a replayed person.
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
         "--disable-features=Translate,MediaRouter,OptimizationHints", "--disable-session-crashed-bubble")
# Desktop windows (outer size) and where they sit: drawn per session, the same draw for people
# and automation (bots.js's drawWindow mirrors it).
WINDOW_SIZES = ((1280, 800), (1366, 768), (1440, 900), (1536, 864), (1600, 1000), (1280, 1024))


@dataclass
class Window:
    x: int
    y: int
    width: int
    height: int


def draw_window(rng: random.Random, screen: tuple[int, int]) -> Window:
    width, height = rng.choice(WINDOW_SIZES)
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

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)
