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


class GradientBoostingTest(unittest.TestCase):
    """The trees fitted by LightGBM, converted to the model file and summed like Rust."""

    @staticmethod
    def samples(n=600, seed=11):
        rng = random.Random(seed)
        samples = []
        for i in range(n):
            human = i % 2 == 0
            row = {name: None for name, _, _ in model.TREE_FEATURES}
            row["movement_peak_speed_ratio"] = rng.gauss(2.6, 0.4) if human else rng.gauss(2.0, 0.3)
            row["movement_submovements"] = rng.uniform(1, 3) if human else rng.uniform(1, 1.5)
            row["untrusted_fraction"] = 0.0 if human or rng.random() < 0.5 else rng.uniform(0.1, 1)
            row["press_dwell_mean_ms"] = rng.uniform(80, 2000) if human else rng.uniform(0, 120)
            # Never missing in training: LightGBM then compares an unmeasured value as zero.
            row["moving_fraction"] = rng.uniform(0, 1)
            # Measured for some sessions only (no typing).
            row["key_flight_log_sd"] = (rng.uniform(0.3, 0.8) if human else rng.uniform(0.1, 0.5)) if rng.random() < 0.6 else None
            label = {"reference": f"r{i}", "class": "human" if human else "bot",
                     "generator": "human" if human else ("naive", "windmouse")[i % 4 == 1],
                     "family": "human" if human else ("naive", "wind")[i % 4 == 1]}
            samples.append((label, row))
        return samples

    def test_converted_trees_sum_to_lightgbms_raw_score_and_handle_unmeasured_values(self):
        samples = self.samples()
        fitted, booster = model.fit_gbdt(samples, version="test", rounds=40, tune=False)
        probe = [row for _, row in samples[:200]]
        probe += [{**row, "moving_fraction": None, "movement_submovements": None} for row in probe[:50]]
        raw = booster.predict(model.tree_matrix(probe), raw_score=True)
        mine = [model.log_odds(fitted, row) for row in probe]
        for expected, actual in zip(raw, mine):
            self.assertAlmostEqual(expected, actual, places=9)
        for tree in fitted["trees"]:
            nodes = tree["nodes"]
            for index, node in enumerate(nodes):
                if "leaf" not in node:
                    self.assertGreater(node["left"], index)
                    self.assertGreater(node["right"], index)
                    self.assertIn(node["missing"], ("left", "right"))
        json.loads(json.dumps(fitted))  # plain JSON: what the Rust side reads

    def test_tells_only_ever_lower_the_score_and_long_presses_never_raise_it_past_the_clip(self):
        samples = self.samples()
        fitted, _ = model.fit_gbdt(samples, version="test", rounds=60, tune=False)
        row = dict(samples[0][1])
        untrusted = [model.log_odds(fitted, {**row, "untrusted_fraction": v}) for v in (0, 0.2, 0.5, 1)]
        self.assertEqual(untrusted, sorted(untrusted, reverse=True))
        dwell = [model.log_odds(fitted, {**row, "press_dwell_mean_ms": v}) for v in (60, 300, 3000)]
        self.assertEqual(len(set(dwell)), 1, "beyond 60 ms a press says nothing more")

    def test_masking_the_environment_leaves_only_behaviour(self):
        fitted, _ = model.fit_gbdt(self.samples(n=200), version="test", rounds=5, tune=False)
        self.assertTrue(any(t["feature"] == "webdriver" for t in fitted["terms"]))
        masked = model.mask_environment(fitted)
        self.assertEqual(masked["terms"], [])
        self.assertEqual(model.log_odds(masked, {"webdriver": 1.0, "automation_globals": 1.0}),
                         model.log_odds(fitted, {}))


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
