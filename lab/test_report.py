"""The evaluation report written end to end from made-up sessions (run by .ci/run): every table
renders, the figures are counted by person, and a server score the replica disagrees with
stops it."""

import json
import random
import tempfile
import unittest
from pathlib import Path

import model
import report

REPO = Path(__file__).resolve().parent.parent


def sessions(split: str, seed: int):
    rng = random.Random(seed)
    labels, rows = [], []
    for person in range(12):
        for session, layout in enumerate(("demo", "grid", "text", "text")):
            touch = person % 4 == 3
            layout = "phone" if touch else layout
            typing = "hmog-soft" if touch else ("cmu-keystroke", "aalto-136m")[(person + session) % 2]
            reference = f"{split}-h{person}-{session}"
            base = f"{split}-h{person}-2" if session == 3 and not touch else reference
            labels.append({"reference": reference, "class": "human", "generator": "human",
                           "device": "phone-touch" if touch else "browser-mouse", "cluster": f"p{person}",
                           "person": f"p{person}", "split": split, "source": "sapimouse:x", "layout": layout,
                           "mode": "touch" if touch else ("keyboard" if person == 4 and session == 0 else "mouse"),
                           "variant": "replay" if base == reference else "swap", "base": base, "typing": typing})
            rows.append({"reference": reference, "movements": rng.choice([2.0, 9.0]), "free_keystrokes": 20.0,
                         "touch_taps": 8.0 if touch else 0.0, "late_event_fraction": 0.0,
                         "movement_peak_time": rng.gauss(0.45, 0.08), "movement_deviation": rng.gauss(0.1, 0.03),
                         "tap_dwell_mean_ms": rng.gauss(90, 20), "key_flight_cv": rng.uniform(0.3, 0.9),
                         "key_flight_log_sd": rng.uniform(0.3, 0.7), "key_flight_mean_ms": rng.uniform(120, 400)})
    for number in range(80):
        factors = {"path": ("bezier", "windmouse", "none")[number % 3], "typing": ("population", "replay")[number % 2],
                   "pacing": "human", "modality": "keyboard" if number % 3 == 2 else "mouse", "driver": "cdp"}
        reference = f"{split}-b{number}"
        labels.append({"reference": reference, "class": "bot", "generator": "factorial", "layout": "demo",
                       "family": factors["path"] if factors["modality"] == "mouse" else factors["modality"],
                       "factors": factors, "seed": number, "device": "xvfb-chromium",
                       "cluster": f"factorial/{number}", "split": split, "source": "bots.js"})
        rows.append({"reference": reference, "movements": 0.0 if factors["modality"] == "keyboard" else 9.0,
                     "free_keystrokes": 20.0, "movement_peak_time": rng.gauss(0.3, 0.05), "late_event_fraction": 0.0,
                     "movement_deviation": rng.gauss(0.02, 0.01), "key_flight_cv": rng.uniform(0.2, 0.6),
                     "key_flight_log_sd": rng.uniform(0.2, 0.5), "webdriver_patched": 1.0})
    return labels, rows


class ReportTest(unittest.TestCase):
    def test_the_page_is_written_from_scores_the_replica_agrees_with(self):
        train_labels, train_rows = sessions("train", 1)
        holdout_labels, holdout_rows = sessions("holdout", 2)
        fitted, _ = model.fit_gbdt(list(zip(train_labels, train_rows)), version="test", rounds=20)
        labels = {label["reference"]: label for label in train_labels + holdout_labels}
        scores = [{"reference": row["reference"], "human_score_percent": model.score(fitted, row),
                   "reasons": model.reasons(fitted, row)} for row in holdout_rows]
        baseline = json.loads((REPO / "scorer/models/telltale-v4.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            docs = Path(tmp)
            report.BOOTSTRAP = 20
            conversions = [({"reference": f"c{p}", "class": "conversion", "person": f"p{p}"},
                            {"reference": f"c{p}", "movements": 40.0, "key_hold_cv": 0.25}) for p in range(12)]
            report.write(labels, scores, holdout_rows, train_rows, fitted, baseline, docs, "test", "test",
                         "model.json", "read 1", conversions=conversions, refused=[])
            page = (docs / "evaluation.md").read_text()
            self.assertIn("## Every factor level left out of training", page)
            self.assertIn("| path | bezier |", page)
            self.assertIn("typing swaps", page)
            self.assertIn("## Features per layout", page)
            self.assertIn("## What the replay path changed", page)
            self.assertIn("| humans, keyboard only", page)
            self.assertTrue((docs / "evaluation" / "roc.png").exists())
            # By person: twelve people, whatever their number of sessions.
            self.assertIn("| everyone | 12 |", page)
            scores[0]["human_score_percent"] += 5
            with self.assertRaises(SystemExit):
                report.write(labels, scores, holdout_rows, train_rows, fitted, baseline, docs, "test", "test",
                             "model.json", "read 1")


if __name__ == "__main__":
    unittest.main()
