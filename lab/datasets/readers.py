"""Readers for the extra human interaction data sets (SapiMouse, Aalto 136M keystrokes, HMOG).

Each reader takes the set's folder, as written by `unpack.sh` (default
`~/.cache/telltale-datasets/<set-name>`; the environment variable TELLTALE_EXTRA_DATASETS
replaces `~/.cache/telltale-datasets`), and returns plain normalised records. It returns [] when
the folder is absent. No record carries a key value or typed text: keys are reduced to the embed's
key classes on read, and touch and pointer rows hold only times, positions and contact geometry.
Each set's SOURCE.md (beside this file) gives its origin, terms, format and caveats.

Records:
- PointerRecording rows: (t_ms, kind, x, y), kind one of the pointer row kinds of humans.py
  (MOVE, PRESS, RELEASE, PRESS_RIGHT, RELEASE_RIGHT, WHEEL_UP, WHEEL_DOWN).
- TouchRecording rows: (t_ms, kind, x, y, pressure, size, pointer_id), kind "down" | "move" |
  "up". pressure and size are in the units the recording device reports (see the reader's
  docstring); None when the set does not record them.
- TypingRecording keys: (down_ms, up_ms, key_class), in time order of key-down, key_class one of
  KEY_CLASSES. Modifier keys are kept as rows of their own.

Split: a person is HOLDOUT when the first hex digit of sha1("<set-name>/<person>") is 0-4
(`split`). Split by person, never by file or session.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# The pointer row kinds of humans.py (the same strings; test_datasets checks they stay equal).
MOVE, PRESS, RELEASE = "move", "press", "release"
PRESS_RIGHT, RELEASE_RIGHT = "press-right", "release-right"
WHEEL_UP, WHEEL_DOWN = "wheel-up", "wheel-down"
POINTER_KINDS = (MOVE, PRESS, RELEASE, PRESS_RIGHT, RELEASE_RIGHT, WHEEL_UP, WHEEL_DOWN)

TOUCH_DOWN, TOUCH_MOVE, TOUCH_UP = "down", "move", "up"
TOUCH_KINDS = (TOUCH_DOWN, TOUCH_MOVE, TOUCH_UP)

# The embed's key classes (ingest/embed/telltale.js keyClass, scorer/src/trace.rs KeyClass).
CHAR, DIGIT, SPACE, BACKSPACE, DELETE = "char", "digit", "space", "backspace", "delete"
ENTER, TAB, ARROW, MODIFIER, OTHER = "enter", "tab", "arrow", "modifier", "other"
KEY_CLASSES = (CHAR, DIGIT, SPACE, BACKSPACE, DELETE, ENTER, TAB, ARROW, MODIFIER, OTHER)

SAPIMOUSE, AALTO_136M, HMOG = "sapimouse", "aalto-136m", "hmog"
SETS = (SAPIMOUSE, AALTO_136M, HMOG)



@dataclass
class PointerRecording:
    set: str
    person: str
    session: str
    device: str  # "mouse" | "trackpad" | ...
    width: int | None  # the screen or page size, None when the set does not record it
    height: int | None
    rows: list = field(default_factory=list)  # (t_ms, kind, x, y)


@dataclass
class TouchRecording:
    set: str
    person: str
    session: str
    device: str  # "phone" | "tablet" | ...
    width: int | None
    height: int | None
    rows: list = field(default_factory=list)  # (t_ms, kind, x, y, pressure, size, pointer_id)


@dataclass
class TypingRecording:
    set: str
    person: str
    session: str
    keys: list = field(default_factory=list)  # (down_ms, up_ms, key_class)


def split(set_name: str, person: str) -> str:
    """"holdout" when the first hex digit of sha1("<set_name>/<person>") is 0-4, else "train"."""
    digest = hashlib.sha1(f"{set_name}/{person}".encode()).hexdigest()
    return "holdout" if digest[0] in "01234" else "train"


def dataset_folder(set_name: str, folder: str | os.PathLike | None = None) -> Path:
    """The folder to read: `folder` when given, else <base>/<set_name>, where <base> is
    $TELLTALE_EXTRA_DATASETS or ~/.cache/telltale-datasets."""
    if folder is not None:
        return Path(folder)
    base = os.environ.get("TELLTALE_EXTRA_DATASETS")
    return (Path(base) if base else Path.home() / ".cache" / "telltale-datasets") / set_name


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _natural(path: Path):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


# ---- key classes --------------------------------------------------------------------------------


def class_of_character(char: str) -> str:
    """The embed's class of a typed character (KeyboardEvent.key of length 1)."""
    if char == " ":
        return SPACE
    return DIGIT if "0" <= char <= "9" else CHAR


