"""A virtual X display (Xvfb) and input through the X server's XTEST extension: the operating
system's input path that xdotool and PyAutoGUI use. Events made here reach the browser exactly as
a hardware mouse's and keyboard's do (trusted, through the window system, with the browser's own
coalescing, pressure and screen coordinates); nothing is dispatched through DevTools.

One `Display` is one cursor: a worker replays one session at a time on its own display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

SCREEN = (1920, 1080)

# X keysyms of the keys a replay presses, by the embed's key class (key values are never
# recorded, so any key of the class will do; `char` keys are letters from a filler text).
KEYSYM_OF_CLASS = {
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "enter": "Return",
    "tab": "Tab",
    "modifier": "Shift_L",  # never Control or Alt: a replay must not trigger browser shortcuts
}
ARROWS = ("Left", "Right", "Up", "Down")


class XvfbError(RuntimeError):
    pass


@dataclass
class Display:
    """An Xvfb server and an XTEST connection to it."""

    number: int
    process: subprocess.Popen | None  # None: attached to a display another process runs
    width: int
    height: int

    @classmethod
    def start(cls, size: tuple[int, int] = SCREEN) -> "Display":
        if shutil.which("Xvfb") is None:
            raise XvfbError("Xvfb is missing (apt-get install -y xvfb)")
        read, write = os.pipe()
        # -displayfd: Xvfb picks a free display number and writes it when it is ready.
        process = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{size[0]}x{size[1]}x24", "-nolisten", "tcp",
             "-noreset"], pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(write)
        with os.fdopen(read) as pipe:
            text = pipe.readline().strip()
        if not text.isdigit():
            process.kill()
            raise XvfbError("Xvfb did not report a display number")
        display = cls(int(text), process, size[0], size[1])
        display._connect()
        return display

    @classmethod
    def attach(cls, name: str, size: tuple[int, int] = SCREEN) -> "Display":
        """An XTEST connection to a display someone else started (`:N`); closing it leaves the
        X server running."""
        display = cls(int(name.lstrip(":")), None, size[0], size[1])
        display._connect()
        return display

    def _connect(self) -> None:
        from Xlib import display as xdisplay
        from Xlib.ext import xtest  # noqa: F401 (checks the extension's module is there)

        self.x = xdisplay.Display(self.name)
        if not self.x.has_extension("XTEST"):
            raise XvfbError("the X server has no XTEST extension")
        self._keycodes: dict[str, int] = {}

    @property
    def name(self) -> str:
        return f":{self.number}"

    def close(self) -> None:
        try:
            self.x.close()
        except Exception:  # noqa: BLE001 (the server may be gone already)
            pass
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()

    # ---- input ---------------------------------------------------------------------------------

    def _fake(self, kind: int, detail: int = 0, x: int | None = None, y: int | None = None) -> None:
        from Xlib.ext import xtest

        if x is None:
            xtest.fake_input(self.x, kind, detail)
        else:
            xtest.fake_input(self.x, kind, x=x, y=y)
        self.x.flush()

    def move(self, x: float, y: float) -> tuple[int, int]:
        """Moves the cursor to screen pixel (x, y), held inside the screen; returns where."""
        from Xlib import X

        at = (min(max(int(round(x)), 0), self.width - 1), min(max(int(round(y)), 0), self.height - 1))
        self._fake(X.MotionNotify, x=at[0], y=at[1])
        return at

    def button(self, number: int, down: bool) -> None:
        """Mouse button 1 (left), 3 (right); 4 and 5 are one wheel notch up and down."""
        from Xlib import X

        self._fake(X.ButtonPress if down else X.ButtonRelease, number)

    def wheel(self, notches_down: int) -> None:
        """One notch (press and release of button 5 down, 4 up), as a wheel reports it."""
        number = 5 if notches_down > 0 else 4
        self.button(number, True)
        self.button(number, False)

    def keycode(self, keysym_name: str) -> int:
        from Xlib import XK

        code = self._keycodes.get(keysym_name)
        if code is None:
            keysym = XK.string_to_keysym(keysym_name)
            code = self.x.keysym_to_keycode(keysym)
            if not code:
                raise XvfbError(f"no keycode for {keysym_name}")
            self._keycodes[keysym_name] = code
        return code

    def key(self, keysym_name: str, down: bool) -> None:
        from Xlib import X

        self._fake(X.KeyPress if down else X.KeyRelease, self.keycode(keysym_name))

    def pointer(self) -> tuple[int, int]:
        reply = self.x.screen().root.query_pointer()
        return reply.root_x, reply.root_y

    def release_all(self) -> None:
        """Lets go of every button and the keys a replay may hold (after an error mid-press)."""
        for number in (1, 3):
            self.button(number, False)
        for name in ("Shift_L",):
            self.key(name, False)


def keysym_for(key_class: str, letter: str = "e") -> str | None:
    """The key a replay presses for one of the embed's key classes (None: the class is not
    replayed: `other` keys are unknown)."""
    if key_class == "char":
        return letter
    if key_class == "digit":
        return "5"
    if key_class == "arrow":
        return "Right"
    return KEYSYM_OF_CLASS.get(key_class)


class Clock:
    """Absolute scheduling on the monotonic clock: `wait_until(ms)` sleeps to `ms` after the
    clock's start, so the errors of single sleeps never add up along a path."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def now(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0

    def wait_until(self, ms: float) -> float:
        """Sleeps until `ms`; returns how late it woke (ms, 0 when on time). No spinning: a
        worker shares two cores with browsers, and sleep() overshoots by about 0.1 ms."""
        remaining = ms - self.now()
        if remaining > 0:
            time.sleep(remaining / 1000.0)
        return max(0.0, self.now() - ms)

    def shift(self, ms: float) -> None:
        """Moves the clock's start `ms` later (the schedule waits for something slow)."""
        self.start += ms / 1000.0
