#!/usr/bin/env python3
"""Scoring-quality harness: record, train, evaluate. docs/evaluation.md is its output.

    python3 scorer/quality/pipeline.py all [--work DIR] [--bots N]

`all` runs the three steps; each can also be run alone (`record`, `train`, `cv`, `evaluate`) on
the same work directory (default `~/.cache/telltale-quality`).

1. record: starts the real `telltale serve` (debug build) on a fresh data dir and provisions a
   TRAIN and a HOLDOUT survey. The human sessions of `humans.py` (HOLDOUT: every recorded session
   of the HOLDOUT people in every conversion variant and typing swap; TRAIN: the `embed` variant
   and two more per session) go to the collector as the embed sends, batch by batch in real time
   (`pace.py`), while the bot generators of `bots.js` run in headless Chromium against the demo
   survey: `naive` and `stealth`, `--bots` sessions of the `factorial` generator and
   `--mouse-bots` more with the mouse (TRAIN seeds from 1, HOLDOUT seeds from 100001, so no
   holdout seed is ever trained on). The HOLDOUT survey also gets direct injections of TRAIN
   people's recordings (`inject.py`) and the red team's automation (`redteam/`), which no model
   trains on. Then both surveys are scored with the built-in model so their features are in the
   lake.
2. train: reads the TRAIN survey's features from the lake, fits the model (`model.fit_gbdt`) and
   writes `scorer/models/telltale-v4.json`.
3. evaluate: logs the HOLDOUT read in docs/evaluation/holdout-reads.md, restarts the server with
   that model file, scores the HOLDOUT survey with it (so the report's scores are the product's
   own), reads them from the lake and writes the report with its plots. `train` and `cv` never
   read the HOLDOUT survey; `evaluate` is the only step that does, once per model release.

`cv` (not part of `all`) is the tool for choosing on TRAIN: a cross-validation grouped by person
(every session and variant of one person, every session of one bot seed, in one fold).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import humans  # noqa: E402
import inject  # noqa: E402
import pace  # noqa: E402

DATASETS = Path(os.environ.get("TELLTALE_DATASETS", REPO.parent / "shared" / "datasets"))
# The generators of bots.js. naive and stealth are their own families; a factorial session's
# family comes from its factor levels (family_of_bot), which its label also keeps.
GENERATORS = ("naive", "stealth", "factorial")
FAST_GENERATORS = ("naive", "stealth")
HOLDOUT_SEED_BASE = 100_000
MODEL_VERSION = "telltale-v4"
MODEL_PATH = REPO / "scorer" / "models" / f"{MODEL_VERSION}.json"
# The previous model, kept as the report's baseline row.
BASELINE_PATH = REPO / "scorer" / "models" / "telltale-v3.json"
# Every read of HOLDOUT, appended by `evaluate`.
HOLDOUT_LOG = REPO / "docs" / "evaluation" / "holdout-reads.md"
REDTEAM = HERE / "redteam"
REDTEAM_TOOLS = ("pptr-stealth", "pw-keyboard", "pw-touch", "llm-agent", "selenium-humancursor",
                 "pw-stealth-oxymouse", "xvfb-pyclick")


def family_of_bot(generator: str, factors: dict) -> str:
    """The report's family of a bot session: the generator for naive and stealth; for a factorial
    session its path level when it used the mouse, else its modality (keyboard, touch, paste)."""
    if generator != "factorial":
        return generator
    return factors["path"] if factors["modality"] == "mouse" else factors["modality"]


def typing_traces(subjects: dict[str, "humans.CmuSubject"]) -> list[dict]:
    """Real typing for bots.js's `replay` typing level, from the CMU subjects of the TRAIN split
    only (`humans.cmu_split`): one trace per recording session of a subject, its repetitions of
    `.tie5Roanl` + Return in order as [keydown ms, keyup ms, key class] (the recorded
    keydown-to-keydown times and holds; classes from CMU_KEY_CLASSES). The data set does not time
    the step from one repetition's Return to the next repetition's first key: as in
    `Timeline.cmu_typing`, it is one of the subject's own recorded keydown-to-keydown times."""
    traces = []
    for name in sorted(subjects):
        if humans.cmu_split(name) != "train":
            continue
        subject = subjects[name]
        rng = random.Random(f"typing-traces/{name}")
        for run in subject.runs:
            keys, start = [], 0.0
            for rep in run:
                for key, down, hold in zip(humans.CMU_KEYS, rep.downs, rep.holds):
                    keys.append([round(start + down, 3), round(start + down + hold, 3),
                                 humans.CMU_KEY_CLASSES.get(key, "char")])
                start += rep.downs[-1] + rng.choice(subject.flights)
            traces.append({"person": name, "session": run[0].session, "keys": keys})
    return traces


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def binary() -> Path:
    # A binary already built (TELLTALE_BIN, as the clients' tests take it) is used as it is, so
    # that a recording can start while the same build is busy with the test suite.
    if os.environ.get("TELLTALE_BIN"):
        return Path(os.environ["TELLTALE_BIN"])
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

    def score(self, survey_id: str, force: bool) -> str:
        run = self.api("POST", f"/integrations/v1/surveys/{survey_id}/scoring-runs", {"force": force})
        while run["status"] == "running":
            time.sleep(1)
            run = self.api("GET", f"/integrations/v1/surveys/{survey_id}/scoring-runs/{run['id']}")
        if run["status"] != "completed":
            raise RuntimeError(f"scoring run ended {run['status']}: {run.get('error')}")
        log(f"run {run['id']}: {run['scored']} scored, {run['failed']} failed of {run['total']}")
        return run["id"]


