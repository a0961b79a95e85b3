#!/usr/bin/env python3
"""Scoring-quality harness: record, score, train, evaluate. docs/evaluation.md is its output.

    python3 lab/pipeline.py all [--work DIR] [--workers 3] [--bots N]

`all` runs the steps in order; each can also be run alone on the same work directory (default
`~/.cache/telltale-quality`).

1. record: starts the real `telltale serve` (debug build) on the work directory's data dir and
   provisions a TRAIN, a HOLDOUT and a conversions survey. Every session is a real headed
   Chromium on Xvfb filling one of the survey layouts (survey/layouts.json) served by the
   harness's page server with the production embed and collector:
   - people (replay/): every pointer person of the data sets replayed through XTEST, `--workers`
     at a time, each on a display of its own; HMOG's people's touch on the phone layout;
   - automation (bots.js, headed on a display of its own, `--concurrency` browsers at a time):
     `naive` and `stealth`, `--bots` sessions of the `factorial` generator over every layout and
     `--mouse-bots` more with the mouse (TRAIN seeds from 1, HOLDOUT seeds from 100001);
   - HOLDOUT only, never trained on: direct injection of TRAIN people's recordings posted as
     JSON (inject.py), the red team's automation (redteam/), and the HOLDOUT people's recordings
     as the old JSON conversion sent them (their own survey: the report's before-and-after).
   Recording is resumable: each part appends its labels as sessions are recorded, and a rerun
   records only what is missing. It takes hours (every session in real time).
2. score: scores every survey with the built-in model (so every session's features are in the
   lake) and writes labels.jsonl, refusing every recorded session with a late event.
3. train: fits the model (`model.fit_gbdt`) on the TRAIN survey's features, its bias tuned on
   out-of-fold scores of a cross-validation grouped by person and typist, and writes
   `scorer/models/telltale-v5.json` and the out-of-fold scores (oof.json).
4. evaluate: logs the HOLDOUT read in docs/evaluation/holdout-reads.md, restarts the server with
   that model file, scores the HOLDOUT survey with it (so the report's scores are the product's
   own), reads them from the lake and writes the report with its plots. `train` and `cv` never
   read the HOLDOUT survey; `evaluate` is the only step that does, once per model release.

`cv` (not part of `all`) is the tool for choosing on TRAIN: the same cross-validation, printed by
person, layout, family and factor level, behaviour alone.
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

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
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
SPLITS = ("train", "holdout")
MODEL_VERSION = "telltale-v5"
MODEL_PATH = REPO / "scorer" / "models" / f"{MODEL_VERSION}.json"
# The previous model, kept as the report's baseline row.
BASELINE_PATH = REPO / "scorer" / "models" / "telltale-v4.json"
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
    # A binary already built (TELLTALE_BIN, as the clients' tests take it) is used as it is.
    if os.environ.get("TELLTALE_BIN"):
        return Path(os.environ["TELLTALE_BIN"])
    # A release build: the recording replays people in real time on the same two cores as the
    # server, and a debug server's collector took a third of a core (32.7 % over 513 s), enough
    # to make 9 of 19 replays' inputs go out late (each refused and recorded again).
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "telltale-target"))
    path = target / "release" / "telltale"
    log("building telltale (release)")
    subprocess.run(["cargo", "build", "--release", "--bin", "telltale"], cwd=REPO, check=True,
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


# Every recorded session, people and automation, fills one of these layouts (survey/layouts.json)
# in a headed Chromium on a virtual display; the phone layout by touch.
DESKTOP_LAYOUTS = ("demo", "grid", "text")
PHONE_LAYOUT = "phone"


def append_to(path: Path):
    """A function that appends one JSON line to `path` (safe from several threads)."""
    lock = threading.Lock()

    def append(record: dict) -> None:
        with lock, open(path, "a") as out:
            out.write(json.dumps(record) + "\n")

    return append


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]


def record(work: Path, bots: int, mouse_bots: int, fast_bots: int, concurrency: int, redteam_bots: int,
           injections: int, workers: int, people: int = 0, steps: tuple[str, ...] = ("humans", "bots", "extra"),
           splits: tuple[str, ...] = SPLITS) -> None:
    """Records every session into the work directory's server; resumable: a session already in
    the labels files is not recorded again (every reference derives from what the session is).
    `splits` ("train" alone: what cross-validation needs, without spending HOLDOUT) limits the
    people and bots; injection, the red team and the old conversions are HOLDOUT's."""
    from replay import pages as survey_pages
    from replay import record as replay
    from replay import sources
    from replay.xinput import Display

    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "ci", "--prefix", str(HERE), "--silent", "--no-audit", "--no-fund"], check=True)
    (work / "recorded-with.txt").write_text(
        f"python3 lab/pipeline.py record --bots {bots} --mouse-bots {mouse_bots} "
        f"--fast-bots {fast_bots} --redteam-bots {redteam_bots} --injections {injections} "
        f"--concurrency {concurrency} --workers {workers}" + (f" --people {people}" if people else "")
        + (f" --split {splits[0]}" if len(splits) == 1 else ""))
    server = Server(work)
    pages = None
    try:
        surveys = {}
        for split in ("train", "holdout", "conversions"):
            surveys[split] = server.api("PUT", f"/integrations/v1/surveys/quality-{split}",
                                        {"name": f"Scoring quality ({split})"})
        (work / "surveys.json").write_text(json.dumps(surveys, indent=2))
        tracking = {split: survey["trackingKey"] for split, survey in surveys.items()}
        pages = survey_pages.PageServer(server.base)
        threads = []
        if "bots" in steps:
            display = Display.start()
            thread = threading.Thread(target=record_bots, daemon=True,
                                      args=(work, server, pages, tracking, display, bots, mouse_bots, fast_bots,
                                            concurrency, splits))
            thread.start()
            threads.append((thread, display))
        if "humans" in steps:
            record_people(work, server.base, tracking, workers, people, replay, sources, splits)
        for thread, display in threads:
            thread.join()
            display.close()
        steps = steps if "holdout" in splits else tuple(step for step in steps if step != "extra")
        if "extra" in steps and not (work / "labels-extra.jsonl").exists():
            extra = injected_and_red_team(work, server, tracking["holdout"], injections, redteam_bots)
            with open(work / "labels-extra.jsonl", "w") as out:
                for label in extra:
                    out.write(json.dumps(label) + "\n")
        if "extra" in steps and not (work / "labels-conversions.jsonl").exists():
            converted = old_conversions(work, server, tracking["conversions"])
            with open(work / "labels-conversions.jsonl", "w") as out:
                for label in converted:
                    out.write(json.dumps(label) + "\n")
    finally:
        if pages is not None:
            pages.close()
        server.stop()


