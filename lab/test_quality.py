"""Unit tests of the scoring-quality harness (run by .ci/run):
python3 -m unittest discover -s lab"""

import csv
import hashlib
import json
import math
import random
import statistics
import tempfile
import unittest
from collections import Counter
from pathlib import Path

import humans
import model
import report

REPO = Path(__file__).resolve().parent.parent


class SplitTest(unittest.TestCase):
    def test_the_split_follows_the_first_hex_digit_of_the_path_sha1(self):
        # sha1("a") = 86f7e437...: TRAIN; sha1("d") = 3c363836...: HOLDOUT.
        self.assertFalse(humans.is_holdout("a"))
        self.assertTrue(humans.is_holdout("d"))

    def test_balabit_is_split_by_person(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "test_files"
            for user in ("user7", "user9", "user16", "user29", "user35"):
                (root / user).mkdir(parents=True)
                for index in range(12):
                    (root / user / f"session_{index:04d}").write_text(
                        "record timestamp,client timestamp,button,state,x,y\n"
                        + "".join(f"{i * 0.02},{i * 0.02},NoButton,Move,{100 + i},{200 + i}\n" for i in range(30)))
            sessions = humans.balabit_sessions(Path("/nonexistent"), Path(tmp))
            strokes_from = {user for user in ("user7", "user9", "user16", "user29", "user35")
                            if humans.balabit_split(user) == "train"}
        splits = {s.cluster: set() for s in sessions}
        for s in sessions:
            splits[s.cluster].add(s.split)
        # Every session of one person on one side: the four HOLDOUT users wholly, user9 wholly TRAIN.
        self.assertEqual(splits, {"balabit/user7": {"holdout"}, "balabit/user9": {"train"},
                                  "balabit/user16": {"holdout"}, "balabit/user29": {"holdout"},
                                  "balabit/user35": {"holdout"}})
        self.assertEqual(strokes_from, {"user9"})
        self.assertTrue(all(s.events[0]["type"] == "session" for s in sessions))
        # The datasets README's rule: user7 and user16 are the users whose sha1("balabit/<user>")
        # starts with 0-4 (user29 and user35 were HOLDOUT already).
        for user in ("user7", "user16"):
            self.assertIn(hashlib.sha1(f"balabit/{user}".encode()).hexdigest()[0], "01234")

    def test_a_release_that_ends_no_press_is_dropped(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stroke.txt"
            path.write_text("resolution:412,732\n"
                            "10,PressedTouch,100,200\n20,MoveTouch,110,210\n30,ReleasedTouch,NaN,NaN\n"
                            "40,ReleasedTouch,NaN,NaN\n50,Released,300,600\n")
            _, _, rows = humans.read_delbot_stroke(path)
        self.assertEqual([kind for _, kind, _, _ in rows], ["PressedTouch", "MoveTouch", "ReleasedTouch"])
        # The finger lifts where it last was.
        self.assertEqual(rows[-1][2:], (110.0, 210.0))


class ConversionTest(unittest.TestCase):
    def test_pointer_moves_are_thinned_to_one_per_16_ms_like_the_embed(self):
        rows = [(float(t), humans.MOVE, t, t) for t in range(0, 200, 4)]
        rows.insert(5, (19.0, humans.PRESS, 19, 19))  # presses are never thinned
        kept = humans.thinned(rows)
        self.assertIn((19.0, humans.PRESS, 19, 19), kept)
        times = [row[0] for row in kept if row[1] == humans.MOVE]
        self.assertTrue(all(b - a >= 16 for a, b in zip(times, times[1:])))
        self.assertEqual(len(times), 13)

    def test_typing_sends_key_classes_and_lengths_never_characters(self):
        timeline = humans.Timeline(random.Random(7))
        timeline.typing(humans.Typist(random.Random(7)), 40)
        kinds = {e["type"] for e in timeline.events}
        self.assertLessEqual(kinds, {"keydown", "keyup", "input", "paste"})
        for event in timeline.events:
            self.assertFalse(set(event["data"]) & {"key", "value", "text", "code"})

    def test_synthetic_typists_follow_the_published_population_means(self):
        rng = random.Random(3)
        people = [humans.Typist(rng) for _ in range(4000)]
        flights = [statistics.fmean(p.flight() for _ in range(50)) for p in people[:400]]
        self.assertAlmostEqual(statistics.fmean(p.iki for p in people), humans.IKI_MEAN_MS, delta=8)
        self.assertAlmostEqual(statistics.fmean(p.hold_mean for p in people), humans.HOLD_MEAN_MS, delta=2)
        self.assertAlmostEqual(statistics.fmean(flights), statistics.fmean(p.iki for p in people[:400]), delta=15)

    def test_batches_hold_every_event_in_time_order_with_unix_ms_timestamps(self):
        session = humans.HumanSession("r", "s", "pc-mouse", "c", "train")
        session.events = [{"type": "pointermove", "t": float(500 - i), "data": {}} for i in range(450)]
        bodies = [json.loads(b) for b in humans.batches(session, 1_700_000_000_000)]
        stamps = [e["timestamp"] for body in bodies for e in body["events"]]
        self.assertEqual(len(stamps), 450)
        self.assertEqual(stamps, sorted(stamps))
        self.assertTrue(all(len(body["events"]) <= 200 for body in bodies))


CMU_COLUMNS = ["subject", "sessionIndex", "rep"] + [
    column for first, second in zip(humans.CMU_KEYS, humans.CMU_KEYS[1:])
    for column in (f"H.{first}", f"DD.{first}.{second}", f"UD.{first}.{second}")] + ["H.Return"]


def write_cmu(path: Path, subjects: list[str], repetitions: int = 20, seed: int = 1) -> None:
    """A small file in the CMU layout: seconds, DD = H + UD."""
    rng = random.Random(seed)
    lines = [",".join(CMU_COLUMNS)]
    for subject in subjects:
        for rep in range(1, repetitions + 1):
            values = {"subject": subject, "sessionIndex": "1", "rep": str(rep)}
            for first, second in zip(humans.CMU_KEYS, humans.CMU_KEYS[1:]):
                hold = rng.uniform(0.05, 0.15)
                # After five, the capital's press always comes 100 ms or more after its release.
                up_down = rng.uniform(0.1, 0.5) if first == "five" else rng.uniform(-0.03, 0.3)
                values[f"H.{first}"] = f"{hold:.4f}"
                values[f"UD.{first}.{second}"] = f"{up_down:.4f}"
                values[f"DD.{first}.{second}"] = f"{hold + up_down:.4f}"
            values["H.Return"] = f"{rng.uniform(0.05, 0.15):.4f}"
            lines.append(",".join(values[column] for column in CMU_COLUMNS))
    path.write_text("\n".join(lines) + "\n")


def cmu_subject_names(per_split: int = 2) -> list[str]:
    names = {"train": [], "holdout": []}
    for index in range(1, 200):
        name = f"s{index:03d}"
        if len(names[humans.cmu_split(name)]) < per_split:
            names[humans.cmu_split(name)].append(name)
    return names["train"] + names["holdout"]


def write_delbot(root: Path, strokes_per_split: int = 9) -> None:
    """Mouse strokes (a press, a circle of moves about every 15.7 ms, a release) in both splits."""
    folder = root / "circles_human_pc1"
    folder.mkdir(parents=True)
    rng = random.Random(2)
    counts = {"train": 0, "holdout": 0}
    index = 0
    while min(counts.values()) < strokes_per_split:
        index += 1
        name = f"circle_{index:05d}.txt"
        split = "holdout" if humans.is_holdout(f"circles_human_pc1/{name}") else "train"
        if counts[split] >= strokes_per_split:
            continue
        counts[split] += 1
        t = 1000.0 * index + rng.uniform(0, 5)
        rows = [f"{t:.3f},Pressed,500,300"]
        for step in range(90):
            t += rng.uniform(14.5, 17.0)
            angle = 2 * math.pi * step / 90
            rows.append(f"{t:.3f},Move,{400 + 100 * math.cos(angle):.1f},{300 + 100 * math.sin(angle):.1f}")
        rows.append(f"{t + 8:.3f},Released,500,300")
        (folder / name).write_text("resolution:1536,864\n" + "\n".join(rows) + "\n")


POINTER_EVENTS = {"pointermove", "pointerdown", "pointerup", "click", "touchmove", "touchstart", "touchend"}


class VariantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        write_delbot(root / "delbot-mouse")
        cls.subjects_file = root / "cmu-keystroke" / "keystrokes.csv"
        cls.subjects_file.parent.mkdir()
        write_cmu(cls.subjects_file, cmu_subject_names())
        cls.subjects = humans.load_cmu(cls.subjects_file)
        cls.bases = humans.delbot_bases(root / "delbot-mouse", humans.Typists(cls.subjects, {}))
        cls.sessions = [humans.variant_session(b, v) for b in cls.bases for v in humans.VARIANTS]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def variants_of(self, base):
        return {s.variant: s for s in self.sessions if s.base == base.id}

    @staticmethod
    def moves(events):
        return [e for e in events if e["type"] == "pointermove"]

    @staticmethod
    def others(events):
        return [(e["type"], e["t"], e["data"]) for e in events[1:] if e["type"] not in POINTER_EVENTS]

    def test_every_variant_is_its_own_session_with_the_base_in_its_label(self):
        self.assertEqual(len(self.sessions), len(self.bases) * len(humans.VARIANTS))
        self.assertEqual(len({s.reference for s in self.sessions}), len(self.sessions))
        for base in self.bases:
            variants = self.variants_of(base)
            self.assertEqual(set(variants), set(humans.VARIANTS))
            for variant, session in variants.items():
                label = session.label()
                self.assertEqual((label["variant"], label["base"]), (variant, base.id))
                self.assertEqual(label["reference"], humans.variant_reference(base.source, variant))
                self.assertEqual(session.events[0]["data"]["sessionId"], session.reference)
                self.assertIn(label["typing"], ("cmu", "synthetic", "none"))
                self.assertEqual(label["source"], variants["embed"].label()["source"])

    def test_variants_differ_only_in_the_pointer_conversion(self):
        for base in self.bases:
            variants = self.variants_of(base)
            reference = self.others(variants["embed"].events)
            self.assertTrue(any(kind == "keydown" for kind, _, _ in reference))
            for variant in ("raw", "hz60", "hz120", "hz240", "rdp", "jitter", "scale"):
                self.assertEqual(self.others(variants[variant].events), reference, variant)
            # Presses and releases keep their place up to Date.now()'s whole milliseconds.
            presses = [e["t"] for e in variants["embed"].events if e["type"] == "pointerdown"]
            for variant in ("raw", "hz60", "rdp"):
                mine = [e["t"] for e in variants[variant].events if e["type"] == "pointerdown"]
                self.assertEqual(len(mine), len(presses))
                for a, b in zip(mine, presses):
                    self.assertLessEqual(abs(a - b), 1, variant)

    def test_refresh_rate_variants_deliver_frames_that_the_embed_thins_to_16_or_17_ms(self):
        for base in self.bases:
            for variant in ("hz60", "hz120", "hz240"):
                times = [e["t"] for e in self.moves(self.variants_of(base)[variant].events)]
                self.assertTrue(all(t == int(t) for t in times), "Date.now(): whole ms")
                gaps = [b - a for a, b in zip(times, times[1:]) if b - a < 300]
                self.assertGreater(len(gaps), 100)
                self.assertLessEqual(set(gaps), {16.0, 17.0}, variant)

    def test_raw_keeps_every_recorded_move_in_whole_milliseconds(self):
        base = self.bases[0]
        moves = self.moves(self.variants_of(base)["raw"].events)
        recorded = [row for row in base.rows if row[1] == humans.MOVE]
        self.assertEqual(len(moves), len(recorded))
        self.assertEqual([m["t"] for m in moves], [float(round(row[0])) for row in recorded])
        self.assertLess(len(self.moves(self.variants_of(base)["embed"].events)), len(moves))

    def test_remote_desktop_intervals_are_irregular(self):
        gaps = []
        for base in self.bases:
            times = [e["t"] for e in self.moves(self.variants_of(base)["rdp"].events)]
            gaps += [b - a for a, b in zip(times, times[1:]) if b - a < 300]
        self.assertGreaterEqual(min(gaps), 16)
        self.assertGreater(len(set(gaps)), 40)
        self.assertGreater(statistics.pstdev(gaps) / statistics.fmean(gaps), 0.3)
        self.assertTrue(35 <= statistics.median(gaps) <= 80, statistics.median(gaps))

    def test_jitter_moves_timestamps_and_stalls_but_keeps_the_order(self):
        changed = 0
        for base in self.bases:
            variants = self.variants_of(base)
            times = [e["t"] for e in self.moves(variants["jitter"].events)]
            self.assertEqual(times, sorted(times))
            self.assertTrue(all(t == int(t) for t in times))
            changed += times != [e["t"] for e in self.moves(variants["embed"].events)]
        self.assertEqual(changed, len(self.bases))
        stalled = humans.convert_jitter([(float(t), humans.MOVE, t, 0) for t in range(0, 600_000, 4)], random.Random(3))
        # Moves every 4 ms for 10 minutes: a gap past the embed's 16 ms is a stall (one per 5 s).
        gaps = [b[0] - a[0] for a, b in zip(stalled, stalled[1:])]
        stalls = [gap for gap in gaps if gap > 40]
        self.assertTrue(80 <= len(stalls) <= 170, len(stalls))
        self.assertLessEqual(max(gaps), humans.STALL_MAX_MS + humans.MOVE_INTERVAL_MS + 2)

    def test_scale_multiplies_coordinates_and_the_screen(self):
        for base in self.bases:
            variants = self.variants_of(base)
            factor = humans.scale_factor(base)
            self.assertIn(factor, humans.SCALE_FACTORS)
            scaled, plain = self.moves(variants["scale"].events), self.moves(variants["embed"].events)
            self.assertEqual([m["t"] for m in scaled], [m["t"] for m in plain])
            recorded = {row[0]: row for row in base.rows if row[1] == humans.MOVE}
            for move in scaled:
                row = recorded[move["t"]]
                self.assertEqual((move["data"]["x"], move["data"]["y"]), (round(row[2] * factor), round(row[3] * factor)))
            screen, original = variants["scale"].events[0]["data"], variants["embed"].events[0]["data"]
            self.assertEqual(screen["screenWidth"], round(original["screenWidth"] * factor))
            self.assertEqual(screen["viewportHeight"], round(original["screenHeight"] * factor) - 130)
            self.assertAlmostEqual(screen["devicePixelRatio"], original["devicePixelRatio"] / factor, places=3)

    def test_cut_sessions_are_shorter_and_close_with_pagehide(self):
        for base in self.bases:
            variants = self.variants_of(base)
            cut, full = variants["cut"].events, variants["embed"].events
            at = humans.cut_time(base)
            self.assertEqual((cut[-1]["type"], cut[-1]["t"]), ("pagehide", at + 2))
            # Hidden before the page goes (unless a tab switch had hidden it already).
            self.assertEqual([e["data"]["state"] for e in cut if e["type"] == "visibility"][-1], "hidden")
            self.assertEqual(full[-1]["type"], "pagehide")
            share = at / full[-2]["t"]
            self.assertTrue(0.35 <= share <= 0.70, share)
            self.assertLess(len(cut), len(full))
            self.assertTrue(all(e["t"] < at for e in cut[:-2]))
            kept = [o for o in self.others(cut) if o[1] < at]
            self.assertEqual(kept, [o for o in self.others(full) if o[1] < at])
            if not any(e["type"] == "keydown" for e in cut):
                self.assertEqual(variants["cut"].typing, "none")

    def test_both_typing_sources_and_cmu_subjects_of_the_sessions_split_only(self):
        typing = {base.typing for base in self.bases}
        self.assertEqual(typing, {"cmu", "synthetic"})
        for base in self.bases:
            variants = self.variants_of(base)
            self.assertEqual({s.source for s in variants.values()}, {variants["embed"].source})
            if base.typing == "cmu":
                subject = base.typed.split(":")[1].split("/")[0]
                self.assertEqual(humans.cmu_split(subject), base.split)
                self.assertIn(subject, variants["embed"].label()["source"])
                self.assertEqual(variants["embed"].label()["typing"], "cmu")
                self.assertFalse(any(e["type"] == "paste" for e in base.others))

    def test_cmu_typing_reproduces_the_recorded_holds_and_keydown_times(self):
        subject = next(iter(self.subjects.values()))
        repetitions = subject.runs[0][3:6]
        timeline = humans.Timeline(random.Random(4))
        timeline.t = 1000.0
        timeline.cmu_typing(repetitions, subject)
        events = sorted(timeline.events, key=lambda e: e["t"])
        downs = [e for e in events if e["type"] == "keydown" and e["data"]["keyClass"] != "modifier"]
        # Every key is pushed as its keydown and then its keyup.
        pushed = timeline.events
        holds = {id(e): pushed[i + 1]["t"] - e["t"] for i, e in enumerate(pushed) if e["type"] == "keydown"}
        # Ten keys a repetition; the Return only at the end of the answer, as `enter`.
        self.assertEqual(len(downs), 10 * 3 + 1)
        self.assertEqual([d["data"]["keyClass"] for d in downs[:11]],
                         ["char"] * 4 + ["digit"] + ["char"] * 5 + ["char"])
        self.assertEqual(downs[-1]["data"]["keyClass"], "enter")
        self.assertEqual(sum(d["data"]["keyClass"] == "enter" for d in downs), 1)
        inputs = [e for e in events if e["type"] == "input"]
        self.assertEqual(len(inputs), 30)
        self.assertTrue(all(e["data"] == {"inputType": "insertText", "lengthDelta": 1, "field": 1} for e in inputs))
        with open(self.subjects_file) as lines:
            rows = {(r["subject"], int(r["rep"])): r for r in csv.DictReader(lines)}
        for index, rep in enumerate(repetitions):
            row = rows[(rep.subject, rep.rep)]
            keys = humans.CMU_KEYS if index == 2 else humans.CMU_KEYS[:-1]
            mine = downs[10 * index:10 * index + len(keys)]
            for position, key in enumerate(keys):
                down = mine[position]["t"]
                self.assertAlmostEqual(holds[id(mine[position])], 1000 * float(row[f"H.{key}"]), places=6)
                if position + 1 < len(keys):
                    flight = mine[position + 1]["t"] - down
                    self.assertAlmostEqual(flight, 1000 * float(row[f"DD.{key}.{keys[position + 1]}"]), places=6)
            # Shift is held around the capital R, and released before the next key goes down.
            capital, after = mine[5]["t"], mine[6]["t"]
            shift_down = [e["t"] for e in events if e["type"] == "keydown" and e["data"]["keyClass"] == "modifier"][index]
            shift_up = [e["t"] for e in events if e["type"] == "keyup" and e["data"]["keyClass"] == "modifier"][index]
            self.assertTrue(mine[4]["t"] < shift_down < capital < shift_up < after)
        # Through the embed's batches (whole ms), the times are kept up to rounding.
        session = humans.HumanSession("r", "s", "pc-mouse", "c", "train")
        session.events = timeline.events
        sent = [e for body in humans.batches(session, 1_700_000_000_000) for e in json.loads(body)["events"]
                if e["type"] == "keydown" and e["data"]["keyClass"] != "modifier"]
        for a, b, mine_a, mine_b in zip(sent, sent[1:], downs, downs[1:]):
            self.assertLessEqual(abs((b["timestamp"] - a["timestamp"]) - (mine_b["t"] - mine_a["t"])), 1)

    def test_cmu_subjects_are_split_by_the_hash_of_their_name(self):
        self.assertEqual(humans.cmu_split("s002"),
                         "holdout" if hashlib.sha1(b"cmu-split/s002").hexdigest()[0] in "01234" else "train")
        splits = {name: s.split for name, s in self.subjects.items()}
        self.assertEqual(sorted(splits.values()), ["holdout", "holdout", "train", "train"])
        typists = {"7001": [], "7002": []}
        for split in ("train", "holdout"):
            chosen = humans.choose_typing([(f"x{i}", "c", split) for i in range(42)], self.subjects, typists)
            kinds = Counter(typing.kind for typing in chosen.values())
            # CMU, Aalto and synthetic typing in turn; Aalto people of the split only (one of
            # these two people is in each split; the tests of datasets/ pin the rule), and never
            # in TRAIN: its terms grant research use, so it measures and is not trained on.
            expected = {"cmu": 14, "aalto": 14, "synthetic": 14} if split == "holdout" else {"cmu": 21, "synthetic": 21}
            self.assertEqual(kinds, expected)
            picked = [typing.subject for typing in chosen.values() if typing.kind == "cmu"]
            self.assertTrue(all(s.split == split for s in picked))
            people = {typing.sentences is typists[name] and name for typing in chosen.values()
                      if typing.kind == "aalto" for name in typists}
            self.assertTrue(all(humans.recordings.split("aalto-136m", name) == split
                                for name in people if name))


class ModelTest(unittest.TestCase):
    def test_the_cohorts_adjustment_is_the_rust_one(self):
        # scorer/src/cohort/tests.rs pins the same figures on the Rust side.
        bands = {"bands": {"review_from": 30.0, "human_from": 70.0}}
        self.assertEqual(model.cohort_adjusted(bands, 95.0, ["41 sessions in this survey move alike"]), 25.82)
        self.assertEqual(model.cohort_adjusted(bands, 95.0, ["9 sessions in this survey move alike"]), 30.0)
        self.assertEqual(model.cohort_adjusted(bands, 95.0, ["9 sessions in this survey move alike (typing)"]), 30.0)
        self.assertEqual(model.cohort_adjusted(bands, 20.0, ["9 sessions in this survey move alike"]), 20.0)
        self.assertEqual(model.cohort_adjusted(bands, 95.0, ["webdriver=1 (-8.00)"]), 95.0)
        self.assertEqual(model.cohort_adjusted(bands, 95.0, []), 95.0)

    def test_the_replica_scores_the_built_in_models_terms_like_the_rust_formula(self):
        v1 = json.loads((REPO / "scorer/models/telltale-v1.json").read_text())
        # Model::score on Features::unmeasured() is 50 (scorer/src/model/tests.rs).
        self.assertEqual(model.score(v1, {}), 50.0)
        self.assertEqual(model.score(v1, {"webdriver": 1.0}), round(100 / (1 + math.exp(8)) * 100) / 100)
        self.assertEqual(model.band(29.99), "automation-like")
        self.assertEqual(model.band(30.0), "review")
        self.assertEqual(model.band(70.0), "human-like")

    def test_the_replica_agrees_with_the_rust_tests_model_of_modalities_and_averages(self):
        # EVIDENCE_MODEL of scorer/src/model/tests.rs, with the figures its tests pin.
        fixture = json.loads(EVIDENCE_MODEL)

        def percent(z):
            return math.floor(100.0 / (1.0 + math.exp(-z)) * 100.0 + 0.5) / 100.0

        row = {"movements": 6.0, "movement_peak_time": 0.3, "movement_deviation": 0.05}
        self.assertEqual(model.score(fixture, row), percent(-1.0))
        row["movement_deviation"] = None
        self.assertEqual(model.score(fixture, row), percent(0.5))
        self.assertEqual(model.reasons(fixture, row), ["movement_peak_time=0.300 (-0.50)"])
        row = {"movements": 6.0, "movement_deviation": 0.05}
        self.assertEqual(model.score(fixture, row), percent(1.0 + 0.75 * -1.5))
        keys = {"movements": 2.0, "movement_peak_time": 0.9, "free_keystrokes": 12.0, "key_flight_cv": 0.5}
        self.assertEqual(model.score(fixture, keys), 50.0)
        self.assertEqual(model.reasons(fixture, keys), [
            "too little behaviour: 2 aimed pointer movements, 0 touch gestures, 12 keys",
            "key_flight_cv=0.500 (+3.50)"])
        keys["movements"] = 4.0
        self.assertEqual(model.score(fixture, keys), percent(6.5))
        self.assertEqual(model.reasons(fixture, keys), ["key_flight_cv=0.500 (+3.50)",
                                                        "movement_peak_time=0.900 (+1.50)"])
        self.assertEqual(model.reasons(fixture, {"webdriver": 1.0})[0], "webdriver=1 (-8.00)")

    def test_scorecard_bins_are_half_open_like_the_rust_bin_transform(self):
        bins = [{"kind": "bin", "high": 0.5}, {"kind": "bin", "low": 0.5, "high": 1.25},
                {"kind": "bin", "low": 1.25}]
        for value in (-1e300, 0.0, 0.4999, 0.5, 1.0, 1.25, 7.0):
            self.assertEqual(sum(model.transform(spec, value) for spec in bins), 1.0, value)

    def test_scores_round_halves_up_like_rust(self):
        # A z whose percent is exactly x.xx5 after scaling is rare; the rule itself is checked.
        self.assertEqual(math.floor(12.345 * 100 + 0.5) / 100, 12.35)


# scorer/src/model/tests.rs's EVIDENCE_MODEL, character for character.
EVIDENCE_MODEL = (REPO / "scorer/src/model/tests.rs").read_text().split(
    'const EVIDENCE_MODEL: &str = r#"', 1)[1].split('"#;', 1)[0]


class GradientBoostingTest(unittest.TestCase):
    """The per-modality trees fitted by LightGBM, converted to the model file and summed like
    Rust."""

    @staticmethod
    def samples(n=600, seed=11):
        rng = random.Random(seed)
        samples = []
        for i in range(n):
            human = i % 2 == 0
            row = {"movements": rng.choice([0.0, 2.0, 8.0, 12.0]), "free_keystrokes": rng.choice([0.0, 30.0])}
            row["movement_peak_speed_ratio"] = rng.gauss(2.6, 0.4) if human else rng.gauss(2.0, 0.3)
            row["movement_submovements"] = rng.uniform(1, 3) if human else rng.uniform(1, 1.5)
            row["untrusted_fraction"] = 0.0 if human or rng.random() < 0.5 else rng.uniform(0.1, 1)
            row["press_dwell_mean_ms"] = rng.uniform(80, 2000) if human else rng.uniform(0, 120)
            row["movement_deviation"] = rng.uniform(0, 0.3) if rng.random() < 0.8 else None
            row["key_flight_log_sd"] = rng.uniform(0.3, 0.8) if human else rng.uniform(0.1, 0.5)
            row["key_flight_cv"] = rng.uniform(0.3, 0.9)
            label = {"reference": f"r{i}", "class": "human" if human else "bot", "cluster": f"p{i % 40}",
                     "generator": "human" if human else ("naive", "windmouse")[i % 4 == 1],
                     "family": "human" if human else ("naive", "wind")[i % 4 == 1]}
            samples.append((label, row))
        return samples

    def test_converted_trees_sum_to_lightgbms_raw_scores_per_modality(self):
        samples = self.samples()
        fitted, boosters = model.fit_gbdt(samples, version="test", rounds=40, tune=False)
        self.assertEqual(set(boosters), {"pointer", "keyboard"}, "no touch in these samples")
        pointer = [t for t in fitted["trees"] if t["modality"] == "pointer"]
        rows = [row for _, row in samples if model.has_evidence("pointer", row)][:200]
        spec = model.MODALITIES["pointer"]
        deviations = [d for d in fitted["deviations"] if d["feature"] in {f for f, _, _ in spec["trees"]}]
        raw = boosters["pointer"].predict(model.tree_matrix(rows, spec["trees"], deviations), raw_score=True)
        only_pointer = dict(fitted, trees=pointer, terms=[], bias=0.0)
        for expected, row in zip(raw, rows):
            # Rows with every pointer feature measured walk one path, as LightGBM does.
            if all(model.measured(row.get(f)) for f, _, _ in spec["trees"] if f in row):
                self.assertAlmostEqual(expected, model.log_odds(only_pointer, row), places=9)
        for tree in fitted["trees"]:
            nodes = tree["nodes"]
            for index, node in enumerate(nodes):
                if "leaf" not in node:
                    self.assertGreater(node["left"], index)
                    self.assertGreater(node["right"], index)
                    self.assertEqual(node["missing"], "average")
                    covers = nodes[node["left"]]["cover"] + nodes[node["right"]]["cover"]
                    self.assertAlmostEqual(node["cover"], covers)
        json.loads(json.dumps(fitted))  # plain JSON: what the Rust side reads

    def test_unmeasured_is_evidence_for_neither_side(self):
        fitted, _ = model.fit_gbdt(self.samples(), version="test", rounds=40, tune=False)
        row = {"movements": 8.0, "movement_peak_speed_ratio": 2.3, "movement_submovements": 1.4,
               "press_dwell_mean_ms": 90.0, "movement_deviation": None}
        _, effects = model.contributions(fitted, row)
        self.assertTrue(any(node.get("feature") == "movement_deviation" for tree in fitted["trees"]
                            for node in tree["nodes"]), "a tree splits on it")
        self.assertNotIn("movement_deviation", effects, "an unmeasured feature is charged nothing")
        # A tree's expected value over its cover equals its root's value: with everything
        # unmeasured, each speaking tree adds its root and nothing more.
        empty = {"movements": 8.0}
        roots = sum(t["nodes"][0]["value"] for t in fitted["trees"] if t["modality"] == "pointer")
        z, effects = model.contributions(dict(fitted, terms=[]), empty)
        self.assertAlmostEqual(z, roots, places=9)
        self.assertEqual(dict(effects), {})

    def test_keys_alone_never_make_a_session_human_like(self):
        fitted, _ = model.fit_gbdt(self.samples(), version="test", rounds=40, tune=False)
        typist = {"movements": 0.0, "free_keystrokes": 30.0, "key_flight_log_sd": 0.7, "key_flight_cv": 0.6}
        fitted["bias"] = 20.0  # whatever the log-odds, keys alone cannot decide
        self.assertEqual(model.score(fitted, typist), 50.0)
        self.assertTrue(model.reasons(fitted, typist)[0].startswith("too little behaviour: 0 aimed"))

    def test_tells_only_ever_lower_the_score_and_long_presses_never_raise_it_past_the_clip(self):
        samples = self.samples()
        fitted, _ = model.fit_gbdt(samples, version="test", rounds=60, tune=False)
        self.assertTrue(all(term["weight"] < 0 for term in fitted["terms"]))
        row = {"movements": 8.0, "movement_peak_speed_ratio": 2.5, "movement_submovements": 2.0,
               "movement_deviation": 0.1}
        untrusted = [model.log_odds(fitted, {**row, "untrusted_fraction": v}) for v in (0, 0.2, 0.5, 1)]
        self.assertEqual(untrusted, sorted(untrusted, reverse=True))
        dwell = [model.log_odds(fitted, {**row, "press_dwell_mean_ms": v}) for v in (60, 300, 3000)]
        self.assertEqual(len(set(dwell)), 1, "beyond 60 ms a press says nothing more")
        metronome = [model.log_odds(fitted, {**row, "key_flight_cv": v}) for v in (0.5, 0.06, 0.01)]
        self.assertEqual(metronome, sorted(metronome, reverse=True))
        self.assertLess(metronome[2], metronome[0] - 4)

    def test_masking_the_environment_leaves_behaviour_and_transport(self):
        fitted, _ = model.fit_gbdt(self.samples(n=200), version="test", rounds=5, tune=False)
        masked = model.mask_environment(fitted)
        kept = {term["feature"] for term in masked["terms"]}
        self.assertFalse(kept & model.ENVIRONMENT_FEATURES)
        self.assertIn("late_event_fraction", kept)
        self.assertEqual(model.log_odds(masked, {"webdriver": 1.0, "automation_globals": 1.0}),
                         model.log_odds(fitted, {}))


    def test_human_ranges_are_quantiles_of_the_measured_humans_only(self):
        samples = self.samples(n=200)
        fitted, _ = model.fit_gbdt(samples, version="test", rounds=5, tune=False)
        ranges = {r["feature"]: r for r in fitted["human_ranges"]}
        dwell = ranges["press_dwell_mean_ms"]
        humans = sorted(row["press_dwell_mean_ms"] for label, row in samples if label["class"] == "human")
        self.assertEqual(dwell["sessions"], len(humans))
        self.assertEqual(len(dwell["quantiles"]), model.HUMAN_RANGE_POINTS)
        # Six significant digits.
        self.assertLess(abs(dwell["quantiles"][0] - humans[0]), 1e-5 * humans[0])
        self.assertLess(abs(dwell["quantiles"][-1] - humans[-1]), 1e-5 * humans[-1])
        self.assertEqual(dwell["quantiles"], sorted(dwell["quantiles"]))
        # Unmeasured values (None) are left out, never counted as zero.
        deviation = [row["movement_deviation"] for label, row in samples
                     if label["class"] == "human" and row["movement_deviation"] is not None]
        self.assertEqual(ranges["movement_deviation"]["sessions"], len(deviation))
        self.assertNotIn("reference", ranges)


class ReportTest(unittest.TestCase):
    def test_auc_counts_ties_as_half(self):
        import numpy as np
        self.assertEqual(report.auc(np.array([1.0, 2.0]), np.array([3.0, 4.0])), 1.0)
        self.assertEqual(report.auc(np.array([5.0]), np.array([5.0])), 0.5)
        self.assertEqual(report.auc(np.array([9.0]), np.array([1.0])), 0.0)

    def test_tpr_at_fpr_never_flags_more_humans_than_allowed(self):
        import numpy as np
        humans_scores = np.arange(100, dtype=float)
        bots = np.array([0.5, 1.5, 50.0])
        # 1 % of 100 humans: one human (score 0) may fall below the threshold 1.0.
        self.assertAlmostEqual(report.tpr_at_fpr(bots, humans_scores, 0.01), 1 / 3)
        self.assertAlmostEqual(report.tpr_at_fpr(bots, humans_scores, 0.05), 2 / 3)


BOTS = REPO / "lab" / "bots.js"


def node(*args: str) -> str:
    import subprocess

    return subprocess.run(["node", *args], check=True, capture_output=True, text=True, timeout=120).stdout


@unittest.skipIf(__import__("shutil").which("node") is None, "node is not installed")
class BotDesignTest(unittest.TestCase):
    """bots.js --list-design: the factor levels each factorial seed gets, with no browser."""

    FACTORS = ("path", "typing", "pacing", "modality", "driver")
    MOVING = {"bezier", "ghost-cursor", "windmouse", "perlin", "minjerk", "replay"}

    def design(self, seeds: str, *flags: str) -> list[dict]:
        return [json.loads(line) for line in node(str(BOTS), "--list-design", seeds, *flags).splitlines()]

    def test_every_level_of_every_factor_appears_equally_often(self):
        from collections import Counter

        rows = self.design("1-840")
        self.assertEqual([row["seed"] for row in rows], list(range(1, 841)))
        counts = {f: Counter(row["factors"][f] for row in rows) for f in self.FACTORS}
        # 840 seeds are whole blocks of 4 and 3: the input path and the pacing exactly balanced
        # (half the sessions through XTEST); within each path its typing levels about equally
        # often, and never insertText through XTEST.
        self.assertEqual(counts["driver"], {"cdp": 210, "webdriver": 210, "xtest": 420})
        self.assertEqual(counts["pacing"], {level: 280 for level in ("human", "agent", "fast")})
        for xtest, levels in ((True, ("population", "replay", "metronome")),
                              (False, ("population", "replay", "metronome", "insert"))):
            typing = Counter(row["factors"]["typing"] for row in rows if (row["factors"]["driver"] == "xtest") == xtest)
            self.assertEqual(set(typing), set(levels), typing)
            mean = 420 / len(levels)
            self.assertTrue(all(0.75 * mean <= n <= 1.25 * mean for n in typing.values()), typing)
        # A desktop layout (the default, demo) is never filled by touch: its seeds are redrawn
        # among the other modalities; the phone layout always is.
        self.assertEqual(set(counts["modality"]), {"mouse", "keyboard", "paste"})
        self.assertTrue(all(250 <= n <= 310 for n in counts["modality"].values()), counts["modality"])
        phone = self.design("1-40", "--layout", "phone")
        self.assertEqual({row["factors"]["modality"] for row in phone}, {"touch"})
        self.assertEqual({row["factors"]["path"] for row in phone}, {"none"})
        # The factors are drawn independently: every modality meets every typing level and driver.
        pairs = Counter((row["factors"]["modality"], row["factors"]["typing"]) for row in rows)
        self.assertEqual(len(pairs), 12)
        self.assertTrue(all(25 <= n <= 100 for n in pairs.values()), pairs)
        drivers = Counter((row["factors"]["modality"], row["factors"]["driver"]) for row in rows)
        self.assertEqual(len(drivers), 9, drivers)
        mouse_paths = Counter(row["factors"]["path"] for row in rows if row["factors"]["modality"] == "mouse")
        self.assertEqual(set(mouse_paths), self.MOVING)
        self.assertLessEqual(max(mouse_paths.values()), 3 * min(mouse_paths.values()), mouse_paths)

    def test_no_impossible_combination_is_drawn(self):
        for row in self.design("1-840"):
            f = row["factors"]
            if f["modality"] in ("keyboard", "touch"):
                self.assertEqual(f["path"], "none", row)
            if f["modality"] == "mouse":
                self.assertIn(f["path"], self.MOVING, row)
            if f["path"] == "ghost-cursor":
                self.assertEqual(f["driver"], "cdp", row)
            if f["driver"] == "xtest":
                self.assertNotIn(f["modality"], ("touch",), row)
                self.assertNotEqual(f["typing"], "insert", row)
        paste = {row["factors"]["path"] for row in self.design("1-200") if row["factors"]["modality"] == "paste"}
        self.assertIn("none", paste)  # the keyboard reaches the field
        self.assertTrue(paste & self.MOVING)  # or the mouse does

    def test_a_seed_always_gets_the_same_levels_and_reference(self):
        first, again = self.design("100001-100040"), self.design("100001-100040")
        self.assertEqual(first, again)
        self.assertEqual(len({row["reference"] for row in first}), 40)
        self.assertEqual(self.design("100007")[0], first[6])

    def test_forced_levels_restrict_the_draw(self):
        from collections import Counter

        rows = self.design("1-120", "--modality", "paste", "--driver", "webdriver")
        self.assertTrue(all(r["factors"]["modality"] == "paste" and r["factors"]["driver"] == "webdriver" for r in rows))
        self.assertNotIn("ghost-cursor", {r["factors"]["path"] for r in rows})
        self.assertEqual(Counter(r["factors"]["typing"] for r in rows), {t: 30 for t in ("population", "replay", "metronome", "insert")})
        # A forced path picks a modality that can use it.
        self.assertEqual({r["factors"]["modality"] for r in self.design("1-60", "--path", "none")}, {"keyboard", "paste"})
        self.assertEqual({r["factors"]["modality"] for r in self.design("1-60", "--path", "none", "--layout", "phone")},
                         {"touch"})
        self.assertEqual({r["factors"]["modality"] for r in self.design("1-60", "--path", "perlin")}, {"mouse", "paste"})
        with self.assertRaises(Exception):
            node(str(BOTS), "--list-design", "1-3", "--path", "ghost-cursor", "--driver", "webdriver")

    def test_key_schedules_time_key_downs_as_drawn(self):
        script = """
        const b = require(process.argv[1]);
        const out = { population: [], metronome: [], shift: [] };
        for (let seed = 1; seed <= 300; seed++) {
          const r = b.rng(seed);
          const person = b.drawTypist(r, "population", {});
          const events = b.keyEvents(r, person.strokes("The new layout is confusing"));
          const downs = events.filter((e) => e.type === "down" && e.key !== "Shift").map((e) => e.t);
          const gaps = downs.slice(1).map((t, i) => t - downs[i]).sort((x, y) => x - y);
          out.population.push(gaps[gaps.length >> 1] / person.details.ikiMeanMs);
          const shiftDown = events.find((e) => e.key === "Shift" && e.type === "down").t;
          const shiftUp = events.find((e) => e.key === "Shift" && e.type === "up").t;
          const tDown = events.find((e) => e.key === "T" && e.type === "down").t;
          const tUp = events.find((e) => e.key === "T" && e.type === "up").t;
          const next = downs.find((t) => t > tDown);
          out.shift.push([tDown - shiftDown, shiftUp - tUp, next - shiftUp]);
          const held = new Set();
          for (const e of events) {
            if (e.type === "down" && held.has(e.key.toLowerCase())) throw new Error("a key went down while held");
            if (e.type === "down") held.add(e.key.toLowerCase()); else held.delete(e.key.toLowerCase());
          }
          const metronome = b.drawTypist(r, "metronome", {});
          const ticks = b.keyEvents(r, metronome.strokes("teal"), { shift: false }).filter((e) => e.type === "down");
          out.metronome.push([ticks[1].t - ticks[0].t, metronome.details.delayMs]);
        }
        console.log(JSON.stringify(out));
        """
        out = json.loads(node("-e", script, str(BOTS)))
        # A lognormal around the person's mean interval: its median is exp(-0.45^2 / 2) of the mean.
        self.assertAlmostEqual(statistics.median(out["population"]), math.exp(-0.45 ** 2 / 2), delta=0.03)
        # Shift goes down before the capital and comes up at most 60 ms after its release, always
        # before the next key goes down (earlier than 10 ms after the release only when the
        # capital is still held then).
        for lead, lag, gap in out["shift"]:
            self.assertTrue(0 < lead <= 120 and lag <= 60 and gap > 0, (lead, lag, gap))
        self.assertGreater(sum(30 <= lead for lead, _, _ in out["shift"]), 250)
        self.assertGreater(sum(10 <= lag for _, lag, _ in out["shift"]), 200)
        for interval, delay in out["metronome"]:
            self.assertTrue(20 <= delay <= 200)
            self.assertAlmostEqual(interval, 2 * delay, delta=1)


class TypingTracesTest(unittest.TestCase):
    """pipeline.typing_traces: real CMU typing of TRAIN subjects for the bots' replay typing."""

    def test_traces_hold_train_subjects_only_with_their_recorded_times(self):
        import pipeline

        names = cmu_subject_names(per_split=3)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "keystrokes.csv"
            write_cmu(path, names, repetitions=12)
            subjects = humans.load_cmu(path)
        traces = pipeline.typing_traces(subjects)
        train = {name for name in names if humans.cmu_split(name) == "train"}
        self.assertEqual(len(train), 3)
        self.assertEqual({trace["person"] for trace in traces}, train)
        text = json.dumps(traces)
        for name in set(names) - train:
            self.assertNotIn(name, text)
        for trace in traces:
            subject = subjects[trace["person"]]
            run = next(run for run in subject.runs if run[0].session == trace["session"])
            keys = trace["keys"]
            self.assertEqual(len(keys), len(humans.CMU_KEYS) * len(run))
            self.assertEqual([key[2] for key in keys[:11]], ["char"] * 4 + ["digit"] + ["char"] * 5 + ["enter"])
            downs = [key[0] for key in keys]
            self.assertEqual(downs, sorted(downs))
            for index, rep in enumerate(run):
                mine = keys[11 * index:11 * index + 11]
                for position in range(11):
                    self.assertAlmostEqual(mine[position][1] - mine[position][0], rep.holds[position], places=2)
                    if position:
                        self.assertAlmostEqual(mine[position][0] - mine[position - 1][0],
                                               rep.downs[position] - rep.downs[position - 1], places=2)
                if index:
                    # From the last Return to the next first key: one of the subject's own flights.
                    step = mine[0][0] - keys[11 * index - 1][0]
                    self.assertTrue(any(abs(step - flight) < 0.01 for flight in subject.flights), step)


if __name__ == "__main__":
    unittest.main()