# JavaScript KeyboardEvent.keyCode -> class, for keys whose key value the set did not log.
_JS_KEYCODE_CLASSES = {
    8: BACKSPACE, 9: TAB, 13: ENTER, 16: MODIFIER, 17: MODIFIER, 18: MODIFIER, 20: MODIFIER,
    91: MODIFIER, 92: MODIFIER, 224: MODIFIER, 225: MODIFIER,  # Meta (left, right, Firefox), AltGr
    32: SPACE, 37: ARROW, 38: ARROW, 39: ARROW, 40: ARROW, 46: DELETE,
    59: CHAR, 61: CHAR, 173: CHAR,  # Firefox ; = -
}


def class_of_js_keycode(code: int) -> str:
    """The embed's class of a key known only by its JavaScript keyCode. A digit-row key is
    "digit" (with Shift it may have typed punctuation; the keyCode cannot tell)."""
    if code in _JS_KEYCODE_CLASSES:
        return _JS_KEYCODE_CLASSES[code]
    if 48 <= code <= 57 or 96 <= code <= 105:  # digit row, numeric keypad digits
        return DIGIT
    if 65 <= code <= 90 or 106 <= code <= 111 or 186 <= code <= 192 or 219 <= code <= 223:
        return CHAR  # letters, keypad operators, punctuation
    return OTHER


# The 136M Keystrokes set's names for keys that type no character (upper-cased before lookup).
_AALTO_NAMED = {
    "BKSP": BACKSPACE, "DELETE": DELETE, "ENTER": ENTER, "TAB": TAB,
    "ARW_LEFT": ARROW, "ARW_RIGHT": ARROW, "ARW_UP": ARROW, "ARW_DOWN": ARROW,
    "SHIFT": MODIFIER, "CTRL": MODIFIER, "ALT": MODIFIER, "WIN": MODIFIER, "CAPS_LOCK": MODIFIER,
    "ALT_GR": MODIFIER, "META": MODIFIER,
}


def class_of_aalto_key(letter: str, keycode: str) -> str:
    """The embed's class of one 136M Keystrokes row from its LETTER and KEYCODE columns.

    LETTER is the typed character, a key name (BKSP, SHIFT, ARW_LEFT, NUM_4, ...) or empty (the
    set's readme: the key was not logged, and the JavaScript keyCode is all there is)."""
    if len(letter) == 1:
        return class_of_character(letter)
    name = letter.upper()
    if name in _AALTO_NAMED:
        return _AALTO_NAMED[name]
    if name.startswith("NUM_"):
        rest = name[4:]
        if rest.isdigit():
            return DIGIT
        return OTHER if rest in ("LK", "LOCK") else CHAR  # keypad operators type characters
    if name == "":
        code = _number(keycode)
        return class_of_js_keycode(int(code)) if code is not None else OTHER
    return OTHER  # INSERT, HOME, END, PG_UP, F12, MENU, PAUSE, NUM_LK, SCR_LK, ...


# HMOG's soft keyboard: a positive KeyID is the Unicode code point the key types; negative ones
# are android.inputmethodservice.Keyboard codes (SHIFT -1, MODE_CHANGE -2, CANCEL -3, DONE -4,
# DELETE -5 (deletes backwards), ALT -6).
_ANDROID_KEYBOARD_CODES = {-1: MODIFIER, -2: OTHER, -3: OTHER, -4: ENTER, -5: BACKSPACE, -6: MODIFIER}


def class_of_android_key(key_id: int) -> str:
    if key_id < 0:
        return _ANDROID_KEYBOARD_CODES.get(key_id, OTHER)
    if key_id in (10, 13):
        return ENTER
    if key_id == 9:
        return TAB
    if key_id < 32 or key_id == 127:
        return OTHER
    try:
        return class_of_character(chr(key_id))
    except (ValueError, OverflowError):
        return OTHER


# ---- SapiMouse ------------------------------------------------------------------------------------

_SAPIMOUSE_KINDS = {
    ("Left", "Pressed"): PRESS, ("Left", "Released"): RELEASE,
    ("Right", "Pressed"): PRESS_RIGHT, ("Right", "Released"): RELEASE_RIGHT,
}