def record(work: Path, bots: int, mouse_bots: int, fast_bots: int, concurrency: int,
           redteam_bots: int, injections: int, active: int, variants: tuple[str, ...] = humans.VARIANTS,
           sample: int = 0) -> None:
    if (work / "data").exists():
        raise SystemExit(f"{work}/data exists: record into a fresh work directory")
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "ci", "--prefix", str(HERE), "--silent", "--no-audit", "--no-fund"], check=True)
    (work / "recorded-with.txt").write_text(
        f"python3 scorer/quality/pipeline.py record --bots {bots} --mouse-bots {mouse_bots} "
        f"--fast-bots {fast_bots} --redteam-bots {redteam_bots} --injections {injections} "
        f"--concurrency {concurrency}"
        + ("" if tuple(variants) == humans.VARIANTS else f" --variants {','.join(variants)}")
        + (f" --humans {sample}" if sample else ""))
    server = Server(work)
    try:
        surveys = {}
        for split in ("train", "holdout"):
            surveys[split] = server.api("PUT", f"/integrations/v1/surveys/quality-{split}",
                                        {"name": f"Scoring quality ({split})"})
        (work / "surveys.json").write_text(json.dumps(surveys, indent=2))
        tracking = {split: survey["trackingKey"] for split, survey in surveys.items()}

        typists = humans.load_typists(DATASETS)
        bases = humans.all_bases(DATASETS, work, typists)
        sessions = [humans.variant_session(base, v) for base in bases for v in humans.variants_of(base, variants)]
        if sample:
            # A seeded sample of the human sessions: a smoke test of the whole record step.
            sessions = random.Random("sample").sample(sessions, min(sample, len(sessions)))
        labels = [session.label() for session in sessions]
        schedules = [pace.Paced(f"/event/{tracking[session.split]}/{session.reference}",
                                make=lambda session=session: pace.embed_batches(session.events))
                     for session in sessions]
        injected, injected_schedules = inject.sessions(bases, injections, tracking["holdout"])
        labels += injected
        log(f"sending {len(sessions)} human sessions of {len(bases)} recorded sessions in real time, "
            f"and {len(injected)} injected ones")
        pacer = pace.Pacer(server.base, active=active)
        sending = threading.Thread(target=pacer.run, args=(schedules + injected_schedules,), daemon=True)
        sending.start()

        strokes = work / "replay-strokes.json"
        strokes.write_text(json.dumps(humans.replay_strokes(DATASETS, work)))
        traces = work / "typing-traces.json"
        traces.write_text(json.dumps(typing_traces(typists.cmu)))
        for split in ("train", "holdout"):
            base = 0 if split == "train" else HOLDOUT_SEED_BASE
            runs = [("naive", fast_bots, []), ("stealth", fast_bots, []), ("factorial", bots, [])]
            # More mouse sessions, so that every pointer path has enough of its own; paced like
            # a person or a script (an agent's pace is a level of the balanced ones above).
            half = mouse_bots // 2
            runs += [("factorial", half, ["--modality", "mouse", "--pacing", "human"]),
                     ("factorial", mouse_bots - half, ["--modality", "mouse", "--pacing", "fast"])]
            first = {"naive": 1, "stealth": 1, "factorial": 1}
            for generator, count, forced in runs:
                if count <= 0:
                    continue
                seeds = f"{base + first[generator]}-{base + first[generator] + count - 1}"
                first[generator] += count
                log(f"{generator} bots {' '.join(forced)}, {split}: seeds {seeds}")
                output = subprocess.run(
                    ["node", str(HERE / "bots.js"), "--base", server.base, "--key", tracking[split],
                     "--generator", generator, "--seeds", seeds, "--concurrency", str(concurrency),
                     "--replay-traces", str(strokes), "--typing-traces", str(traces), *forced],
                    check=True, capture_output=True, text=True).stdout
                for line in output.splitlines():
                    result = json.loads(line)
                    if not result["ok"]:
                        log(f"  {generator} seed {result['seed']} failed: {result['error']}")
                        continue
                    labels.append({"reference": result["reference"], "class": "bot",
                                   "generator": generator,
                                   "family": family_of_bot(generator, result["factors"]),
                                   "factors": result["factors"], "seed": result["seed"],
                                   "device": "headless-chromium", "cluster": f"{generator}/{result['seed']}",
                                   "split": split, "source": "scorer/quality/bots.js"})
        labels += red_team(server, tracking["holdout"], redteam_bots)
        log(f"waiting for the paced sessions ({pacer.sent} requests sent so far)")
        sending.join()
        if pacer.errors:
            log(f"{len(pacer.errors)} requests failed, e.g. {pacer.errors[:3]}")
        with open(work / "labels.jsonl", "w") as out:
            for label in labels:
                out.write(json.dumps(label) + "\n")
        time.sleep(2)  # past the lookup statistics' 1 s
        runs = {split: server.score(surveys[split]["surveyId"], force=True) for split in surveys}
        (work / "feature-runs.json").write_text(json.dumps(runs, indent=2))
    finally:
        server.stop()