def record_people(work: Path, telltale: str, tracking: dict, workers: int, limit: int, replay, sources,
                  splits: tuple[str, ...] = SPLITS) -> None:
    """The people of the data sets replayed through XTEST (lab/replay)."""
    path = work / "labels-people.jsonl"
    done = {label["key"]: label for label in read_jsonl(path)}
    people = sources.sapimouse_people() + sources.balabit_people(
        DATASETS / "balabit-mouse-dynamics" / "test_files.tar.gz", work / "balabit")
    typists = sources.cmu_typists(DATASETS / "cmu-keystroke" / "keystrokes.csv") + sources.aalto_typists()
    if not any(p.set == "sapimouse" for p in people):
        log("SapiMouse is missing: run lab/datasets/unpack.sh first (only Balabit's people are replayed)")
    jobs = replay.plan_jobs(people, typists, splits=splits, limit_people=limit)
    todo = [job for job in jobs if job.key not in done]
    # People with no wheel recorded (SapiMouse) scroll with the wheel bursts of a person of their
    # split who recorded many (Balabit): real notches, another hand.
    donors = {}
    for split in ("train", "holdout"):
        candidates = [p for p in people if p.split == split and p.bursts]
        if candidates:
            donors[split] = max(candidates, key=lambda p: len(p.bursts))
    log(f"replaying {len(todo)} of {len(jobs)} people's sessions in {workers} processes "
        f"({len(jobs) - len(todo)} recorded before)")
    recorder = replay.Recorder(telltale, tracking, {p.name: p for p in people}, {t.name: t for t in typists}, donors,
                               workers=workers, log=log, done=append_to(path))
    recorder.typed = {label["draws"]: label.get("typed") for label in done.values()}
    recorder.run(todo)
    if recorder.failures:
        append = append_to(work / "failures-people.jsonl")
        for failure in recorder.failures:
            append(failure)
        log(f"{len(recorder.failures)} people's sessions failed three times (failures-people.jsonl)")


