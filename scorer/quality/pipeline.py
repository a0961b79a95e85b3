#!/usr/bin/env python3
"""Scoring-quality harness: record, train, evaluate. docs/evaluation.md is its output.

    python3 scorer/quality/pipeline.py all [--work DIR] [--bots N]

`all` runs the three steps; each can also be run alone (`record`, `train`, `evaluate`) on the
same work directory (default `~/.cache/telltale-quality`).

1. record: starts the real `telltale serve` (debug build) on a fresh data dir, provisions a TRAIN
   and a HOLDOUT survey, sends the human sessions of `humans.py` (every recorded session in each
   conversion variant; `--variants embed,rdp` sends fewer) through the collector and runs
   the bot generators of `bots.js` in headless Chromium against the demo survey (TRAIN seeds
   1..N, HOLDOUT seeds 100001..100000+N, so no holdout seed is ever trained on), then scores both
   surveys with the built-in model so their features are in the lake.
2. train: reads the TRAIN survey's features from the lake (Parquet, DuckDB), fits gradient-boosted
   trees with LightGBM beside the hand-set environment terms (`model.fit_gbdt`) and writes
   `scorer/models/telltale-v3.json`.
3. evaluate: restarts the server with that model file, scores the HOLDOUT survey with it (so the
   report's scores are the product's own), reads them from the lake and writes the report with
   its plots. `record` sends the HOLDOUT sessions to their own survey; `train` and `cv` never
   read that survey, and `evaluate` is the only step that reads its features and scores.

`cv` (not part of `all`) is the tool for choosing the model's candidate terms: a 3-fold
cross-validation on the TRAIN survey alone, per class.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import humans  # noqa: E402

DATASETS = Path(os.environ.get("TELLTALE_DATASETS", REPO.parent / "shared" / "datasets"))
# Each generator of bots.js and its family (report.FAMILIES): leave-one-family-out leaves out
# every generator of a family at once, so a second Bezier humanizer cannot stand in for the first.
GENERATORS = {
    "naive": "naive", "stealth": "stealth", "agent": "agent",
    "humanized": "bezier", "ghost-cursor": "bezier",
    "windmouse": "wind", "perlin": "noise", "minjerk": "submovement", "replay": "replay",
}
FAST_GENERATORS = ("naive", "stealth")
HOLDOUT_SEED_BASE = 100_000
MODEL_VERSION = "telltale-v3"
MODEL_PATH = REPO / "scorer" / "models" / f"{MODEL_VERSION}.json"
# The previous model, kept as the report's baseline row.
BASELINE_PATH = REPO / "scorer" / "models" / "telltale-v2.json"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "telltale-target"))
    path = target / "debug" / "telltale"
    log("building telltale (debug)")
    # The same build as the test suite's (`--bin` alone would unify features differently and
    # rebuild DataFusion).
    subprocess.run(["cargo", "build", "--workspace", "--all-targets"], cwd=REPO, check=True,
                   env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    return path


class Server:
    """A real `telltale serve` on the work directory's data dir."""

    def __init__(self, work: Path, model: Path | None = None):
        self.work = work
        args = [str(binary()), "serve", "--bind", "127.0.0.1:0", "--data-dir", str(work / "data"),
                # All traffic comes from this machine: the collector's per-IP and
                # per-identifier limits and the API's per-key limit are off.
                "--collector-ip-rate", "0", "--collector-identifier-rate", "0",
                "--api-rate-per-minute", "1000000", "--flush-interval-ms", "1000",
                "--log-filter", "warn"]
        if model is not None:
            args += ["--model", str(model)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        key_file = work / "integration-key"
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("telltale exited early")
            line = line.strip()
            if line.startswith("TELLTALE_INTEGRATION_KEY="):
                key_file.write_text(line.split("=", 1)[1])
            if line.startswith("telltale listening on "):
                self.base = line.removeprefix("telltale listening on ")
                break
        else:
            raise RuntimeError("telltale did not start in time")
        self.key = key_file.read_text().strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["data"]

    def post_events(self, tracking_key: str, identifier: str, body: bytes) -> None:
        request = urllib.request.Request(
            f"{self.base}/event/{tracking_key}/{identifier}", method="POST", data=body,
            headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(request, timeout=60) as response:
            if response.status != 201:
                raise RuntimeError(f"collector answered {response.status}")

    def score(self, survey_id: str, force: bool) -> str:
        run = self.api("POST", f"/integrations/v1/surveys/{survey_id}/scoring-runs", {"force": force})
        while run["status"] == "running":
            time.sleep(1)
            run = self.api("GET", f"/integrations/v1/surveys/{survey_id}/scoring-runs/{run['id']}")
        if run["status"] != "completed":
            raise RuntimeError(f"scoring run ended {run['status']}: {run.get('error')}")
        log(f"run {run['id']}: {run['scored']} scored, {run['failed']} failed of {run['total']}")
        return run["id"]


def record(work: Path, bots_per_generator: int, fast_bots: int, concurrency: int,
           variants: tuple[str, ...] = humans.VARIANTS) -> None:
    if (work / "data").exists():
        raise SystemExit(f"{work}/data exists: record into a fresh work directory")
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "ci", "--prefix", str(HERE), "--silent", "--no-audit", "--no-fund"], check=True)
    (work / "recorded-with.txt").write_text(
        f"python3 scorer/quality/pipeline.py record --bots {bots_per_generator} "
        f"--fast-bots {fast_bots} --concurrency {concurrency}"
        + ("" if tuple(variants) == humans.VARIANTS else f" --variants {','.join(variants)}"))
    server = Server(work)
    try:
        surveys = {}
        for split in ("train", "holdout"):
            surveys[split] = server.api("PUT", f"/integrations/v1/surveys/quality-{split}",
                                        {"name": f"Scoring quality ({split})"})
        (work / "surveys.json").write_text(json.dumps(surveys, indent=2))
        labels = []

        sessions = humans.all_sessions(DATASETS, work, variants)
        bases = len({session.base for session in sessions})
        log(f"sending {len(sessions)} human sessions ({bases} recorded sessions in the variants "
            f"{', '.join(variants)})")
        start_ms = int(time.time() * 1000) - 6 * 3600 * 1000

        def send(session):
            tracking = surveys[session.split]["trackingKey"]
            for body in humans.batches(session, start_ms):
                server.post_events(tracking, session.reference, body)
            return session.label()

        with ThreadPoolExecutor(4) as pool:
            labels += list(pool.map(send, sessions))

        strokes = work / "replay-strokes.json"
        strokes.write_text(json.dumps(humans.replay_strokes(DATASETS, work)))
        for split in ("train", "holdout"):
            base = 0 if split == "train" else HOLDOUT_SEED_BASE
            for generator in GENERATORS:
                # The scripted generators take seconds a session, the paced ones tens of seconds.
                count = fast_bots if generator in FAST_GENERATORS else bots_per_generator
                log(f"{generator} bots, {split}: seeds {base + 1}-{base + count}")
                output = subprocess.run(
                    ["node", str(HERE / "bots.js"), "--base", server.base,
                     "--key", surveys[split]["trackingKey"], "--generator", generator,
                     "--seeds", f"{base + 1}-{base + count}",
                     "--concurrency", str(concurrency), "--replay-traces", str(strokes)],
                    check=True, capture_output=True, text=True).stdout
                for line in output.splitlines():
                    result = json.loads(line)
                    if not result["ok"]:
                        log(f"  {generator} seed {result['seed']} failed: {result['error']}")
                        continue
                    labels.append({"reference": result["reference"], "class": "bot",
                                   "generator": generator, "family": GENERATORS[generator], "seed": result["seed"],
                                   "device": "headless-chromium", "cluster": f"{generator}/{result['seed']}",
                                   "split": split, "source": "scorer/quality/bots.js"})
        with open(work / "labels.jsonl", "w") as out:
            for label in labels:
                out.write(json.dumps(label) + "\n")
        time.sleep(2)  # past the lookup statistics' 1 s
        runs = {split: server.score(surveys[split]["surveyId"], force=True) for split in surveys}
        (work / "feature-runs.json").write_text(json.dumps(runs, indent=2))
    finally:
        server.stop()