def read_sapimouse(folder: str | os.PathLike | None = None) -> list[PointerRecording]:
    """SapiMouse: one PointerRecording per session file `user<N>/session_<date>_<k>min.csv`.

    Rows come from `client timestamp,button,state,x,y`: Move and Drag (any button) are MOVE;
    Left/Right Pressed and Released are PRESS/RELEASE and PRESS_RIGHT/RELEASE_RIGHT; the few
    presses of other buttons ("Other") and unknown states are dropped. t is the logger's own
    millisecond clock (not zero at the session start); x, y are the logged pixel coordinates.
    Rows are ordered by t (stable). The set records no screen size (width, height None) and
    does not say whether a mouse or a touchpad was used; device is "mouse" as the set calls it.
    """
    root = dataset_folder(SAPIMOUSE, folder)
    if not root.is_dir():
        return []
    recordings = []
    for user_dir in sorted((p for p in root.glob("user*") if p.is_dir()), key=_natural):
        for path in sorted(user_dir.glob("session_*.csv"), key=_natural):
            rows = []
            with open(path, newline="", encoding="utf-8", errors="replace") as handle:
                reader = csv.reader(handle)
                next(reader, None)
                for record in reader:
                    if len(record) < 5:
                        continue
                    t, x, y = _number(record[0]), _number(record[3]), _number(record[4])
                    if t is None or x is None or y is None:
                        continue
                    button, state = record[1].strip(), record[2].strip()
                    kind = MOVE if state in ("Move", "Drag") else _SAPIMOUSE_KINDS.get((button, state))
                    if kind is not None:
                        rows.append((t, kind, x, y))
            rows.sort(key=lambda row: row[0])
            if rows:
                session = path.stem[len("session_"):] if path.stem.startswith("session_") else path.stem
                recordings.append(PointerRecording(SAPIMOUSE, user_dir.name, session, "mouse", None, None, rows))
    return recordings


# ---- Aalto 136M Keystrokes ------------------------------------------------------------------------


def read_aalto_136m(folder: str | os.PathLike | None = None) -> list[TypingRecording]:
    """136M Keystrokes (Dhakal et al., CHI 2018): one TypingRecording per typed sentence
    (TEST_SECTION_ID) of each participant file `<PARTICIPANT_ID>_keystrokes.txt`.

    down_ms/up_ms are PRESS_TIME/RELEASE_TIME (browser Date.now() milliseconds). Keys are ordered
    by key-down (ties by KEYSTROKE_ID). Rows whose times do not parse, or that were released
    before they were pressed, are dropped. The set logs no Enter (a sentence ends with Enter or a
    Next button, which are not in the logs).
    """
    root = dataset_folder(AALTO_136M, folder)
    if not root.is_dir():
        return []
    recordings = []
    for path in sorted(root.glob("*_keystrokes.txt"), key=_natural):
        person = path.name.split("_", 1)[0]
        sections: dict[str, list] = {}
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            handle.readline()  # header
            for line in handle:
                fields = line.rstrip("\r\n").split("\t")
                # The sentence columns may hold anything; the last five columns are fixed.
                if len(fields) < 9:
                    continue
                try:
                    down, up = int(fields[-4]), int(fields[-3])
                except ValueError:
                    continue
                keystroke = _number(fields[-5])  # only breaks ties of key-down time
                keystroke = keystroke if keystroke is not None else float("inf")
                if up < down:
                    continue
                key_class = class_of_aalto_key(fields[-2], fields[-1])
                sections.setdefault(fields[1], []).append((down, keystroke, up, key_class))
        for section, rows in sections.items():
            rows.sort(key=lambda row: (row[0], row[1]))
            keys = [(float(down), float(up), key_class) for down, _, up, key_class in rows]
            recordings.append(TypingRecording(AALTO_136M, person, section, keys))
    return recordings


# ---- HMOG ------------------------------------------------------------------------------------------

_HMOG_ACTIONS = {0: TOUCH_DOWN, 5: TOUCH_DOWN, 2: TOUCH_MOVE, 1: TOUCH_UP, 6: TOUCH_UP}


def _hmog_sessions(root: Path):
    """(subject, session number, session folder) for every HMOG session folder, in order. The
    subject is the subject folder's name (one folder, 207969, holds sessions named 207696_...)."""
    for subject_dir in sorted((p for p in root.iterdir() if p.is_dir() and p.name.isdigit()), key=_natural):
        for session_dir in sorted(subject_dir.glob("*_session_*"), key=_natural):
            if session_dir.is_dir():
                yield subject_dir.name, session_dir.name.rsplit("_", 1)[-1], session_dir