def bot_runs(bots: int, mouse_bots: int, fast_bots: int) -> list[tuple[str, str, int, list[str]]]:
    """(generator, layout, count, forced flags) per split: the library generators on the desktop
    layouts, the factorial one on every layout (touch on the phone), more mouse sessions on the
    desktop layouts so that every pointer path has enough."""
    runs = []
    per = lambda total, layouts: [(layout, total // len(layouts) + (i < total % len(layouts)))  # noqa: E731
                                  for i, layout in enumerate(layouts)]
    for generator in FAST_GENERATORS:
        runs += [(generator, layout, n, []) for layout, n in per(fast_bots, DESKTOP_LAYOUTS)]
    runs += [("factorial", layout, n, []) for layout, n in per(bots, DESKTOP_LAYOUTS + (PHONE_LAYOUT,))]
    half = mouse_bots // 2
    runs += [("factorial", layout, n, ["--modality", "mouse", "--pacing", "human"])
             for layout, n in per(half, DESKTOP_LAYOUTS)]
    runs += [("factorial", layout, n, ["--modality", "mouse", "--pacing", "fast"])
             for layout, n in per(mouse_bots - half, DESKTOP_LAYOUTS)]
    return [run for run in runs if run[2] > 0]


def record_bots(work: Path, server: Server, pages, tracking: dict, display, bots: int, mouse_bots: int,
                fast_bots: int, concurrency: int, splits: tuple[str, ...] = SPLITS) -> None:
    """The automation of bots.js, headed on its own display, on the same layouts and pages."""
    path = work / "labels-bots.jsonl"
    done = {label["reference"] for label in read_jsonl(path)}
    append = append_to(path)
    strokes = work / "replay-strokes.json"
    if not strokes.exists():
        strokes.write_text(json.dumps(humans.replay_strokes(DATASETS, work)))
    traces = work / "typing-traces.json"
    if not traces.exists():
        traces.write_text(json.dumps(typing_traces(humans.load_cmu(DATASETS / "cmu-keystroke" / "keystrokes.csv"))))
    for split in splits:
        base = 0 if split == "train" else HOLDOUT_SEED_BASE
        first = {generator: 1 for generator in GENERATORS}
        for generator, layout, count, forced in bot_runs(bots, mouse_bots, fast_bots):
            seeds = list(range(base + first[generator], base + first[generator] + count))
            first[generator] += count
            design = subprocess.run(["node", str(HERE / "bots.js"), "--list-design", f"{seeds[0]}-{seeds[-1]}",
                                     "--generator", generator, "--layout", layout, *forced],
                                    check=True, capture_output=True, text=True).stdout
            todo = [json.loads(line)["seed"] for line in design.splitlines()
                    if json.loads(line)["reference"] not in done]
            if not todo:
                continue
            log(f"{generator} bots {' '.join(forced)} on {layout}, {split}: {len(todo)} of seeds {seeds[0]}-{seeds[-1]}")
            for chunk_start in range(0, len(todo), 10):
                chunk = todo[chunk_start:chunk_start + 10]
                result = subprocess.run(
                    ["node", str(HERE / "bots.js"), "--base", server.base, "--key", tracking[split],
                     "--pages", pages.base, "--layout", layout, "--display", f":{display.number}",
                     "--generator", generator, "--seeds", ",".join(map(str, chunk)), "--concurrency", str(concurrency),
                     "--replay-traces", str(strokes), "--typing-traces", str(traces), *forced],
                    capture_output=True, text=True)
                for line in result.stdout.splitlines():
                    outcome = json.loads(line)
                    if not outcome["ok"]:
                        log(f"  {generator} seed {outcome['seed']} on {layout} failed: {outcome['error'][:200]}")
                        continue
                    append({"reference": outcome["reference"], "class": "bot", "generator": generator,
                            "family": family_of_bot(generator, outcome["factors"]), "factors": outcome["factors"],
                            "seed": outcome["seed"], "layout": layout, "device": "xvfb-chromium",
                            "cluster": f"{generator}/{outcome['seed']}", "split": split,
                            "seconds": outcome.get("seconds"), "details": outcome.get("details"),
                            "source": "lab/bots.js"})
                if result.returncode != 0:
                    log(f"  bots.js exited {result.returncode}: {result.stderr[-300:]}")
    record_touch_people(work, server, pages, tracking, display, concurrency, splits)


def record_touch_people(work: Path, server: Server, pages, tracking: dict, display, concurrency: int,
                        splits: tuple[str, ...] = SPLITS) -> None:
    """People's touch on the phone layout: HOLDOUT and TRAIN HMOG people's recorded gestures and
    soft-keyboard typing, through DevTools touch input (replay/touch.py says why not the OS)."""
    from replay import touch
    from replay.sources import fold_of as named_fold

    path = work / "labels-touch.jsonl"
    done = {label["reference"] for label in read_jsonl(path)}
    append = append_to(path)
    exported = touch.export()
    if not exported["jobs"]:
        log("HMOG is missing: no people's touch (run lab/datasets/unpack.sh)")
        return
    export_path = work / "touch-people.json"
    export_path.write_text(json.dumps(exported))
    todo = [seed for seed, job in enumerate(exported["jobs"], start=1)
            if job["reference"] not in done and job["split"] in splits]
    log(f"people's touch on the phone layout: {len(todo)} of {len(exported['jobs'])} sessions")
    for split in splits:
        seeds = [seed for seed in todo if exported["jobs"][seed - 1]["split"] == split]
        for chunk_start in range(0, len(seeds), 10):
            chunk = seeds[chunk_start:chunk_start + 10]
            result = subprocess.run(
                ["node", str(HERE / "bots.js"), "--base", server.base, "--key", tracking[split], "--pages", pages.base,
                 "--layout", PHONE_LAYOUT, "--display", f":{display.number}", "--generator", "touch-person",
                 "--seeds", ",".join(map(str, chunk)), "--concurrency", str(concurrency),
                 "--touch-people", str(export_path)], capture_output=True, text=True)
            for line in result.stdout.splitlines():
                outcome = json.loads(line)
                job = exported["jobs"][outcome["seed"] - 1]
                if not outcome["ok"]:
                    log(f"  touch {job['key']} failed: {outcome['error'][:200]}")
                    continue
                append({"reference": job["reference"], "key": job["key"], "class": "human", "generator": "human",
                        "seed": None, "split": split, "layout": PHONE_LAYOUT, "mode": "touch", "path": "touch-cdp",
                        "device": "phone-touch", "cluster": job["person"], "person": job["person"],
                        "typist": job["person"], "typing": "hmog-soft", "fold": named_fold(job["person"]),
                        "variant": "replay", "base": job["reference"], "seconds": outcome.get("seconds"),
                        "source": f"hmog:{job['person']} (gestures and soft keyboard, through DevTools touch)"})
            if result.returncode != 0:
                log(f"  bots.js (touch-person) exited {result.returncode}: {result.stderr[-300:]}")


def old_conversions(work: Path, server: Server, tracking_key: str) -> list[dict]:
    """The HOLDOUT people's recordings as the harness used to send them (humans.py's `embed`
    conversion, posted as JSON), in a survey of their own: the report sets their features beside
    the same people's replays, to show what the replay path changed. Never trained on, never
    counted as people or automation."""
    typists = humans.load_typists(DATASETS)
    bases = [base for base in humans.all_bases(DATASETS, work, typists)
             if base.split == "holdout" and base.device in ("browser-mouse", "desktop-rdp", "phone-touch")]
    labels, schedules = [], []
    for base in bases:
        reference = humans.reference_for(f"conversion/{base.source}")
        events = humans.convert(base, "embed")
        session = dict(events[0]["data"], sessionId=reference, interviewId=reference, embedVersion="1.3.0")
        events = [{"type": "session", "t": 0.0, "data": session}] + events[1:]
        schedules.append(pace.Paced(f"/event/{tracking_key}/{reference}", pace.bulk_batches(events)))
        labels.append({"reference": reference, "class": "conversion", "split": "conversions", "person": base.cluster,
                       "device": base.device, "cluster": base.cluster, "typing": base.typing, "source": base.source,
                       "evaluation_only": True})
    log(f"posting {len(labels)} HOLDOUT recordings as the old conversion sent them")
    pace.Pacer(server.base, active=len(schedules)).run(schedules)
    return labels


def injected_and_red_team(work: Path, server: Server, tracking_key: str, injections: int, redteam_bots: int) -> list[dict]:
    """HOLDOUT families no model trains on: direct injection of TRAIN people's converted
    recordings (posted JSON, no browser: inject.py) and the red team's automation."""
    labels = []
    if injections > 0:
        typists = humans.load_typists(DATASETS)
        bases = [base for base in humans.all_bases(DATASETS, work, typists) if base.split == "train"]
        injected, schedules = inject.sessions(bases, injections, tracking_key)
        log(f"injecting {len(injected)} sessions straight into the collector")
        pacer = pace.Pacer(server.base, active=len(schedules))
        pacer.run(schedules)
        labels += injected
    labels += red_team(server, tracking_key, redteam_bots)
    return labels


def score_recordings(work: Path) -> None:
    """Scores both surveys with the built-in model (so that every session's features are in the
    lake) and writes labels.jsonl: every recorded session but those refused for lateness.

    Pacing that cannot leak: a recorded session, a person's or automation's, whose events did not
    all reach the collector promptly (`late_event_fraction` above 0) is refused, listed in
    refused.jsonl and never trained on or evaluated; only the direct-injection family, which is
    posted after the fact on purpose, is exempt."""
    surveys = json.loads((work / "surveys.json").read_text())
    labels = read_jsonl(work / "labels-people.jsonl") + read_jsonl(work / "labels-touch.jsonl") \
        + read_jsonl(work / "labels-bots.jsonl") + read_jsonl(work / "labels-extra.jsonl") \
        + read_jsonl(work / "labels-conversions.jsonl")
    server = Server(work)
    try:
        time.sleep(2)  # past the lookup statistics' 1 s
        runs = {split: server.score(surveys[split]["surveyId"], force=True) for split in surveys}
    finally:
        server.stop()
    (work / "feature-runs.json").write_text(json.dumps(runs, indent=2))
    lateness = {}
    for split in surveys:
        for row in lake_rows(work, "features", surveys[split]["surveyId"], runs[split]):
            lateness[row["reference"]] = row.get("late_event_fraction")
    kept, refused = [], []
    for label in labels:
        late = lateness.get(label["reference"])
        if label.get("family") == "injection" or label["class"] == "conversion":
            kept.append(label)  # posted after the fact on purpose
        elif late is None:
            refused.append({**label, "refused": "no features (no events reached the lake)"})
        elif late > 0:
            refused.append({**label, "refused": f"late_event_fraction {late:.3f}"})
        else:
            kept.append(label)
    with open(work / "labels.jsonl", "w") as out:
        for label in kept:
            out.write(json.dumps(label) + "\n")
    with open(work / "refused.jsonl", "w") as out:
        for label in refused:
            out.write(json.dumps(label) + "\n")
    log(f"{len(kept)} sessions labelled, {len(refused)} refused (refused.jsonl)")


def red_team(server: Server, tracking_key: str, count: int) -> list[dict]:
    """The red team's automation (lab/redteam, written from public tools without
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
                           "split": "holdout", "source": "lab/redteam", "evaluation_only": True})
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
    if not any(pattern.parent.glob("*.parquet")):
        return []  # a survey with no sessions (a recording of one split) has no files
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


FOLDS = 5


def train(work: Path) -> None:
    """Fits the model on every TRAIN session; its bias (and every threshold the report applies)
    comes from out-of-fold scores of a cross-validation grouped by person and by typist, never
    from the sessions a model was fitted on."""
    import model as fit

    samples = train_samples(work)
    log(f"cross-validating on {len(samples)} TRAIN sessions ({FOLDS} folds by person and typist)")
    oof = out_of_fold(samples)
    model, _ = fit.fit_gbdt(samples, version=MODEL_VERSION, tune=False)
    labels = [label for label, _ in samples]
    rows = [row for _, row in samples]
    model["bias"] = round(fit.tune_bias(model, labels, rows, offsets=np.array([z for z, _ in oof])), 3)
    MODEL_PATH.write_text(json.dumps(model, indent=2) + "\n")
    (work / "oof.json").write_text(json.dumps({
        "model": MODEL_VERSION, "folds": FOLDS, "bias": model["bias"],
        "sessions": [{"reference": label["reference"], "z": z, "masked_z": masked}
                     for (label, _), (z, masked) in zip(samples, oof)]}) + "\n")
    log(f"wrote {MODEL_PATH.relative_to(REPO)} (bias {model['bias']} from out-of-fold scores)")


def train_samples(work: Path) -> list[tuple[dict, dict]]:
    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    return training_samples(load_labels(work), lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"]))


def training_samples(labels: dict[str, dict], rows: list[dict]) -> list[tuple[dict, dict]]:
    return [(labels[row["reference"]], row) for row in rows
            if row["reference"] in labels and not labels[row["reference"]].get("evaluation_only")]


def fold_of(label: dict, folds: int = FOLDS) -> int:
    """A session's cross-validation fold. A person's sessions are all in the person's fold, and
    a person types with a typist of that fold (replay/record.py), so the folds group by person
    and by typist at once; a bot that replays a real typist's keys is in that typist's fold; any
    other bot session in the fold of its seed."""
    from replay.sources import fold_of as named_fold

    if label["class"] == "human" and label.get("person"):
        return named_fold(label["person"]) % folds
    typist = ((label.get("details") or {}).get("typist") or {}).get("person")
    if typist:
        return named_fold(f"cmu-keystroke/{typist}") % folds
    return named_fold(label["cluster"]) % folds


def out_of_fold(samples: list[tuple[dict, dict]], folds: int = FOLDS, fitter=None,
                fold_of=fold_of) -> list[tuple[float, float]]:
    """Each sample's log-odds without the bias, (as fitted, environment masked), from the model
    fitted on the other folds."""
    import model as fit

    fitter = fitter or (lambda subset, version: fit.fit_gbdt(subset, version=version, tune=False)[0])
    out: list[tuple[float, float] | None] = [None] * len(samples)
    for k in range(folds):
        fitted = fitter([s for s in samples if fold_of(s[0], folds) != k], f"cv-{k}")
        masked = fit.mask_environment(fitted)
        for index, (label, row) in enumerate(samples):
            if fold_of(label, folds) == k:
                out[index] = (fit.log_odds(fitted, row) - fitted["bias"], fit.log_odds(masked, row) - masked["bias"])
    return [value if value is not None else (0.0, 0.0) for value in out]


def cross_validate(work: Path, folds: int = FOLDS) -> None:
    """TRAIN-only cross-validation grouped by person and typist: out-of-fold scores of the
    humans by person and of every bot family and factor level, behaviour alone, with the bias
    tuned on those same out-of-fold scores (as `train` tunes the shipped one)."""
    import model as fit
    import report

    samples = train_samples(work)
    oof = out_of_fold(samples, folds)
    # What the bias tuning and the scores need of a model: its evidence rule and bands.
    reference_model = {"bias": 0.0, "bands": dict(fit.BANDS), "evidence": fit.evidence_table(), "terms": [], "trees": []}
    labels = [label for label, _ in samples]
    rows = [row for _, row in samples]
    bias = fit.tune_bias(reference_model, labels, rows, offsets=np.array([z for z, _ in oof]))
    scored = [(label, fit.percent_of(reference_model, row, bias + masked), row)
              for (label, row), (_, masked) in zip(samples, oof)]
    people = report.People([(label, p) for label, p, _ in scored if label["class"] == "human"])
    enough = report.People([(label, p) for label, p, row in scored
                            if label["class"] == "human" and not fit.too_little_behaviour(reference_model, row)])
    humans = people.scores()
    threshold = report.threshold_at(humans, 0.01)
    print(f"TRAIN {folds}-fold by person and typist, behaviour alone, bias {bias:.2f}: humans automation-like "
          f"{people.share(report.automation_like):.3f}, human-like (enough behaviour) "
          f"{enough.share(report.human_like):.3f} ({len(people.by_person)} people, {len(humans)} sessions)")
    for name, where in (("layout " + layout, lambda l, x=layout: l.get("layout") == x) for layout in
                        DESKTOP_LAYOUTS + (PHONE_LAYOUT,)):
        if people.people(where):
            print(f"  humans, {name}: automation-like {people.share(report.automation_like, where):.3f}, "
                  f"human-like {enough.share(report.human_like, where):.3f}")
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
    import model as fit
    import report

    surveys = json.loads((work / "surveys.json").read_text())
    runs = json.loads((work / "feature-runs.json").read_text())
    labels = load_labels(work)
    oof = json.loads((work / "oof.json").read_text())
    if oof.get("model") != MODEL_VERSION:
        raise SystemExit(f"{work}/oof.json is of {oof.get('model')}, not {MODEL_VERSION}: run `train` first")
    read_log = log_holdout_read(work, labels)
    server = Server(work, model=MODEL_PATH)
    try:
        run = server.score(surveys["holdout"]["surveyId"], force=True)
    finally:
        server.stop()
    scores = lake_rows(work, "scores", surveys["holdout"]["surveyId"], run)
    features = lake_rows(work, "features", surveys["holdout"]["surveyId"], run)
    train_features = lake_rows(work, "features", surveys["train"]["surveyId"], runs["train"])
    conversions = []
    if "conversions" in surveys and "conversions" in runs:
        conversions = [(labels[row["reference"]], row)
                       for row in lake_rows(work, "features", surveys["conversions"]["surveyId"], runs["conversions"])
                       if row["reference"] in labels]

    def threshold_of(subset, fitted):
        """A left-out fit's 1 % threshold: its TRAIN people's out-of-fold scores (environment
        masked), with the bias tuned on them as `train` tunes the shipped one."""
        values = out_of_fold(subset)
        subset_labels = [label for label, _ in subset]
        subset_rows = [row for _, row in subset]
        bias = fit.tune_bias(fitted, subset_labels, subset_rows, offsets=np.array([z for z, _ in values]))
        humans = [fit.percent_of(fitted, row, bias + masked)
                  for (label, row), (_, masked) in zip(subset, values) if label["class"] == "human"]
        return report.threshold_at(np.array(humans), 0.01)

    report.write(labels, scores, features, train_features, json.loads(MODEL_PATH.read_text()),
                 json.loads(BASELINE_PATH.read_text()), REPO / "docs", command,
                 (work / "recorded-with.txt").read_text().strip(), str(MODEL_PATH.relative_to(REPO)), read_log,
                 oof=oof, conversions=conversions, refused=read_jsonl(work / "refused.jsonl"),
                 threshold_of=threshold_of)


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
                    "`python3 lab/pipeline.py evaluate` before it reads anything of them. "
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
    """Installs what the harness imports (numpy, matplotlib, duckdb, lightgbm, and python-xlib
    for the replay's XTEST input) when missing."""
    missing = []
    for module, package in (("numpy", "numpy"), ("matplotlib", "matplotlib"), ("duckdb", "duckdb"),
                            ("lightgbm", "lightgbm"), ("Xlib", "python-xlib")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    if not missing:
        return
    log(f"installing {', '.join(missing)} with pip")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *missing]
    if subprocess.run(command).returncode != 0:
        # Debian's Python refuses system-wide installs (PEP 668) unless told otherwise.
        subprocess.run(command + ["--break-system-packages"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["all", "record", "score", "train", "evaluate", "cv"])
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "telltale-quality")
    # Defaults sized to the machine: bots fill at about 1.6 sessions a minute beside the people's
    # replays, so 123 per split take about two and a half hours, as long as the people.
    parser.add_argument("--bots", type=int, default=60,
                        help="sessions per split of the factorial generator over the layouts, every factor level balanced")
    parser.add_argument("--mouse-bots", type=int, default=45,
                        help="further factorial sessions per split with the mouse, so every pointer path has enough")
    parser.add_argument("--redteam-bots", type=int, default=6,
                        help="HOLDOUT sessions of each red-team tool (lab/redteam)")
    parser.add_argument("--injections", type=int, default=40,
                        help="HOLDOUT sessions of each direct-injection mode (bulk, paced)")
    parser.add_argument("--fast-bots", type=int, default=9,
                        help="sessions per split of each scripted generator (naive, stealth)")
    parser.add_argument("--concurrency", type=int, default=2, help="bot browsers at once")
    parser.add_argument("--workers", type=int, default=3, help="people replayed at once, each on a display of its own")
    parser.add_argument("--people", type=int, default=0, help="replay only the first N pointer people (a smoke test); 0: all")
    parser.add_argument("--only", choices=["humans", "bots", "extra"], action="append",
                        help="record only these parts (repeatable); default all")
    parser.add_argument("--split", choices=["train", "holdout"], action="append",
                        help="record only these splits' people and bots (repeatable); default both. "
                             "TRAIN alone is what `cv` needs and reads no HOLDOUT")
    args = parser.parse_args()
    ensure_python_packages()
    command = "python3 lab/pipeline.py " + " ".join(sys.argv[1:])
    if args.step in ("all", "record"):
        record(args.work, args.bots, args.mouse_bots, args.fast_bots, args.concurrency, args.redteam_bots,
               args.injections, args.workers, args.people, tuple(args.only or ("humans", "bots", "extra")),
               tuple(args.split or SPLITS))
    if args.step in ("all", "score"):
        score_recordings(args.work)
    if args.step in ("all", "train"):
        train(args.work)
    if args.step == "cv":
        cross_validate(args.work)
    if args.step in ("all", "evaluate"):
        evaluate(args.work, command)


if __name__ == "__main__":
    main()
