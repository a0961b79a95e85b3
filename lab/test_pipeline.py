"""The pipeline's bookkeeping (run by .ci/run): folds by person and the HOLDOUT read log."""

import json
import os
import tempfile
import unittest
from pathlib import Path

import pipeline


class FoldTest(unittest.TestCase):
    def test_every_session_of_a_person_is_in_one_fold(self):
        labels = [{"class": "human", "person": f"sapimouse/user{p}", "cluster": f"sapimouse/user{p}",
                   "reference": f"{p}-{s}-{v}"} for p in range(30) for s in range(3) for v in range(4)]
        folds = {}
        for label in labels:
            folds.setdefault(label["cluster"], set()).add(pipeline.fold_of(label, 5))
        self.assertTrue(all(len(f) == 1 for f in folds.values()))
        self.assertEqual(len({f for fs in folds.values() for f in fs}), 5, "people spread over the folds")

    def test_a_bot_replaying_a_typist_is_in_the_typists_fold(self):
        from replay.sources import fold_of

        for subject in ("s002", "s011", "s036"):
            bot = {"class": "bot", "cluster": "factorial/7", "details": {"typist": {"person": subject}}}
            self.assertEqual(pipeline.fold_of(bot), fold_of(f"cmu-keystroke/{subject}"))
        other = {"class": "bot", "cluster": "factorial/7", "details": {"typist": {"ikiMeanMs": 200}}}
        self.assertEqual(pipeline.fold_of(other), fold_of("factorial/7"))


class HoldoutLogTest(unittest.TestCase):
    def test_each_read_is_logged_and_a_second_read_of_one_model_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "recorded-with.txt").write_text("python3 lab/pipeline.py record --bots 2")
            model = tmp / "model.json"
            model.write_text(json.dumps({"version": "t"}))
            saved = pipeline.HOLDOUT_LOG, pipeline.MODEL_PATH
            pipeline.HOLDOUT_LOG, pipeline.MODEL_PATH = tmp / "reads.md", model
            labels = {"a": {"split": "holdout", "class": "human", "cluster": "p1"},
                      "b": {"split": "holdout", "class": "bot", "cluster": "x"},
                      "c": {"split": "train", "class": "human", "cluster": "p2"}}
            try:
                pipeline.log_holdout_read(tmp, labels)
                text = (tmp / "reads.md").read_text()
                self.assertIn("1 human sessions of 1 people or devices, 1 bot sessions", text)
                with self.assertRaises(SystemExit):
                    pipeline.log_holdout_read(tmp, labels)
                os.environ["TELLTALE_HOLDOUT_REREAD"] = "a test of the log"
                pipeline.log_holdout_read(tmp, labels)
                rows = [line for line in (tmp / "reads.md").read_text().splitlines() if line.startswith("| 20")]
                self.assertEqual(len(rows), 2)
                self.assertTrue(rows[1].endswith("| a test of the log |"))
                model.write_text(json.dumps({"version": "t2"}))
                del os.environ["TELLTALE_HOLDOUT_REREAD"]
                pipeline.log_holdout_read(tmp, labels)  # a new model file is a new release
            finally:
                pipeline.HOLDOUT_LOG, pipeline.MODEL_PATH = saved
                os.environ.pop("TELLTALE_HOLDOUT_REREAD", None)


if __name__ == "__main__":
    unittest.main()
