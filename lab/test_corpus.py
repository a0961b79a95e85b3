"""Unit tests of the corpus program (lab/corpus.py): the checks a chunk must pass, and the pieces
they rest on. Loading a real chunk through the binary is `.ci/run`'s `corpus.py load` step."""

from __future__ import annotations

import gzip
import json
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import corpus


def label(pid: str, reference: str, attempt: int = 1, kept: bool = True, klass: str = "bot") -> dict:
    return {"id": pid, "reference": reference, "attempt": attempt, "kept": kept, "class": klass, "split": "train",
            "kind": "factorial" if klass == "bot" else "person", "input": "xtest", "person": "p/1",
            "cluster": "p/1"}


def body(reference: str, with_session: bool = True) -> str:
    events = [{"type": "pointermove", "timestamp": 1, "data": {"x": 1, "y": 2}}]
    if with_session:
        events.insert(0, {"type": "session", "timestamp": 1,
                          "data": {"sessionId": reference, "interviewId": reference, "embedVersion": "1.4.0"}})
    return json.dumps({"events": events})


class FakeCorpus:
    """A corpus folder of one chunk, written as the recorder writes it."""

    def __init__(self, labels: list[dict], rows: dict[str, dict], requests: list[dict], plan: list[dict]):
        self.dir = tempfile.TemporaryDirectory()
        root = Path(self.dir.name)
        self.patches = [mock.patch.object(corpus, "CHUNKS", root / "chunks"),
                        mock.patch.object(corpus, "PLAN", root / "plan.jsonl"),
                        mock.patch.object(corpus, "MANIFEST", root / "manifest.json")]
        for patch in self.patches:
            patch.start()
        corpus.PLAN.write_text("".join(json.dumps(e) + "\n" for e in plan))
        chunk = corpus.CHUNKS / "001-train"
        chunk.mkdir(parents=True)
        (chunk / "labels.jsonl").write_text("".join(json.dumps(l) + "\n" for l in labels))
        corpus.write_gzip_jsonl(chunk / "features.jsonl.gz", [{"reference": r, "features": f} for r, f in rows.items()])
        corpus.write_gzip_jsonl(chunk / "requests.jsonl.gz", requests)
        files = {p.name: {"sha256": corpus.sha256(p), "bytes": p.stat().st_size} for p in chunk.iterdir()}
        self.manifest = {"format": 1, "plan": {"file": "plan.jsonl", "sha256": corpus.sha256(corpus.PLAN),
                                               "sessions": len(plan)},
                         "chunks": [{"id": "001-train", "split": "train", "files": files,
                                     "sessions": {"human": 0, "bot": 0, "dropped": 0}}]}
        corpus.save_manifest(self.manifest)

    def close(self) -> None:
        for patch in self.patches:
            patch.stop()
        self.dir.cleanup()


PLAN = [{"id": "factorial/1", "split": "train"}, {"id": "factorial/2", "split": "train"},
        {"id": "replay/p/1/demo/0", "split": "train"}]