def load_labels(work: Path) -> dict[str, dict]:
    with open(work / "labels.jsonl") as lines:
        return {label["reference"]: label for label in map(json.loads, lines)}


def lake_rows(work: Path, table: str, survey_id: str, run_id: str) -> list[dict]:
    import duckdb

    pattern = work / "data" / "lake" / table / f"survey_id={survey_id}" / "*.parquet"
    connection = duckdb.connect()
    cursor = connection.execute(
        # Timestamps stay out: the report does not need them (and DuckDB would want pytz).
        f"SELECT * EXCLUDE (computed_at) FROM read_parquet('{pattern}', hive_partitioning = false) "
        "WHERE run_id = ?" if table == "features" else
        f"SELECT * EXCLUDE (scored_at) FROM read_parquet('{pattern}', hive_partitioning = false) "
        "WHERE run_id = ?",
        [run_id])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def train(work: Path) -> None:
    import model as fit

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    rows = lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"])
    samples = [(labels[row["reference"]], row) for row in rows if row["reference"] in labels]
    log(f"training on {len(samples)} TRAIN sessions")
    model, _ = fit.fit_gbdt(samples, version=MODEL_VERSION)
    MODEL_PATH.write_text(json.dumps(model, indent=2) + "\n")
    log(f"wrote {MODEL_PATH.relative_to(REPO)}")