def red_team(server: Server, tracking_key: str, count: int) -> list[dict]:
    """The red team's automation (scorer/quality/redteam, written from public tools without
    reading the model, the features or bots.js), environment masked as an anti-detect browser
    presents it: HOLDOUT only, never trained on."""
    if count <= 0 or not (REDTEAM / "run.js").exists():
        return []
    subprocess.run(["npm", "ci", "--prefix", str(REDTEAM), "--silent", "--no-audit", "--no-fund"], check=True)
    ensure_redteam_python()
    labels = []
    for tool in REDTEAM_TOOLS:
        log(f"red team {tool}: seeds 1-{count}")
        result = subprocess.run(
            ["node", str(REDTEAM / "run.js"), "--base", server.base, "--key", tracking_key, "--tool", tool,
             "--seeds", f"1-{count}", "--concurrency", "2", "--mask-environment"],
            capture_output=True, text=True)
        for line in result.stdout.splitlines():
            try:
                session = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not session.get("ok"):
                log(f"  {tool} seed {session.get('seed')} failed: {session.get('error')}")
                continue
            labels.append({"reference": session["reference"], "class": "bot", "generator": f"redteam-{tool}",
                           "family": f"redteam:{tool}", "factors": {"redteam": tool}, "seed": session["seed"],
                           "device": "chromium", "cluster": f"redteam/{tool}/{session['seed']}",
                           "split": "holdout", "source": "scorer/quality/redteam", "evaluation_only": True})
        if result.returncode != 0:
            log(f"  {tool} exited {result.returncode}: {result.stderr[-300:]}")
    return labels


