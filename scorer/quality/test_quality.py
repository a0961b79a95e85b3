"""Unit tests of the scoring-quality harness (run by .ci/run):
python3 -m unittest discover -s scorer/quality"""

import json
import math
import random
import statistics
import tempfile
import unittest
from pathlib import Path

import humans
import model
import report

REPO = Path(__file__).resolve().parent.parent.parent


class SplitTest(unittest.TestCase):
    def test_the_split_follows_the_first_hex_digit_of_the_path_sha1(self):
        # sha1("a") = 86f7e437...: TRAIN; sha1("d") = 3c363836...: HOLDOUT.
        self.assertFalse(humans.is_holdout("a"))
        self.assertTrue(humans.is_holdout("d"))

    def test_balabit_users_29_and_35_are_holdout_only(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "test_files"
            for user in ("user7", "user29", "user35"):
                (root / user).mkdir(parents=True)
                for index in range(12):
                    (root / user / f"session_{index:04d}").write_text(
                        "record timestamp,client timestamp,button,state,x,y\n"
                        + "".join(f"{i * 0.02},{i * 0.02},NoButton,Move,{100 + i},{200 + i}\n" for i in range(30)))
            sessions = humans.balabit_sessions(Path("/nonexistent"), Path(tmp))
        splits = {(s.cluster, s.split) for s in sessions}
        self.assertNotIn(("balabit/user29", "train"), splits)
        self.assertNotIn(("balabit/user35", "train"), splits)
        self.assertIn(("balabit/user7", "train"), splits)
        self.assertTrue(all(s.events[0]["type"] == "session" for s in sessions))


class ConversionTest(unittest.TestCase):
    def test_pointer_moves_are_thinned_to_one_per_16_ms_like_the_embed(self):
        timeline = humans.Timeline(random.Random(1))
        for t in range(0, 200, 4):
            timeline.pointer_move(float(t), t, t, "mouse")
        times = [e["t"] for e in timeline.events]
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


class ModelTest(unittest.TestCase):
    def test_the_replica_scores_the_built_in_models_terms_like_the_rust_formula(self):
        v1 = json.loads((REPO / "scorer/models/telltale-v1.json").read_text())
        # Model::score on Features::unmeasured() is 50 (scorer/src/model.rs tests).
        self.assertEqual(model.score(v1, {}), 50.0)
        self.assertEqual(model.score(v1, {"webdriver": 1.0}), round(100 / (1 + math.exp(8)) * 100) / 100)
        self.assertEqual(model.band(29.99), "automation-like")
        self.assertEqual(model.band(30.0), "review")
        self.assertEqual(model.band(70.0), "human-like")

    def test_fitting_learns_the_sign_of_a_separating_feature(self):
        rng = random.Random(5)
        samples = []
        for i in range(200):
            human = i % 2 == 0
            row = {"webdriver": 0.0 if human else 1.0, "key_flight_cv": rng.uniform(0.4, 1.2) if human else rng.uniform(0.0, 0.1)}
            label = {"class": "human" if human else "bot", "generator": "human" if human else "naive"}
            samples.append((label, row))
        fitted = model.fit_model(samples, version="test")
        weights = {(t["feature"], t["transform"]["kind"]): t["weight"] for t in fitted["terms"]}
        self.assertEqual(weights[("webdriver", "indicator")], -8.0, "a fixed environment tell")
        self.assertLess(weights[("key_flight_cv", "below")], 0)
        self.assertGreater(weights[("key_flight_cv", "within")], 0)
        bots = [model.score(fitted, row) for label, row in samples if label["class"] == "bot"]
        people = [model.score(fitted, row) for label, row in samples if label["class"] == "human"]
        self.assertGreater(min(people), max(bots))


    def test_scorecard_bins_are_half_open_like_the_rust_bin_transform(self):
        bins = [{"kind": "bin", "high": 0.5}, {"kind": "bin", "low": 0.5, "high": 1.25},
                {"kind": "bin", "low": 1.25}]
        for value in (-1e300, 0.0, 0.4999, 0.5, 1.0, 1.25, 7.0):
            self.assertEqual(sum(model.transform(spec, value) for spec in bins), 1.0, value)

    def test_scores_round_halves_up_like_rust(self):
        # A z whose percent is exactly x.xx5 after scaling is rare; the rule itself is checked.
        self.assertEqual(math.floor(12.345 * 100 + 0.5) / 100, 12.35)


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


if __name__ == "__main__":
    unittest.main()
