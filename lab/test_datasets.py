"""Tests of the extra data set readers (datasets/readers.py) on small fixtures in each set's
real file format, written into a temporary folder. They need none of the real data."""

import hashlib
import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import humans
from datasets import readers
from datasets.readers import (ARROW, BACKSPACE, CHAR, DELETE, DIGIT, ENTER, MODIFIER, OTHER, SPACE,
                              TAB)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class Fixture(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.base = Path(self._tmp.name)
        # Readers called without a folder must read this base, never the real cache.
        patcher = mock.patch.dict(os.environ, {"TELLTALE_EXTRA_DATASETS": str(self.base)})
        patcher.start()
        self.addCleanup(patcher.stop)

    def tearDown(self):
        self._tmp.cleanup()


class SplitTest(unittest.TestCase):
    def test_rule(self):
        for set_name, person in (("sapimouse", "user1"), ("aalto-136m", "1020"), ("hmog", "100669"),
                                 ("hmog", "180679"), ("sapimouse", "user6")):
            first = hashlib.sha1(f"{set_name}/{person}".encode()).hexdigest()[0]
            expected = "holdout" if first in "01234" else "train"
            self.assertEqual(readers.split(set_name, person), expected)

    def test_known_people(self):
        # sha1("sapimouse/user6") = 0362fb..., sha1("sapimouse/user3") = 231011...,
        # sha1("hmog/180679") = 05287f..., sha1("sapimouse/user1") = e616be...,
        # sha1("aalto-136m/102") = 8ff3f9..., sha1("aalto-136m/103") = 61c84c...
        self.assertEqual(readers.split("sapimouse", "user6"), "holdout")
        # the edges of the rule: sha1("sapimouse/user8") = 4bbd50... (holdout),
        # sha1("sapimouse/user12") = 56a564... (train)
        self.assertEqual(readers.split("sapimouse", "user8"), "holdout")
        self.assertEqual(readers.split("sapimouse", "user12"), "train")
        self.assertEqual(readers.split("sapimouse", "user3"), "holdout")
        self.assertEqual(readers.split("hmog", "180679"), "holdout")
        self.assertEqual(readers.split("sapimouse", "user1"), "train")
        self.assertEqual(readers.split("aalto-136m", "102"), "train")
        self.assertEqual(readers.split("aalto-136m", "103"), "train")

    def test_set_name_is_part_of_the_key(self):
        # sha1("sapimouse/user6") starts 0 (holdout); sha1("hmog/user6") must be hashed on its own
        first = hashlib.sha1(b"hmog/user6").hexdigest()[0]
        self.assertEqual(readers.split("hmog", "user6"), "holdout" if first in "01234" else "train")


class ConstantsTest(unittest.TestCase):
    def test_pointer_kinds_are_those_of_humans(self):
        self.assertEqual(readers.MOVE, humans.MOVE)
        self.assertEqual(readers.PRESS, humans.PRESS)
        self.assertEqual(readers.RELEASE, humans.RELEASE)
        self.assertEqual(readers.PRESS_RIGHT, humans.PRESS_RIGHT)
        self.assertEqual(readers.RELEASE_RIGHT, humans.RELEASE_RIGHT)
        self.assertEqual(readers.WHEEL_UP, humans.WHEEL_UP)
        self.assertEqual(readers.WHEEL_DOWN, humans.WHEEL_DOWN)

    def test_key_classes(self):
        self.assertEqual(readers.KEY_CLASSES, ("char", "digit", "space", "backspace", "delete", "enter",
                                               "tab", "arrow", "modifier", "other"))


class FolderTest(Fixture):
    def test_default_folder_is_under_the_base(self):
        self.assertEqual(readers.dataset_folder("hmog"), self.base / "hmog")
        with mock.patch.dict(os.environ):
            del os.environ["TELLTALE_EXTRA_DATASETS"]
            self.assertEqual(readers.dataset_folder("hmog"),
                             Path.home() / ".cache" / "telltale-datasets" / "hmog")
        self.assertEqual(readers.dataset_folder("hmog", self.base / "x"), self.base / "x")

    def test_absent_folders_give_nothing(self):
        for reader in (readers.read_sapimouse, readers.read_aalto_136m, readers.read_hmog_touch,
                       readers.read_hmog_typing):
            self.assertEqual(reader(), [])
            self.assertEqual(reader(self.base / "nowhere"), [])


SAPIMOUSE_CSV = """client timestamp,button,state,x,y
15585,NoButton,Move,967,706
15601,NoButton,Move,958,700
15650,Left,Pressed,958,700
15667,Left,Drag,950,690
15700,Left,Released,950,690
15690,NoButton,Move,951,691
15720,Right,Pressed,951,691
15730,Right,Drag,952,691
15790,Right,Released,952,691
15800,Other,Pressed,952,691
15810,Other,Drag,953,692
15820,Other,Released,953,692
15830,Scroll,Down,953,692
oops,NoButton,Move,1,2
"""


class SapiMouseTest(Fixture):
    def test_reads_sessions_and_kinds(self):
        write(self.base / "sapimouse/user7/session_2020_05_14_1min.csv", SAPIMOUSE_CSV)
        write(self.base / "sapimouse/user7/session_2020_05_14_3min.csv", "client timestamp,button,state,x,y\n1,NoButton,Move,3,4\n")
        write(self.base / "sapimouse/user10/session_1min.csv", "client timestamp,button,state,x,y\n5,NoButton,Move,6,7\n")
        recordings = readers.read_sapimouse()
        self.assertEqual([(r.person, r.session) for r in recordings],
                         [("user7", "2020_05_14_1min"), ("user7", "2020_05_14_3min"), ("user10", "1min")])
        first = recordings[0]
        self.assertEqual((first.set, first.device, first.width, first.height), ("sapimouse", "mouse", None, None))
        self.assertEqual(first.rows, [
            (15585.0, "move", 967.0, 706.0),
            (15601.0, "move", 958.0, 700.0),
            (15650.0, "press", 958.0, 700.0),
            (15667.0, "move", 950.0, 690.0),
            (15690.0, "move", 951.0, 691.0),  # a row logged late is put in time order
            (15700.0, "release", 950.0, 690.0),
            (15720.0, "press-right", 951.0, 691.0),
            (15730.0, "move", 952.0, 691.0),
            (15790.0, "release-right", 952.0, 691.0),
            (15810.0, "move", 953.0, 692.0),  # a drag with another button is a move; its press is not
        ])
        for recording in recordings:
            for row in recording.rows:
                self.assertIn(row[1], readers.POINTER_KINDS)


AALTO_HEADER = "PARTICIPANT_ID\tTEST_SECTION_ID\tSENTENCE\tUSER_INPUT\tKEYSTROKE_ID\tPRESS_TIME\tRELEASE_TIME\tLETTER\tKEYCODE\n"


def aalto_row(section, keystroke, down, up, letter, code, sentence="Hi 5!", typed="Hi 5!"):
    return f"1020\t{section}\t{sentence}\t{typed}\t{keystroke}\t{down}\t{up}\t{letter}\t{code}\n"


class AaltoTest(Fixture):
    def test_reads_sentences_with_key_classes(self):
        text = AALTO_HEADER + "".join([
            aalto_row(10508, 1, 1000, 1200, "SHIFT", 16),
            aalto_row(10508, 2, 1100, 1180, "H", 72),
            aalto_row(10508, 4, 1400, 1450, " ", 32),  # listed before an earlier key: sorted by down
            aalto_row(10508, 3, 1300, 1390, "i", 73),
            aalto_row(10508, 5, 1500, 1560, "5", 53),
            aalto_row(10508, 6, 1600, 1700, "!", 49),
            aalto_row(10508, 7, 1800, 1850, "BKSP", 8),
            aalto_row(10508, 8, 1900, 1950, "", 69),  # key not logged: its keyCode tells
            aalto_row(10508, 9, 2000, 2050, "", 32),
            aalto_row(10508, 10, 2100, 2150, "", 229),
            aalto_row(10508, 11, 2200, 2210, "ARW_LEFT", 37),
            aalto_row(10508, 12, 2300, 2310, "ARw_DOWN", 40),
            aalto_row(10508, 13, 2400, 2410, "CAPS_LOCK", 20),
            aalto_row(10508, 14, 2500, 2510, "NUM_4", 100),
            aalto_row(10508, 15, 2600, 2610, "DELETE", 46),
            aalto_row(10508, 16, 2700, 2710, "TAB", 9),
            aalto_row(10508, 17, 2800, 2810, "INSERT", 45),
            aalto_row(10508, 18, 2900, 2910, "CTRL", 17),
            aalto_row(10508, 19, 3000, 2990, "x", 88),  # released before pressed: dropped
            aalto_row(10508, 20, 3100, "1.472007e+12", "y", 89),  # unparsable time: dropped
            aalto_row(10508, 21, 3200, 3260, "", 50),
            aalto_row(10508, 22, 3300, 3350, "\u00e9", 0),
            aalto_row(20000, 30, 9000, 9100, "o", 79, sentence="ok\tthere"),  # a tab inside a sentence
            aalto_row(20000, 31, 9200, 9260, "k", 75),
        ])
        write(self.base / "aalto-136m/1020_keystrokes.txt", text)
        write(self.base / "aalto-136m/readme.txt", "not a keystroke file\n")
        recordings = readers.read_aalto_136m()
        self.assertEqual([(r.set, r.person, r.session) for r in recordings],
                         [("aalto-136m", "1020", "10508"), ("aalto-136m", "1020", "20000")])
        self.assertEqual(recordings[0].keys, [
            (1000.0, 1200.0, MODIFIER), (1100.0, 1180.0, CHAR), (1300.0, 1390.0, CHAR),
            (1400.0, 1450.0, SPACE), (1500.0, 1560.0, DIGIT), (1600.0, 1700.0, CHAR),
            (1800.0, 1850.0, BACKSPACE), (1900.0, 1950.0, CHAR), (2000.0, 2050.0, SPACE),
            (2100.0, 2150.0, OTHER), (2200.0, 2210.0, ARROW), (2300.0, 2310.0, ARROW),
            (2400.0, 2410.0, MODIFIER), (2500.0, 2510.0, DIGIT), (2600.0, 2610.0, DELETE),
            (2700.0, 2710.0, TAB), (2800.0, 2810.0, OTHER), (2900.0, 2910.0, MODIFIER),
            (3200.0, 3260.0, DIGIT), (3300.0, 3350.0, CHAR),
        ])
        self.assertEqual(recordings[1].keys, [(9000.0, 9100.0, CHAR), (9200.0, 9260.0, CHAR)])

    def test_keeps_no_key_values(self):
        write(self.base / "aalto-136m/7_keystrokes.txt",
              AALTO_HEADER + aalto_row(1, 1, 10, 20, "q", 81) + aalto_row(1, 2, 30, 40, "SHIFT", 16))
        (recording,) = readers.read_aalto_136m()
        for key in recording.keys:
            self.assertEqual(len(key), 3)
            self.assertIn(key[2], readers.KEY_CLASSES)
        self.assertNotIn("q", repr(recording.keys))


class KeyClassTest(unittest.TestCase):
    """The class tables against the embed's keyClass (ingest/embed/telltale.js)."""

    def test_characters(self):
        for char in "aZé.,;'\"!?@#(-_=/\\":
            self.assertEqual(readers.class_of_character(char), CHAR, char)
        for char in "0123456789":
            self.assertEqual(readers.class_of_character(char), DIGIT, char)
        self.assertEqual(readers.class_of_character(" "), SPACE)

    def test_js_keycodes(self):
        table = {8: BACKSPACE, 9: TAB, 13: ENTER, 16: MODIFIER, 17: MODIFIER, 18: MODIFIER, 20: MODIFIER,
                 91: MODIFIER, 32: SPACE, 37: ARROW, 38: ARROW, 39: ARROW, 40: ARROW, 46: DELETE,
                 48: DIGIT, 57: DIGIT, 96: DIGIT, 105: DIGIT, 65: CHAR, 90: CHAR, 107: CHAR, 186: CHAR,
                 190: CHAR, 222: CHAR, 27: OTHER, 45: OTHER, 112: OTHER, 229: OTHER, 93: OTHER}
        for code, expected in table.items():
            self.assertEqual(readers.class_of_js_keycode(code), expected, code)

    def test_aalto_names(self):
        table = {("BKSP", "8"): BACKSPACE, ("SHIFT", "16"): MODIFIER, ("CAPS_LOCK", "20"): MODIFIER,
                 ("CTRL", "17"): MODIFIER, ("ALT", "18"): MODIFIER, ("WIN", "91"): MODIFIER,
                 ("ARW_UP", "38"): ARROW, ("ARw_DOWN", "40"): ARROW, ("DELETE", "46"): DELETE,
                 ("TAB", "9"): TAB, ("NUM_7", "103"): DIGIT, ("NUM_ADD", "107"): CHAR,
                 ("NUM_LK", "144"): OTHER, ("HOME", "36"): OTHER, ("F12", "123"): OTHER,
                 ("", "8"): BACKSPACE, ("", "abc"): OTHER, ("8", "56"): DIGIT, ("*", "56"): CHAR}
        for (letter, code), expected in table.items():
            self.assertEqual(readers.class_of_aalto_key(letter, code), expected, (letter, code))

    def test_android_keys(self):
        table = {-1: MODIFIER, -5: BACKSPACE, -4: ENTER, -2: OTHER, -3: OTHER, -6: MODIFIER, -99: OTHER,
                 32: SPACE, 10: ENTER, 97: CHAR, 46: CHAR, 63: CHAR, 48: DIGIT, 57: DIGIT, 0: OTHER}
        for key_id, expected in table.items():
            self.assertEqual(readers.class_of_android_key(key_id), expected, key_id)


HMOG_TOUCH = """1396226207590,6787169,100669011000001,1,0,0,307.0,813.0,1.0,0.021568628,0
1396226207622,6787195,100669011000001,1,0,2,308.19373,814.7906,1.0,0.021568628,0
1396226207640,6787211,100669011000001,2,1,5,500.0,900.0,1.0,0.03137255,0
1396226207650,6787222,100669011000001,2,1,2,502.0,901.0,1.0,0.033333335,0
1396226207660,6787230,100669011000001,2,1,6,503.0,902.0,1.0,0.033333335,0
1396226207631,6787218,100669011000001,1,0,2,321.0,844.0,1.0,0.019607844,0
1396226207670,6787240,100669011000001,1,0,3,321.0,844.0,1.0,0.019607844,0
1396226207690,6787260,100669011000001,1,0,1,322.0,845.0,1.0,0.019607844,0
"""

HMOG_KEYS = """1396571743474,5179588,100669181000001,1,-1,0
1396571743698,5179506,100669181000001,0,-1,0
1396571744401,5180514,100669181000001,1,109,0
1396571744646,5180453,100669181000001,0,109,0
1396571744700,5180600,100669181000001,1,32,0
1396571744721,5180835,100669181000001,1,53,0
1396571744975,5180782,100669181000001,0,53,0
1396571745000,5181000,100669181000001,0,-5,0
1396571745100,5181100,100669181000001,0,-5,0
1396571745200,5181180,100669181000001,1,-5,0
1396571745300,5181300,100669181000001,0,10,0
1396571745400,5181370,100669181000001,1,10,0
"""


class HmogTest(Fixture):
    def test_touch(self):
        write(self.base / "hmog/100669/100669_session_1/TouchEvent.csv", HMOG_TOUCH)
        write(self.base / "hmog/100669/100669_session_2/TouchEvent.csv", "")
        write(self.base / "hmog/207969/207696_session_3/TouchEvent.csv", HMOG_TOUCH.splitlines()[0] + "\n")
        recordings = readers.read_hmog_touch()
        self.assertEqual([(r.set, r.person, r.session, r.device) for r in recordings],
                         [("hmog", "100669", "1", "phone"), ("hmog", "207969", "3", "phone")])
        self.assertEqual(recordings[0].rows, [
            (6787169.0, "down", 307.0, 813.0, 1.0, 0.021568628, 0),
            (6787195.0, "move", 308.19373, 814.7906, 1.0, 0.021568628, 0),
            (6787211.0, "down", 500.0, 900.0, 1.0, 0.03137255, 1),
            (6787218.0, "move", 321.0, 844.0, 1.0, 0.019607844, 0),
            (6787222.0, "move", 502.0, 901.0, 1.0, 0.033333335, 1),
            (6787230.0, "up", 503.0, 902.0, 1.0, 0.033333335, 1),
            (6787260.0, "up", 322.0, 845.0, 1.0, 0.019607844, 0),
        ])
        self.assertEqual((recordings[0].width, recordings[0].height), (None, None))

    def test_typing(self):
        write(self.base / "hmog/100669/100669_session_18/KeyPressEvent.csv", HMOG_KEYS)
        write(self.base / "hmog/100669/100669_session_1/KeyPressEvent.csv", "")
        (recording,) = readers.read_hmog_typing()
        self.assertEqual((recording.set, recording.person, recording.session), ("hmog", "100669", "18"))
        self.assertEqual(recording.keys, [
            (5179506.0, 5179588.0, MODIFIER),  # the file lists the up before the down
            (5180453.0, 5180514.0, CHAR),       # an up of space with no down is dropped
            (5180782.0, 5180835.0, DIGIT),
            (5181100.0, 5181180.0, BACKSPACE),  # a down with no up before the next down is dropped
            (5181300.0, 5181370.0, ENTER),
        ])


if __name__ == "__main__":
    unittest.main()