def ensure_redteam_python() -> None:
    """Installs the red team's Python families' packages (redteam/requirements.txt) when one is
    missing: on a fresh machine three of the seven families failed without them. Browsers are
    never downloaded (Debian's Chromium is used); `xvfb-run` must be there for two families."""
    modules = ("selenium", "humancursor", "playwright", "playwright_stealth", "oxymouse", "nodriver", "pyclick")
    import importlib.util

    # Found, not imported: pyclick imports PyAutoGUI, which needs a display.
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        log(f"installing the red team's Python packages (missing: {', '.join(missing)})")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "-r", str(REDTEAM / "requirements.txt")]
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        if subprocess.run(command, env=env).returncode != 0:
            subprocess.run(command + ["--break-system-packages"], env=env, check=True)
    if subprocess.run(["sh", "-c", "command -v xvfb-run"], capture_output=True).returncode != 0:
        log("xvfb-run is missing (apt-get install -y xvfb): selenium-humancursor and xvfb-pyclick will fail")


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
    samples = training_samples(labels, rows)
    log(f"training on {len(samples)} TRAIN sessions")
    model, _ = fit.fit_gbdt(samples, version=MODEL_VERSION)
    MODEL_PATH.write_text(json.dumps(model, indent=2) + "\n")
    log(f"wrote {MODEL_PATH.relative_to(REPO)}")


def training_samples(labels: dict[str, dict], rows: list[dict]) -> list[tuple[dict, dict]]:
    return [(labels[row["reference"]], row) for row in rows
            if row["reference"] in labels and not labels[row["reference"]].get("evaluation_only")]


def fold_of(label: dict, folds: int) -> int:
    """A person's fold (every session and variant of one person, every session of one bot
    seed, together)."""
    import hashlib

    return int(hashlib.sha1(label["cluster"].encode()).hexdigest(), 16) % folds


def cross_validate(work: Path, folds: int = 5) -> None:
    """TRAIN-only cross-validation grouped by person: out-of-fold scores of the humans by person
    and of every bot family and factor level, behaviour alone."""
    import numpy as np

    import model as fit
    import report

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    samples = training_samples(labels, lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"]))
    scored = []
    for k in range(folds):
        fitted, _ = fit.fit_gbdt([s for s in samples if fold_of(s[0], folds) != k], version="cv")
        masked = fit.mask_environment(fitted)
        scored += [(label, fit.score(masked, row), row) for label, row in samples if fold_of(label, folds) == k]
    people = report.People([(label, p) for label, p, _ in scored if label["class"] == "human"])
    judged = [(label, p) for label, p, row in scored if label["class"] == "human" and not fit.too_little_behaviour(fitted, row)]
    enough = report.People(judged)
    humans = people.scores()
    threshold = report.threshold_at(humans, 0.01)
    print(f"TRAIN {folds}-fold by person, behaviour alone: humans automation-like "
          f"{people.share(report.automation_like):.3f}, human-like (enough behaviour) "
          f"{enough.share(report.human_like):.3f} ({len(people.by_person)} people, {len(humans)} sessions)")
    groups = {}
    for label, p, _ in scored:
        if label["class"] == "bot":
            groups.setdefault(("family", report.family_of(label)), []).append(p)
            for factor, level in (label.get("factors") or {}).items():
                groups.setdefault((factor, level), []).append(p)
    for (kind, name), values in sorted(groups.items()):
        bots = np.array(values)
        print(f"  {kind} {name}: AUC {report.auc(bots, humans):.3f}, TPR at 1 % {np.mean(bots < threshold):.3f}, "
              f"human-like {np.mean(bots >= 70):.3f} (n={len(bots)})")


def evaluate(work: Path, command: str) -> None:
    import report

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    read_log = log_holdout_read(work, labels)
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
                 str(MODEL_PATH.relative_to(REPO)), read_log)