def read_hmog_touch(folder: str | os.PathLike | None = None) -> list[TouchRecording]:
    """HMOG: one TouchRecording per session folder `<subject>/<subject>_session_<n>/`, from its
    TouchEvent.csv (no header: Systime, EventTime, ActivityID, Pointer_count, PointerID,
    ActionID, X, Y, Pressure, Contact_size, Phone_orientation).

    t_ms is EventTime (Android MotionEvent event time, milliseconds since the phone booted).
    ActionID 0/5 (DOWN, POINTER_DOWN) is "down", 2 "move", 1/6 (UP, POINTER_UP) "up"; other
    actions are dropped. x, y are screen pixels. pressure is MotionEvent.getPressure() (normalised,
    nominally 0-1; 1.0 on every row of this copy, so it carries no information) and size is
    MotionEvent.getSize() (the contact's size as a fraction, 0-1, of the largest the screen
    reports; not a radius in pixels). pointer_id is PointerID. The files do not record the screen
    size (width, height None).
    """
    root = dataset_folder(HMOG, folder)
    if not root.is_dir():
        return []
    recordings = []
    for subject, session, session_dir in _hmog_sessions(root):
        path = session_dir / "TouchEvent.csv"
        if not path.is_file():
            continue
        rows = []
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            for record in csv.reader(handle):
                if len(record) < 10:
                    continue
                t, action = _number(record[1]), _number(record[5])
                x, y = _number(record[6]), _number(record[7])
                pointer = _number(record[4])
                if None in (t, action, x, y, pointer) or int(action) not in _HMOG_ACTIONS:
                    continue
                rows.append((t, _HMOG_ACTIONS[int(action)], x, y, _number(record[8]), _number(record[9]), int(pointer)))
        rows.sort(key=lambda row: row[0])
        if rows:
            recordings.append(TouchRecording(HMOG, subject, session, "phone", None, None, rows))
    return recordings


def read_hmog_typing(folder: str | os.PathLike | None = None) -> list[TypingRecording]:
    """HMOG soft-keyboard typing: one TypingRecording per session folder whose KeyPressEvent.csv
    has rows (the writing sessions), columns (no header) Systime, PressTime, ActivityID,
    PressType (0 finger down, 1 finger up), KeyID, Phone_orientation.

    down_ms/up_ms are PressTime (milliseconds since the phone booted). Events are taken in
    PressTime order (the file lists each key's up before its down); each down is paired with the
    next up of the same KeyID; an up with no open down, and a down followed by another down of
    the same key before any up, are dropped. KeyID
    is the typed character's code point, or an Android keyboard code (-1 Shift "modifier", -5
    Delete, which deletes backwards, "backspace", -4 Done "enter", -2 mode change and -3 cancel
    "other").
    """
    root = dataset_folder(HMOG, folder)
    if not root.is_dir():
        return []
    recordings = []
    for subject, session, session_dir in _hmog_sessions(root):
        path = session_dir / "KeyPressEvent.csv"
        if not path.is_file():
            continue
        events = []
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            for index, record in enumerate(csv.reader(handle)):
                if len(record) < 5:
                    continue
                t, press_type, key_id = _number(record[1]), _number(record[3]), _number(record[4])
                if None in (t, press_type, key_id) or int(press_type) not in (0, 1):
                    continue
                # At one time, the up sorts after the down so that a zero-length press pairs.
                events.append((t, int(press_type), index, int(key_id)))
        events.sort()
        open_downs: dict[int, float] = {}  # KeyID -> time of its down still waiting for an up
        keys = []
        for t, press_type, _, key_id in events:
            if press_type == 0:
                open_downs[key_id] = t  # a second down of the key drops the first (no up seen)
            elif key_id in open_downs:
                keys.append((open_downs.pop(key_id), t, class_of_android_key(key_id)))
        keys.sort(key=lambda key: key[0])
        if keys:
            recordings.append(TypingRecording(HMOG, subject, session, keys))
    return recordings


READERS = {
    SAPIMOUSE: (read_sapimouse,),
    AALTO_136M: (read_aalto_136m,),
    HMOG: (read_hmog_touch, read_hmog_typing),
}
