"""The operating system's mouse and keyboard for automation that drives it (bots.js's `xtest`
driver): XTEST on a display another process runs, one JSON command a line on stdin, each carried
out as soon as it arrives (the caller keeps the schedule), so the input reaches the browser the
way a replayed person's does (xinput.py).

    python3 lab/replay/xserve.py :N

Commands: {"op": "move", "x", "y"} (screen pixels), {"op": "button", "button", "down"},
{"op": "wheel", "notches"} (+1 one notch down, -1 up), {"op": "key", "keysym", "down"}; and two
that answer one JSON line on stdout: {"op": "pointer"} -> {"x", "y"}, {"op": "release"} (lets go
of every button and key it pressed) -> {"ok": true}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay.xinput import Display  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].startswith(":"):
        print("usage: xserve.py :DISPLAY", file=sys.stderr)
        return 2
    display = Display.attach(sys.argv[1])
    held_keys: set[str] = set()
    held_buttons: set[int] = set()

    def answer(value: dict) -> None:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            op = command["op"]
            if op == "move":
                display.move(command["x"], command["y"])
            elif op == "button":
                display.button(int(command["button"]), bool(command["down"]))
                (held_buttons.add if command["down"] else held_buttons.discard)(int(command["button"]))
            elif op == "wheel":
                for _ in range(abs(int(command["notches"]))):
                    display.wheel(1 if command["notches"] > 0 else -1)
            elif op == "key":
                display.key(command["keysym"], bool(command["down"]))
                (held_keys.add if command["down"] else held_keys.discard)(command["keysym"])
            elif op == "pointer":
                x, y = display.pointer()
                answer({"x": x, "y": y})
            elif op == "release":
                for button in sorted(held_buttons):
                    display.button(button, False)
                for keysym in sorted(held_keys):
                    display.key(keysym, False)
                held_buttons.clear()
                held_keys.clear()
                answer({"ok": True})
            else:
                raise ValueError(f"unknown command {op!r}")
    finally:
        display.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