def cross_validate(work: Path, folds: int = 3) -> None:
    """TRAIN-only cross-validation, sessions split by a hash of their reference."""
    import hashlib

    import numpy as np

    import model as fit
    import report

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    rows = lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"])
    samples = [(labels[row["reference"]], row) for row in rows if row["reference"] in labels]

    def fold(label):
        return int(hashlib.sha1(label["reference"].encode()).hexdigest(), 16) % folds

    scores: dict[str, list[float]] = {}
    for k in range(folds):
        model, _ = fit.fit_gbdt([s for s in samples if fold(s[0]) != k], version="cv")
        for label, row in samples:
            if fold(label) == k:
                kind = "human" if label["class"] == "human" else report.family_of(label)
                scores.setdefault(kind, []).append(fit.score(model, row))
    humans = np.array(scores["human"])
    print(f"TRAIN {folds}-fold: humans automation-like {np.mean(humans < 30):.3f}, "
          f"human-like {np.mean(humans >= 70):.3f} (n={len(humans)})")
    for family in report.FAMILIES:
        bots = np.array(scores.get(family, []))
        if len(bots):
            print(f"  {family}: AUC {report.auc(bots, humans):.3f}, automation-like "
                  f"{np.mean(bots < 30):.3f}, human-like {np.mean(bots >= 70):.3f} (n={len(bots)})")


def evaluate(work: Path, command: str) -> None:
    import report

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    server = Server(work, model=MODEL_PATH)
    try:
        run = server.score(surveys["holdout"]["surveyId"], force=True)
    finally:
        server.stop()
    scores = lake_rows(work, "scores", surveys["holdout"]["surveyId"], run)
    features = lake_rows(work, "features", surveys["holdout"]["surveyId"], run)
    train_features = lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"])
    report.write(labels, scores, features, train_features,
                 json.loads(MODEL_PATH.read_text()), json.loads(BASELINE_PATH.read_text()),
                 REPO / "docs", command, (work / "recorded-with.txt").read_text().strip(),
                 str(MODEL_PATH.relative_to(REPO)))


def ensure_python_packages() -> None:
    """Installs what the harness imports (numpy, matplotlib, duckdb, lightgbm) when missing."""
    missing = []
    for module in ("numpy", "matplotlib", "duckdb", "lightgbm"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if not missing:
        return
    log(f"installing {', '.join(missing)} with pip")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *missing]
    if subprocess.run(command).returncode != 0:
        # Debian's Python refuses system-wide installs (PEP 668) unless told otherwise.
        subprocess.run(command + ["--break-system-packages"], check=True)


def variant_list(text: str) -> tuple[str, ...]:
    variants = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in variants if v not in humans.VARIANTS]
    if unknown or not variants:
        raise argparse.ArgumentTypeError(
            f"unknown variant(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(humans.VARIANTS)}")
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["all", "record", "train", "evaluate", "cv"])
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "telltale-quality")
    parser.add_argument("--bots", type=int, default=40,
                        help="sessions per split of each paced generator (every one but naive and stealth)")
    parser.add_argument("--fast-bots", type=int, default=100,
                        help="sessions per split of each scripted generator (naive, stealth)")
    parser.add_argument("--concurrency", type=int, default=4, help="browser sessions at once")
    parser.add_argument("--variants", type=variant_list, default=humans.VARIANTS,
                        help="conversion variants of every human session, comma-separated "
                             f"(default: all of {','.join(humans.VARIANTS)})")
    args = parser.parse_args()
    ensure_python_packages()
    command = "python3 scorer/quality/pipeline.py " + " ".join(sys.argv[1:])
    if args.step in ("all", "record"):
        record(args.work, args.bots, args.fast_bots, args.concurrency, args.variants)
    if args.step in ("all", "train"):
        train(args.work)
    if args.step == "cv":
        cross_validate(args.work)
    if args.step in ("all", "evaluate"):
        evaluate(args.work, command)


if __name__ == "__main__":
    main()