class VerifyTest(unittest.TestCase):
    def check(self, labels, rows, requests):
        fake = FakeCorpus(labels, rows, requests, PLAN)
        try:
            return corpus.verify(corpus.load_manifest())
        finally:
            fake.close()

    def test_a_sound_chunk_passes(self):
        labels = [label("factorial/1", "r1"), label("factorial/2", "r2", kept=False),
                  label("factorial/2", "r3", attempt=2), label("replay/p/1/demo/0", "r4", klass="human")]
        rows = {"r1": {"late_event_fraction": 0.0}, "r3": {"late_event_fraction": 0.0},
                "r4": {"late_event_fraction": 0.0}}
        requests = [{"receivedAt": 1, "identifier": "r1", "body": body("r1")},
                    {"receivedAt": 2, "identifier": "r3", "body": body("r3")},
                    {"receivedAt": 3, "identifier": "r3", "body": body("r3", with_session=False)}]
        self.assertEqual(self.check(labels, rows, requests), [])

    def test_a_reference_in_two_attempts_fails(self):
        labels = [label("factorial/1", "r1", kept=False), label("factorial/1", "r1", attempt=2)]
        rows = {"r1": {"late_event_fraction": 0.0}}
        requests = [{"receivedAt": 1, "identifier": "r1", "body": body("r1")}]
        problems = self.check(labels, rows, requests)
        self.assertTrue(any("two attempts" in p for p in problems), problems)

    def test_two_browser_sessions_under_one_reference_fail(self):
        labels = [label("factorial/1", "r1")]
        rows = {"r1": {"late_event_fraction": 0.0}}
        requests = [{"receivedAt": 1, "identifier": "a", "body": body("r1")},
                    {"receivedAt": 2, "identifier": "b", "body": body("r1")}]
        problems = self.check(labels, rows, requests)
        self.assertTrue(any("exactly one browser session" in p for p in problems), problems)

    def test_a_late_event_fails(self):
        labels = [label("factorial/1", "r1")]
        rows = {"r1": {"late_event_fraction": 0.25}}
        requests = [{"receivedAt": 1, "identifier": "r1", "body": body("r1")}]
        problems = self.check(labels, rows, requests)
        self.assertTrue(any("late_event_fraction" in p for p in problems), problems)

    def test_a_persons_requests_in_the_chunk_fail(self):
        labels = [label("replay/p/1/demo/0", "r4", klass="human")]
        rows = {"r4": {"late_event_fraction": 0.0}}
        requests = [{"receivedAt": 1, "identifier": "r4", "body": body("r4")}]
        problems = self.check(labels, rows, requests)
        self.assertTrue(any("a person's session" in p for p in problems), problems)

    def test_a_changed_file_fails(self):
        fake = FakeCorpus([label("factorial/1", "r1")], {"r1": {"late_event_fraction": 0.0}},
                          [{"receivedAt": 1, "identifier": "r1", "body": body("r1")}], PLAN)
        try:
            with open(corpus.CHUNKS / "001-train" / "labels.jsonl", "a") as out:
                out.write("\n")
            problems = corpus.verify(corpus.load_manifest())
        finally:
            fake.close()
        self.assertTrue(any("checksum" in p for p in problems), problems)


class PiecesTest(unittest.TestCase):
    def test_gzip_is_deterministic(self):
        with tempfile.TemporaryDirectory() as folder:
            a, b = Path(folder) / "a.gz", Path(folder) / "b.gz"
            corpus.write_gzip_jsonl(a, [{"x": 1}, {"y": [1, 2]}])
            corpus.write_gzip_jsonl(b, [{"x": 1}, {"y": [1, 2]}])
            self.assertEqual(a.read_bytes(), b.read_bytes())
            self.assertEqual(corpus.read_jsonl(a), [{"x": 1}, {"y": [1, 2]}])
            self.assertEqual(gzip.decompress(a.read_bytes()).decode(), '{"x": 1}\n{"y": [1, 2]}\n')

    def test_values_compare_with_a_relative_tolerance_and_unmeasured_alike(self):
        self.assertTrue(corpus.same_value(None, None))
        self.assertFalse(corpus.same_value(None, 0.0))
        self.assertTrue(corpus.same_value(1.0, 1.0 + 1e-12))
        self.assertFalse(corpus.same_value(1.0, 1.0001))

    def test_folds_group_a_typists_automation_with_the_typist(self):
        bot = {"class": "bot", "id": "factorial/7", "details": {"typist": {"person": "aalto-136m/12"}}}
        person_with_that_typist_fold = corpus.fold_of_name("aalto-136m/12") % corpus.FOLDS
        self.assertEqual(corpus.fold_of(bot), person_with_that_typist_fold)
        person = {"class": "human", "person": "sapimouse/user3"}
        self.assertEqual(corpus.fold_of(person), corpus.fold_of_name("sapimouse/user3") % corpus.FOLDS)

    def test_a_plan_with_too_little_xtest_automation_is_refused(self):
        plan = [{"id": f"{s}/b{i}", "number": i, "split": s, "class": "bot",
                 "input": "xtest" if i < 3 else "devtools"} for s in corpus.SPLITS for i in range(10)]
        with self.assertRaises(SystemExit):
            corpus.check_plan(plan)
        plan = [dict(e, input="xtest" if e["number"] < 4 else "devtools") for e in plan]
        corpus.check_plan(plan)

    def test_the_input_path_of_each_kind(self):
        self.assertEqual(corpus.input_path({"kind": "person"}), "xtest")
        self.assertEqual(corpus.input_path({"kind": "touch-person"}), "devtools")
        self.assertEqual(corpus.input_path({"kind": "factorial", "factors": {"driver": "xtest"}}), "xtest")
        self.assertEqual(corpus.input_path({"kind": "factorial", "factors": {"driver": "webdriver"}}), "devtools")
        self.assertEqual(corpus.input_path({"kind": "redteam", "tool": "xdotool-agent"}), "xtest")

    def test_auc(self):
        self.assertEqual(corpus.auc([3, 4], [1, 2]), 1.0)
        self.assertEqual(corpus.auc([1, 2], [3, 4]), 0.0)
        self.assertEqual(corpus.auc([1, 1], [1, 1]), 0.5)