def log_holdout_read(work: Path, labels: dict[str, dict]) -> str:
    """Appends this read of HOLDOUT to HOLDOUT_LOG (date, commit, model, what was read) before
    anything of HOLDOUT is read; returns the entry's one-line summary. HOLDOUT is read once per
    model release: a second read of the same model file is refused."""
    import hashlib

    digest = hashlib.sha256(MODEL_PATH.read_bytes()).hexdigest()[:12]
    existing = HOLDOUT_LOG.read_text() if HOLDOUT_LOG.exists() else ""
    if digest in existing and not os.environ.get("TELLTALE_HOLDOUT_REREAD"):
        raise SystemExit(f"HOLDOUT was already read for the model file {digest} ({HOLDOUT_LOG}); "
                         "a new read needs a new model release (or TELLTALE_HOLDOUT_REREAD=why, logged)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    holdout = [label for label in labels.values() if label["split"] == "holdout"]
    people = len({label["cluster"] for label in holdout if label["class"] == "human"})
    what = (f"HOLDOUT survey of {(work / 'recorded-with.txt').read_text().strip()}: "
            f"{sum(label['class'] == 'human' for label in holdout)} human sessions of {people} people or devices, "
            f"{sum(label['class'] == 'bot' for label in holdout)} bot sessions")
    reason = os.environ.get("TELLTALE_HOLDOUT_REREAD", "")
    if not existing:
        existing = ("# Reads of HOLDOUT\n\nEvery read of the HOLDOUT people and bot seeds, appended by "
                    "`python3 scorer/quality/pipeline.py evaluate` before it reads anything of them. "
                    "HOLDOUT is read once per model release; a second read of one model file needs "
                    "`TELLTALE_HOLDOUT_REREAD` and its reason, logged here.\n\n"
                    "| date (UTC) | commit | model | model file sha256 | what was read | reread because |\n"
                    "|---|---|---|---|---|---|\n")
    entry = (f"| {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} | {commit}{' (uncommitted changes)' if dirty else ''} "
             f"| {MODEL_VERSION} | {digest} | {what} | {reason} |\n")
    HOLDOUT_LOG.parent.mkdir(parents=True, exist_ok=True)
    HOLDOUT_LOG.write_text(existing + entry)
    return f"read of {time.strftime('%Y-%m-%d', time.gmtime())}, model file {digest}"


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
    parser.add_argument("--bots", type=int, default=200,
                        help="sessions per split of the factorial generator, every factor level balanced")
    parser.add_argument("--mouse-bots", type=int, default=160,
                        help="further factorial sessions per split with the mouse, so every pointer path has enough")
    parser.add_argument("--redteam-bots", type=int, default=10,
                        help="HOLDOUT sessions of each red-team tool (scorer/quality/redteam)")
    parser.add_argument("--injections", type=int, default=40,
                        help="HOLDOUT sessions of each direct-injection mode (bulk, paced)")
    parser.add_argument("--active", type=int, default=800,
                        help="human sessions sent at once, in real time")
    parser.add_argument("--humans", type=int, default=0,
                        help="send only this many human sessions, a seeded sample (a smoke test); 0: all")
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
        record(args.work, args.bots, args.mouse_bots, args.fast_bots, args.concurrency, args.redteam_bots,
               args.injections, args.active, args.variants, args.humans)
    if args.step in ("all", "train"):
        train(args.work)
    if args.step == "cv":
        cross_validate(args.work)
    if args.step in ("all", "evaluate"):
        evaluate(args.work, command)


if __name__ == "__main__":
    main()