if __name__ == "__main__":
    unittest.main()


class ReportTest(unittest.TestCase):
    """The HOLDOUT report's arithmetic (lab/corpus_report.py), on made-up scores."""

    def test_wilson_interval_of_none_in_a_hundred(self):
        import corpus_report

        low, high = corpus_report.wilson(0, 100)
        self.assertEqual(low, 0.0)
        self.assertAlmostEqual(high, 0.037, places=3)
        low, high = corpus_report.wilson(50, 100)
        self.assertLess(low, 0.5)
        self.assertGreater(high, 0.5)

    def test_report_counts_people_and_families_per_model(self):
        import corpus_report

        samples, scores = [], {"a": {}, "b": {}}
        for i in range(10):
            person = {**label(f"p{i}", f"h{i}", klass="human"), "person": f"set/{i}", "layout": "demo",
                      "device": "mouse", "typing": "cmu-keystroke"}
            bot = {**label(f"b{i}", f"r{i}"), "family": "bezier"}
            samples += [(person, {"key_flight_mean_ms": 100.0 + 20 * i}), (bot, {})]
            scores["a"][f"h{i}"] = {"humanScorePercent": 90.0 if i else 10.0, "reasons": ["why"]}
            scores["a"][f"r{i}"] = {"humanScorePercent": 20.0, "clustered": i < 5}
            scores["b"][f"h{i}"] = {"humanScorePercent": 50.0}
            scores["b"][f"r{i}"] = {"humanScorePercent": 80.0}
        result = corpus_report.report(samples, scores, [120.0, 200.0], corpus.auc)
        a, b = result["models"]["a"], result["models"]["b"]
        self.assertEqual(a["people"]["automation_like"]["k"], 1)
        self.assertEqual(a["people"]["human_like"]["k"], 9)
        self.assertEqual(a["people_automation_like"][0]["reasons"], ["why"])
        self.assertEqual(a["families"]["bezier"]["xtest"]["not_human_like"]["k"], 10)
        self.assertEqual(a["families"]["bezier"]["xtest"]["clustered"], 5)
        self.assertEqual(a["families"]["bezier"]["xtest"]["auc"], 0.9)
        self.assertEqual(b["families"]["bezier"]["xtest"]["auc"], 0.0)
        speeds = a["people_groups"]["typist speed"]
        self.assertEqual(sum(v["human_like"]["n"] for v in speeds.values()), 10)
        self.assertEqual(set(speeds), {"fast typist", "middle typist", "slow typist"})


class FarmTest(unittest.TestCase):
    def test_a_farm_counts_named_sessions_and_moved_people(self):
        people = [({**label(f"p{i}", f"h{i}", klass="human"), "person": f"set/{i}"}, {}) for i in range(100)]
        farm = [({**label(f"b{i}", f"r{i}"), "family": "bezier"}, {}) for i in range(25)]

        def scores(samples, model=None):
            with_farm = any(l["class"] == "bot" for l, _ in samples)
            out = {}
            for l, _ in samples:
                if l["class"] == "bot":  # all but one of the farm clustered
                    out[l["reference"]] = {"humanScorePercent": 40.0, "scoreBand": "review",
                                           "clustered": l["reference"] != "r0"}
                elif with_farm and l["reference"] == "h7":  # one person moved by the farm
                    out[l["reference"]] = {"humanScorePercent": 60.0, "scoreBand": "review"}
                else:
                    out[l["reference"]] = {"humanScorePercent": 80.0, "scoreBand": "human-like"}
            return out

        with mock.patch.object(corpus, "score_rows", scores):
            result = corpus.farms(people + farm)["bezier"]
            self.assertEqual((result["farm"], result["named"]), (20, 19))
            self.assertEqual((result["people_moved"]["k"], result["people_moved"]["n"]), (1, 100))
            self.assertEqual(result["moved"], ["set/7"])
            self.assertEqual(result["not_human_like"]["k"], 20)
            with self.assertRaises(SystemExit):
                corpus.farms(people[:99] + farm)
