#!/usr/bin/env python3
"""The recorded corpus: people and automation recorded once, the same way, kept in the repository
and scored again without being recorded again. lab/corpus/README.md says what is kept, why, and
how a chunk is recorded; this is the program.

    python3 lab/corpus.py plan        write the fixed plan (lab/corpus/plan.jsonl), once
    python3 lab/corpus.py record      record the next chunk of the plan (at most --minutes, 45),
                                      write it into lab/corpus/chunks/, add it to the manifest
                                      (and commit it with --commit), then stop
    python3 lab/corpus.py status      where the manifest stands against the plan
    python3 lab/corpus.py verify      checksums, labels, one reference per attempt, late events
    python3 lab/corpus.py load        load TRAIN chunks into a fresh deployment through the
                                      collector's path, score them with the product's own code,
                                      and check every recomputed feature against the recorded one
    python3 lab/corpus.py cv          TRAIN cross-validation grouped by person and typist, by
                                      input path, and what delivery and environment alone tell
    python3 lab/corpus.py evaluate --model FILE
                                      the one HOLDOUT read of a model version (logged)

Nothing here builds the binary: `record` needs a release build (TELLTALE_BIN, or
$CARGO_TARGET_DIR/release/telltale) of the commit it names, made before recording starts (a
build alongside would make replays late); the other steps take any build.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

CORPUS = HERE / "corpus"
PLAN = CORPUS / "plan.jsonl"
MANIFEST = CORPUS / "manifest.json"
CHUNKS = CORPUS / "chunks"
MANIFEST_FORMAT = 1
# Where what reproduces people's recordings lives: never in the repository (lab/corpus/README.md).
CACHE = Path(os.environ.get("TELLTALE_CORPUS_CACHE", Path.home() / ".cache" / "telltale-corpus"))
DATASETS = Path(os.environ.get("TELLTALE_DATASETS", REPO.parent / "shared" / "datasets"))
HOLDOUT_LOG = REPO / "docs" / "evaluation" / "holdout-reads.md"

SPLITS = ("train", "holdout")
DESKTOP_LAYOUTS = ("demo", "grid", "text")
HOLDOUT_SEED_BASE = 100_000
# What automation each split records (factorial sessions on the desktop layouts and on the phone,
# the two library generators, and HOLDOUT's red team); the people are whoever the data sets hold.
AUTOMATION = {
    "train": {"factorial": 120, "phone": 16, "naive": 9, "stealth": 9, "redteam": 0},
    "holdout": {"factorial": 72, "phone": 10, "naive": 6, "stealth": 6, "redteam": 3},
}
# What the plan's first extension (after chunk 002) added: more factorial sessions with the mouse,
# so that each pointer path family has enough sessions to be left out of a fit and measured, and
# the library generators through the operating system too (PyAutoGUI's or xdotool's jumps and
# keys), so every generator drives both input paths.
#
# What the second (after chunk 005) added, for issue 54's acceptance: touch automation in TRAIN
# (16 phone sessions; the touch trees need at least 20 to be fitted, so phone people had none to
# be told apart by), and each red-team family to 20 HOLDOUT sessions (3 before), the farm the
# cohort must name in a survey of HOLDOUT people. Extensions only append: `phone` counts new
# seeds, `redteam` the family's total.
EXTENSION = {
    "train": {"mouse": 60, "library_xtest": 9, "phone": 12, "redteam": 0, "farms": 20, "repeats": True},
    "holdout": {"mouse": 40, "library_xtest": 6, "phone": 0, "redteam": 20, "farms": 0, "repeats": False},
}
MOUSE_SEED_OFFSET = 1000
PHONE_SEED_OFFSET = 2000
# The third (after chunk 007): TRAIN farms, for a cohort rule chosen on TRAIN. The HOLDOUT read of
# telltale-v6 found the red team's tools, 20 sessions each among 147 people, named 0 of 20 by the
# cohort, whose rule names copies of one setting; TRAIN held no farm of a tool that draws each
# session's style afresh. Each farm here is one setting of the factorial generator (every factor
# forced, one page), FARM_SIZE sessions whose seeds draw the rest: the path's and the pacing's
# parameters, and for `replay` typing a different real typist each session. Both input paths, as
# the rest of TRAIN.
FARM_SEED_OFFSET = 3000
TRAIN_FARMS = {
    "xtest-bezier": ("demo", {"driver": "xtest", "path": "bezier", "typing": "population", "pacing": "human",
                              "modality": "mouse"}),
    "xtest-windmouse-typists": ("grid", {"driver": "xtest", "path": "windmouse", "typing": "replay",
                                         "pacing": "agent", "modality": "mouse"}),
    "webdriver-perlin-typists": ("demo", {"driver": "webdriver", "path": "perlin", "typing": "replay",
                                          "pacing": "human", "modality": "mouse"}),
    "cdp-ghost-cursor": ("text", {"driver": "cdp", "path": "ghost-cursor", "typing": "population",
                                  "pacing": "human", "modality": "mouse"}),
    "cdp-touch": ("phone", {"driver": "cdp", "path": "none", "typing": "population", "pacing": "human",
                            "modality": "touch"}),
}
# The fourth (after chunk 008): a second session of every TRAIN SapiMouse person, on the next
# layout, as the first plan gives every HOLDOUT SapiMouse person (`build_plan`). The HOLDOUT read
# of telltale-v7 moved the same few people in every farm survey, one of them with two sessions
# there (3.2 sessions a person in a HOLDOUT farm survey), where TRAIN had about one session a
# person, so TRAIN could not say whether repeats were why (docs/evaluation.md: they were not).
# The repeat types with its first session's typist and replays the second half of the person's movements first
# (block 1 of 2); its first session started at the beginning of them, so the two may share
# movements where HOLDOUT's pairs do not (a harder case than HOLDOUT's, not an easier one).
# HOLDOUT-only automation written by the red team without reading the model, the features or the
# generators (lab/redteam/README.md); the input path each drives through.
REDTEAM_TOOLS = {"pptr-stealth": "devtools", "pw-keyboard": "devtools", "pw-touch": "devtools",
                 "llm-agent": "devtools", "selenium-humancursor": "devtools", "pw-stealth-oxymouse": "devtools",
                 "xvfb-pyclick": "xtest", "xdotool-agent": "xtest"}
MIN_XTEST_SHARE = 0.40
SESSION_ATTEMPTS = 3  # per chunk; a session that fails three times waits for the next chunk
DEFAULT_MINUTES = 45
# Stop handing out sessions this long before the chunk's end: a session takes one to two minutes.
TAIL_SECONDS = 150


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def write_gzip_jsonl(path: Path, rows: list[dict]) -> None:
    """Deterministic gzip (no name, no time) of one JSON object a line."""
    raw = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode()
    with open(path, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as z:
        z.write(raw)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- the plan ------------------------------------------------------------------------------------


def people_sources():
    """The pointer people and typists of the data sets; fails when one is missing, never shrinks
    the plan."""
    from replay import sources

    balabit = DATASETS / "balabit-mouse-dynamics" / "test_files.tar.gz"
    cmu = DATASETS / "cmu-keystroke" / "keystrokes.csv"
    for path in (balabit, cmu):
        if not path.exists():
            raise SystemExit(f"{path} is missing: the plan needs every data set (../shared/datasets/README.md)")
    try:
        sapimouse = sources.sapimouse_people()
        aalto = sources.aalto_typists()
    except (FileNotFoundError, OSError) as error:
        raise SystemExit(f"{error}: unpack the extra data sets first (bash lab/datasets/unpack.sh)") from error
    if not sapimouse or not aalto:
        raise SystemExit("SapiMouse or Aalto is empty: unpack the extra data sets first (bash lab/datasets/unpack.sh)")
    people = sapimouse + sources.balabit_people(balabit, CACHE / "balabit")
    typists = sources.cmu_typists(cmu) + aalto
    return people, typists


def touch_export() -> dict:
    from replay import touch

    exported = touch.export()
    if not exported["jobs"]:
        raise SystemExit("HMOG is missing: unpack the extra data sets first (bash lab/datasets/unpack.sh)")
    return exported


def factorial_design(seeds: list[int], layout: str) -> list[dict]:
    out = subprocess.run(["node", str(HERE / "bots.js"), "--list-design", f"{seeds[0]}-{seeds[-1]}",
                          "--generator", "factorial", "--layout", layout],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def build_plan() -> list[dict]:
    """Every session the corpus records, in the order chunks record them: within a split
    shuffled (seeded), so that each chunk holds people and automation of every kind, recorded
    side by side under the same load; a twin after the person it mirrors."""
    from replay import record

    people, typists = people_sources()
    jobs = record.plan_jobs(people, typists)
    # HOLDOUT SapiMouse people fill a second layout (another share of their movements): at
    # least 100 HOLDOUT sessions from the 46 HOLDOUT people and devices.
    extra = []
    for job in jobs:
        if job.split == "holdout" and job.hand == "person" and job.mode == "mouse" and job.swap_of is None \
                and job.person.startswith("sapimouse/"):
            layout = DESKTOP_LAYOUTS[(DESKTOP_LAYOUTS.index(job.layout) + 1) % 3]
            key = f"{job.person}/{layout}/1"
            extra.append(record.Job(key, job.split, job.person, job.typist, layout, "mouse", draws=key))
    jobs = jobs + extra
    blocks: dict[str, list] = {}
    for job in jobs:
        if job.swap_of is None and job.hand == "person":
            blocks.setdefault(job.person, []).append(job)
    for person_jobs in blocks.values():
        for index, job in enumerate(person_jobs):
            job.block = (index, len(person_jobs))
    by_draws = {job.draws: job for job in jobs if job.swap_of is None and job.hand == "person"}
    plan: dict[str, list[dict]] = {split: [] for split in SPLITS}
    for job in jobs:
        entry = {"id": f"replay/{job.key}", "split": job.split, "layout": job.layout, "mode": job.mode,
                 "person": job.person, "typist": job.typist, "draws": job.draws, "block": list(job.block)}
        if job.hand == "twin":
            entry.update({"class": "bot", "kind": "twin", "original": f"replay/{by_draws[job.draws].key}"})
            entry.pop("typist")
        else:
            entry.update({"class": "human", "kind": "person",
                          "swap_of": f"replay/{by_draws[job.draws].key}" if job.swap_of else None})
        plan[job.split].append(entry)
    for job in touch_export()["jobs"]:
        plan[job["split"]].append({"id": f"touch/{job['key']}", "split": job["split"], "class": "human",
                                   "kind": "touch-person", "layout": "phone", "mode": "touch",
                                   "person": job["person"], "key": job["key"]})
    for split in SPLITS:
        counts = AUTOMATION[split]
        base = 0 if split == "train" else HOLDOUT_SEED_BASE
        seeds = list(range(base + 1, base + counts["factorial"] + 1))
        for layout_index, layout in enumerate(DESKTOP_LAYOUTS):
            mine = seeds[layout_index::3]
            for design in factorial_design(mine, layout) if mine else []:
                if design["seed"] in mine:
                    plan[split].append(factorial_entry(split, layout, design))
        phone = list(range(base + counts["factorial"] + 1, base + counts["factorial"] + counts["phone"] + 1))
        for design in factorial_design(phone, "phone") if phone else []:
            plan[split].append(factorial_entry(split, "phone", design))
        for generator in ("naive", "stealth"):
            for n in range(counts[generator]):
                seed = base + n + 1
                plan[split].append({"id": f"{generator}/{seed}", "split": split, "class": "bot", "kind": generator,
                                    "generator": generator, "seed": seed, "layout": DESKTOP_LAYOUTS[n % 3],
                                    "factors": {"path": "none", "typing": "insert", "pacing": "fast",
                                                "modality": "library", "driver": "cdp"}})
        plan[split] += extension_entries(split)
        for tool in REDTEAM_TOOLS:
            for seed in range(1, counts["redteam"] + 1):
                plan[split].append({"id": f"redteam/{tool}/{seed}", "split": split, "class": "bot", "kind": "redteam",
                                    "tool": tool, "seed": seed, "layout": "demo", "evaluation_only": True})
    ordered = []
    for split in SPLITS:
        entries = sorted(plan[split], key=lambda e: e["id"])
        random.Random(f"telltale-corpus/order/{split}").shuffle(entries)
        # A twin types the keys its person typed: it goes a few places after its original.
        twins = [e for e in entries if e["kind"] == "twin"]
        entries = [e for e in entries if e["kind"] != "twin"]
        for twin in twins:
            at = next(i for i, e in enumerate(entries) if e["id"] == twin["original"])
            entries.insert(min(len(entries), at + 4), twin)
        ordered += entries
    for number, entry in enumerate(ordered):
        entry["order"] = number
        entry["input"] = input_path(entry)
    check_plan(ordered)
    return ordered


def extension_entries(split: str) -> list[dict]:
    """The entries of the plan's extension (`EXTENSION`) for a split."""
    counts = EXTENSION[split]
    base = (0 if split == "train" else HOLDOUT_SEED_BASE) + MOUSE_SEED_OFFSET
    entries = []
    seeds = list(range(base + 1, base + counts["mouse"] + 1))
    for layout_index, layout in enumerate(DESKTOP_LAYOUTS):
        mine = seeds[layout_index::3]
        if not mine:
            continue
        out = subprocess.run(["node", str(HERE / "bots.js"), "--list-design", f"{mine[0]}-{mine[-1]}",
                              "--generator", "factorial", "--layout", layout, "--modality", "mouse"],
                             check=True, capture_output=True, text=True).stdout
        for design in map(json.loads, out.splitlines()):
            if design["seed"] in mine:
                entry = factorial_entry(split, layout, design)
                entry.update(id=f"factorial-mouse/{design['seed']}", forced={"modality": "mouse"})
                entries.append(entry)
    for generator in ("naive", "stealth"):
        for n in range(counts["library_xtest"]):
            seed = base + n + 1
            entries.append({"id": f"{generator}-xtest/{seed}", "split": split, "class": "bot", "kind": generator,
                            "generator": generator, "seed": seed, "layout": DESKTOP_LAYOUTS[n % 3],
                            "forced": {"driver": "xtest"},
                            "factors": {"path": "jump", "typing": "xdotool", "pacing": "fast",
                                        "modality": "library", "driver": "xtest"}})
    phone_base = (0 if split == "train" else HOLDOUT_SEED_BASE) + PHONE_SEED_OFFSET
    phone = list(range(phone_base + 1, phone_base + counts["phone"] + 1))
    for design in factorial_design(phone, "phone") if phone else []:
        if design["seed"] in phone:
            entries.append(factorial_entry(split, "phone", design))
    for tool in REDTEAM_TOOLS:
        for seed in range(AUTOMATION[split]["redteam"] + 1, counts["redteam"] + 1):
            entries.append({"id": f"redteam/{tool}/{seed}", "split": split, "class": "bot", "kind": "redteam",
                            "tool": tool, "seed": seed, "layout": "demo", "evaluation_only": True})
    for number, (farm, (layout, factors)) in enumerate(TRAIN_FARMS.items() if counts["farms"] else ()):
        base = (0 if split == "train" else HOLDOUT_SEED_BASE) + FARM_SEED_OFFSET + 100 * number
        seeds = list(range(base + 1, base + counts["farms"] + 1))
        flags = [flag for factor, level in factors.items() for flag in (f"--{factor}", level)]
        out = subprocess.run(["node", str(HERE / "bots.js"), "--list-design", f"{seeds[0]}-{seeds[-1]}",
                              "--generator", "factorial", "--layout", layout, *flags],
                             check=True, capture_output=True, text=True).stdout
        for design in map(json.loads, out.splitlines()):
            if design["factors"] != factors:
                raise SystemExit(f"farm {farm}: bots.js drew {design['factors']} for seed {design['seed']}")
            entry = factorial_entry(split, layout, design)
            entry.update(id=f"farm/{farm}/{design['seed']}", farm=farm, forced=dict(factors))
            entries.append(entry)
    if counts["repeats"]:
        entries += repeat_entries(split)
    return entries


def repeat_entries(split: str) -> list[dict]:
    """A second mouse session, on the next layout, of each SapiMouse person of the split (the
    fourth extension)."""
    people = [entry for entry in load_plan() if entry["split"] == split and entry["kind"] == "person"
              and entry["mode"] == "mouse" and entry["swap_of"] is None and entry["person"].startswith("sapimouse/")]
    firsts = [entry for entry in people if entry["id"].endswith("/0")]
    have = {entry["person"] for entry in people if entry["id"].endswith("/1")}
    entries = []
    for first in firsts:
        if first["person"] in have:
            continue
        layout = DESKTOP_LAYOUTS[(DESKTOP_LAYOUTS.index(first["layout"]) + 1) % 3]
        key = f"{first['person']}/{layout}/1"
        entries.append({"id": f"replay/{key}", "split": split, "class": "human", "kind": "person", "layout": layout,
                        "mode": "mouse", "person": first["person"], "typist": first["typist"], "draws": key,
                        "block": [1, 2], "swap_of": None, "repeat_of": first["id"]})
    return entries


def extend_plan() -> None:
    """Appends the extension's entries to the fixed plan: every recorded entry stays as it is
    and where it is; the new ones go after each split's last entry, shuffled among themselves.
    The manifest keeps the plan's earlier checksums."""
    plan = read_jsonl(PLAN)
    manifest = load_manifest()
    if manifest["plan"]["sha256"] != sha256(PLAN):
        raise SystemExit("plan.jsonl is not the plan the manifest fixes")
    known = {entry["id"] for entry in plan}
    added = []
    for split in SPLITS:
        new = [entry for entry in extension_entries(split) if entry["id"] not in known]
        new.sort(key=lambda e: e["id"])
        # Each extension shuffles its own entries, under its own name.
        extension = len(manifest["plan"].get("history", [])) + 1
        random.Random(f"telltale-corpus/order/{split}/extension-{extension}").shuffle(new)
        added += new
    if not added:
        log("the plan holds the extension already")
        return
    order = max(entry["order"] for entry in plan) + 1
    by_split = {split: [e for e in plan if e["split"] == split] for split in SPLITS}
    for entry in added:
        entry["order"] = order
        entry["input"] = input_path(entry)
        order += 1
        by_split[entry["split"]].append(entry)
    extended = by_split["train"] + by_split["holdout"]
    check_plan(extended)
    PLAN.write_text("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in extended))
    history = manifest["plan"].get("history", [])
    manifest["plan"] = {"file": PLAN.name, "sha256": sha256(PLAN), "sessions": len(extended),
                        "history": history + [{"sha256": manifest["plan"]["sha256"],
                                               "sessions": manifest["plan"]["sessions"]}]}
    save_manifest(manifest)
    log(f"added {len(added)} sessions to the plan ({len(extended)} in all)")


def factorial_entry(split: str, layout: str, design: dict) -> dict:
    return {"id": f"factorial/{design['seed']}", "split": split, "class": "bot", "kind": "factorial",
            "generator": "factorial", "seed": design["seed"], "layout": layout, "factors": design["factors"]}


def input_path(entry: dict) -> str:
    """How a session's input reaches the browser: `xtest` (the X server's input, as a person's
    hand through the operating system) or `devtools` (DevTools or chromedriver dispatch)."""
    kind = entry["kind"]
    if kind in ("person", "twin"):
        return "xtest"
    if kind == "factorial" or entry.get("factors", {}).get("driver") == "xtest":
        return "xtest" if entry["factors"]["driver"] == "xtest" else "devtools"
    if kind == "redteam":
        return REDTEAM_TOOLS[entry["tool"]]
    return "devtools"  # naive, stealth, touch people (no touch screen on the X server)


def check_plan(plan: list[dict]) -> None:
    ids = [entry["id"] for entry in plan]
    if len(ids) != len(set(ids)):
        raise SystemExit("the plan names a session twice")
    for split in SPLITS:
        # The share is of the automation a model is fitted and chosen on: the red team's
        # evaluation-only families drive whichever path their tool does.
        bots = [e for e in plan if e["split"] == split and e["class"] == "bot" and not e.get("evaluation_only")]
        xtest = sum(e["input"] == "xtest" for e in bots) / max(1, len(bots))
        if xtest < MIN_XTEST_SHARE:
            raise SystemExit(f"{split}: {xtest:.0%} of the automation goes through XTEST, under {MIN_XTEST_SHARE:.0%}")


def load_plan() -> list[dict]:
    if not PLAN.exists():
        raise SystemExit(f"{PLAN.relative_to(REPO)} is missing: `python3 lab/corpus.py plan` writes it once")
    plan = read_jsonl(PLAN)
    manifest = load_manifest()
    if manifest["plan"]["sha256"] != sha256(PLAN):
        raise SystemExit("plan.jsonl is not the plan the manifest fixes (its sha256 differs)")
    return plan


def write_plan(force: bool) -> None:
    if PLAN.exists() and not force:
        raise SystemExit(f"{PLAN.relative_to(REPO)} exists: the plan is fixed once chunks are recorded from it")
    if MANIFEST.exists() and load_manifest()["chunks"]:
        raise SystemExit("chunks were recorded from the current plan: it cannot change")
    plan = build_plan()
    CORPUS.mkdir(parents=True, exist_ok=True)
    PLAN.write_text("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in plan))
    save_manifest({"format": MANIFEST_FORMAT, "plan": {"file": PLAN.name, "sha256": sha256(PLAN),
                                                       "sessions": len(plan)}, "chunks": []})
    summary = {}
    for entry in plan:
        key = (entry["split"], entry["class"], entry["input"])
        summary[key] = summary.get(key, 0) + 1
    for key, count in sorted(summary.items()):
        log(f"  {' '.join(key)}: {count}")
    log(f"wrote {PLAN.relative_to(REPO)}: {len(plan)} sessions")


def load_manifest() -> dict:
    if not MANIFEST.exists():
        raise SystemExit(f"{MANIFEST.relative_to(REPO)} is missing")
    manifest = json.loads(MANIFEST.read_text())
    if manifest.get("format", 1) > MANIFEST_FORMAT:
        raise SystemExit(f"the manifest is in format {manifest['format']}, newer than this harness reads "
                         f"({MANIFEST_FORMAT})")
    return manifest


def save_manifest(manifest: dict) -> None:
    staging = MANIFEST.with_suffix(".json.new")
    staging.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    staging.replace(MANIFEST)


def chunk_labels(chunk: dict) -> list[dict]:
    return read_jsonl(CHUNKS / chunk["id"] / "labels.jsonl")


def recorded_state(manifest: dict) -> tuple[set[str], dict[str, int], dict[str, dict]]:
    """(plan ids kept in some chunk, attempts made per plan id, kept labels by plan id)."""
    kept, attempts, labels = set(), {}, {}
    for chunk in manifest["chunks"]:
        for label in chunk_labels(chunk):
            attempts[label["id"]] = attempts.get(label["id"], 0) + 1
            if label["kept"]:
                kept.add(label["id"])
                labels[label["id"]] = label
    return kept, attempts, labels


# ---- the service ---------------------------------------------------------------------------------


def binary() -> Path:
    if os.environ.get("TELLTALE_BIN"):
        return Path(os.environ["TELLTALE_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "telltale-target"))
    path = target / "release" / "telltale"
    if not path.exists():
        raise SystemExit(f"no binary at {path}: build it first (cargo build --release --bin telltale) "
                         "or name one with TELLTALE_BIN")
    return path


def telltale(data: Path, *args: str, capture: bool = True) -> str:
    """Runs a `telltale` command on a data dir; its output (stderr too, on failure)."""
    done = subprocess.run([str(binary()), "--data-dir", str(data), "--log-filter", "warn", *args],
                          capture_output=capture, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"telltale {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


class Service:
    """A real `telltale serve` on a data dir of its own."""

    def __init__(self, data: Path):
        self.data = data
        args = [str(binary()), "serve", "--bind", "127.0.0.1:0", "--data-dir", str(data),
                # All traffic comes from this machine: the per-IP and per-identifier collector
                # limits and the API's per-key limit are off.
                "--collector-ip-rate", "0", "--collector-identifier-rate", "0",
                "--api-rate-per-minute", "1000000",
                # The recorder holds the log for the whole chunk (`hold_log`), so no segment is
                # retired; each flush rolls into a new one, made 40 MiB long. A flush a second
                # left 1,604 segments (63 GB) after the first chunk: flush every ten minutes
                # (the run at the end flushes the rest).
                "--flush-interval-ms", "600000", "--flush-bytes", str(256 * 1024 * 1024),
                "--compaction-interval-secs", "0", "--log-filter", "warn"]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        key_file = data / "integration-key"
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("telltale serve exited early")
            line = line.strip()
            if line.startswith("TELLTALE_INTEGRATION_KEY="):
                key_file.write_text(line.split("=", 1)[1])
            if line.startswith("telltale listening on "):
                self.base = line.removeprefix("telltale listening on ")
                break
        else:
            raise RuntimeError("telltale serve did not start in time")
        self.key = key_file.read_text().strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=120)

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        import urllib.request

        request = urllib.request.Request(
            self.base + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["data"]

    def provision(self, name: str) -> dict:
        return self.api("PUT", f"/integrations/v1/surveys/{name}", {"name": name})

    def score(self, survey_id: str) -> str:
        run = self.api("POST", f"/integrations/v1/surveys/{survey_id}/scoring-runs", {"force": True})
        while run["status"] == "running":
            time.sleep(1)
            run = self.api("GET", f"/integrations/v1/surveys/{survey_id}/scoring-runs/{run['id']}")
        if run["status"] != "completed":
            raise RuntimeError(f"scoring run ended {run['status']}: {run.get('error')}")
        return run["id"]


def feature_rows(data: Path, run_id: str) -> dict[str, dict]:
    """The `features` rows of a run (through `telltale sql`), by reference: every feature by its
    name, NaN as None."""
    from math import isnan

    out = telltale(data, "sql", "--format", "json",
                   f"SELECT * EXCLUDE (survey_id, run_id, computed_at) FROM features WHERE run_id = '{run_id}'")
    rows = {}
    text = out.strip()
    records = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line]
    for record in records:
        reference = record.pop("reference")
        rows[reference] = {name: (None if value is None or (isinstance(value, float) and isnan(value)) else value)
                           for name, value in record.items()}
    return rows


def version_of_binary() -> str:
    return subprocess.run([str(binary()), "--version"], capture_output=True, text=True, check=True).stdout.strip()


def commit_of_binary() -> str:
    text = version_of_binary()
    return text.split("commit ")[1].rstrip(")") if "commit " in text else "unknown"


def chromium_version() -> str:
    from replay.browser import CHROMIUM

    return subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()


# ---- recording -----------------------------------------------------------------------------------


@dataclass
class Context:
    """What every worker needs, made before the workers fork."""

    telltale: str
    tracking: str
    people: dict
    typists: dict
    donors: dict
    strokes: Path
    typing: Path
    touch: Path
    typed: dict  # plan id of a person's session -> key classes typed (for its twin; the parent's)


def bot_resources(people, typists) -> tuple[Path, Path]:
    """Human TRAIN material automation replays (never a HOLDOUT person's): Balabit TRAIN users'
    aimed movements for the `replay` path and CMU and Aalto TRAIN typists' keys for the `replay`
    typing level. Derived from the data sets, so kept in the cache."""
    import humans

    CACHE.mkdir(parents=True, exist_ok=True)
    strokes, typing = CACHE / "replay-strokes.json", CACHE / "typing-traces.json"
    if not strokes.exists():
        strokes.write_text(json.dumps(humans.replay_strokes(DATASETS, CACHE)))
    if not typing.exists():
        traces = []
        for typist in typists:
            if typist.split != "train":
                continue
            keys, start = [], 0.0
            rng = random.Random(f"typing-traces/{typist.name}")
            for run in typist.runs:
                origin = run[0][0]
                for down, up, key_class in run:
                    keys.append([round(start + down - origin, 3), round(start + up - origin, 3), key_class])
                start = keys[-1][0] + rng.choice(typist.flights())
            traces.append({"person": typist.name, "keys": keys})
        typing.write_text(json.dumps(traces))
    return strokes, typing


def person_hand(ctx: Context, entry: dict):
    """The hand of a person's session or of its twin, as replay/record.py's Recorder builds it."""
    import copy

    from replay import play

    person = ctx.people[entry["person"]]
    if entry["kind"] == "twin":
        typed = entry.get("answers")  # what its person typed, when recorded first
        return play.TwinHand(answers=list(typed or [])), person, None, typed is not None
    typist = ctx.typists.get(entry["typist"]) if entry.get("typist") else None
    own = copy.deepcopy(typist) if typist else None
    if own is not None:  # each session starts somewhere else in the typist's recordings
        own.cursor = random.Random(f"{entry['draws']}/typist").randrange(len(own.runs))
    hand = play.PersonHand(person.block(*entry["block"]), own, random.Random(f"{entry['draws']}/hand"),
                           keyboard_only=entry["mode"] == "keyboard", wheel_donor=ctx.donors.get(entry["split"]))
    return hand, person, typist, True


def record_replay(ctx: Context, display, pages, entry: dict, reference: str) -> dict:
    """A person's session, or its twin: through XTEST, the page read by its probe."""
    from replay import browser, play, record, session

    hand, person, typist, own_answers = person_hand(ctx, entry)
    rng = random.Random(f"{entry['draws']}/runner")
    window = browser.draw_window(random.Random(f"{entry['draws']}/window"), (display.width, display.height))
    plan = play.draw_plan(entry["layout"], random.Random(f"{entry['draws']}/plan"))
    outcome = session.record_session(display, pages, ctx.tracking, reference, entry["layout"], hand, rng, window, plan)
    late = sorted(outcome.late_ms)
    p99 = late[int(0.99 * (len(late) - 1))] if late else 0.0
    if p99 > record.MAX_SCHEDULE_LATE_P99_MS:
        raise play.ReplayError(f"inputs went out late (p99 {p99:.1f} ms): the machine was too busy")
    details = {"actions": outcome.actions, "keys": outcome.keys, "schedule_late_p99_ms": round(p99, 2)}
    label = {"window": f"{window.width}x{window.height}", "typed": outcome.typed, "details": details}
    if entry["kind"] == "twin":
        label.update(generator="xtest-minjerk", family="xtest-minjerk", driver="xtest",
                     factors={"path": "xtest-minjerk", "driver": "xtest", "modality": entry["mode"]},
                     cluster=f"twin/{person.name}", device="xvfb-chromium",
                     details={**details, "answers": "original" if own_answers else "default"})
    else:
        label.update(generator="human", driver="xtest", device=person.device, cluster=person.name,
                     typist=typist.name if typist else None, typing=typist.set if typist else "none",
                     fold=person.fold, variant="replay" if not entry.get("swap_of") else "swap",
                     base=entry.get("swap_of") or entry["id"])
    return label


def record_attached(ctx: Context, display, pages, entry: dict, reference: str) -> dict:
    """A session driven by a program attached to the browser the harness launched: automation
    through DevTools or XTEST (bots.js, the red team), and people's touch (HMOG through DevTools
    touch input)."""
    from replay import browser

    rng = random.Random(f"telltale-corpus/{entry['id']}/window")
    phone = entry["layout"] == "phone"
    window = browser.draw_window(rng, (display.width, display.height), phone=phone)
    probe = uuid.uuid4().hex
    url = pages.url(entry["layout"], ctx.tracking, reference, probe)
    # The hand rests somewhere over the window when the page opens, as for people (session.py).
    display.move(window.x + rng.uniform(0.2, 0.8) * window.width, window.y + rng.uniform(0.3, 0.8) * window.height)
    # A phone's page is opened by the driver once the phone is emulated; a desktop page by the
    # browser, as a person's.
    shown = browser.Browser(display.name, "about:blank" if phone else url, window)
    started = time.time()
    try:
        devtools = shown.devtools()
        where = ["--connect", devtools, "--display", display.name, "--url", url,
                 "--window", f"{window.x},{window.y},{window.width},{window.height}"]
        if entry["kind"] == "redteam":
            command = ["node", str(HERE / "redteam" / "run.js"), "--tool", entry["tool"], "--seed", str(entry["seed"]),
                       *where]
        else:
            generator = "touch-person" if entry["kind"] == "touch-person" else entry["generator"]
            seed = touch_job_number(ctx, entry) if entry["kind"] == "touch-person" else entry["seed"]
            forced = [flag for factor, level in (entry.get("forced") or {}).items()
                      for flag in (f"--{factor}", level)]
            command = ["node", str(HERE / "bots.js"), *where, "--generator", generator, "--seeds", str(seed),
                       "--layout", entry["layout"], "--replay-traces", str(ctx.strokes),
                       "--typing-traces", str(ctx.typing), "--touch-people", str(ctx.touch), *forced]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"no outcome (exit {done.returncode}): {done.stderr.strip()[-400:]}")
        outcome = json.loads(lines[-1])
        if not outcome.get("ok"):
            raise RuntimeError(outcome.get("error") or "failed")
        if outcome.get("reference") not in (None, reference):
            raise RuntimeError(f"the session reported reference {outcome['reference']}, not {reference}")
    finally:
        shown.close()
        pages.forget(probe)
    label = {"window": f"{window.width}x{window.height}", "details": outcome.get("details") or {},
             "seconds_driver": round(time.time() - started, 1)}
    if entry["kind"] == "touch-person":
        label["details"] = {}
        label.update(generator="human", driver="cdp", device="phone-touch", cluster=entry["person"],
                     typist=entry["person"], typing="hmog-soft", fold=fold_of_name(entry["person"]),
                     variant="replay", base=entry["id"])
    elif entry["kind"] == "redteam":
        label.update(generator=f"redteam-{entry['tool']}", family=f"redteam:{entry['tool']}",
                     factors={"redteam": entry["tool"]}, driver=entry["input"], device="chromium",
                     cluster=f"redteam/{entry['tool']}/{entry['seed']}")
    else:
        factors = outcome.get("factors") or entry["factors"]
        if factors != entry["factors"]:
            raise RuntimeError(f"bots.js drew {factors} for the plan's {entry['factors']}: the generator changed "
                               "since the plan was written")
        label.update(generator=entry["generator"], family=family_of_bot(entry["generator"], factors),
                     factors=factors, driver=factors.get("driver", "cdp"), device="xvfb-chromium",
                     cluster=f"{entry['generator']}/{entry['seed']}")
        if entry.get("farm"):
            label["farm"] = entry["farm"]
    return label


def touch_job_number(ctx: Context, entry: dict) -> int:
    exported = json.loads(ctx.touch.read_text())
    return next(i for i, job in enumerate(exported["jobs"], start=1) if job["key"] == entry["key"])


def family_of_bot(generator: str, factors: dict) -> str:
    """The report's family of a bot session: the generator for naive and stealth; for a factorial
    session its path level when it used the mouse, else its modality (keyboard, touch, paste)."""
    if generator != "factorial":
        return generator
    return factors["path"] if factors["modality"] == "mouse" else factors["modality"]


def fold_of_name(name: str) -> int:
    from replay.sources import fold_of

    return fold_of(name)


def worker(ctx: Context, tasks, results) -> None:
    """One display, one browser at a time: takes (entry, reference, attempt) tasks until told to
    stop, answers ("done", task, label) or ("failed", task, error)."""
    import traceback

    from replay.pages import PageServer
    from replay.xinput import Display

    display = pages = None
    try:
        display = Display.start()
        pages = PageServer(ctx.telltale)
        while True:
            task = tasks.get()
            if task is None:
                return
            entry, reference, _ = task
            started = time.time()
            try:
                if entry["kind"] in ("person", "twin"):
                    label = record_replay(ctx, display, pages, entry, reference)
                else:
                    label = record_attached(ctx, display, pages, entry, reference)
                label["seconds"] = round(time.time() - started, 1)
                results.put(("done", task, label))
            except Exception as error:  # noqa: BLE001 (a failed attempt is dropped and tried again)
                try:
                    display.release_all()
                except Exception:  # noqa: BLE001
                    pass
                results.put(("failed", task, f"{error!r} {traceback.format_exc(limit=3)[-600:]}"))
    except Exception as error:  # noqa: BLE001 (a worker that cannot start says why)
        results.put(("broken", None, repr(error)))
    finally:
        if pages is not None:
            pages.close()
        if display is not None:
            display.close()
        results.put(("exit", None, None))


def hold_log(data: Path):
    """Holds the deployment's write-ahead log as `telltale backup` does (an exclusive lock on
    `wal/HOLD`): while held the server retires no segment, so every batch the collector received
    is still in the log when the chunk ends and `telltale log export` reads it."""
    import fcntl

    handle = open(data / "wal" / "HOLD", "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def check_clean_tree(allow_dirty: bool) -> str:
    """The commit the chunk names: the binary's, which must be HEAD, or differ from HEAD only in
    lab/corpus/ (the chunks recorded since), with nothing uncommitted outside lab/corpus/
    (features computed by a build of another state would name the wrong commit)."""
    commit = commit_of_binary()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = [line for line in subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                             capture_output=True, text=True).stdout.splitlines()
             if not line[3:].startswith("lab/corpus/")]
    problems = []
    if not head.startswith(commit):
        # Commits since the binary's that touch only the corpus (earlier chunks) leave the
        # program and the harness as the binary's commit had them.
        changed = subprocess.run(["git", "diff", "--name-only", commit, head], cwd=REPO, capture_output=True,
                                 text=True)
        outside = [path for path in changed.stdout.splitlines() if not path.startswith("lab/corpus/")]
        if changed.returncode != 0 or outside:
            problems.append(f"the binary was built from {commit}, HEAD is {head[:12]}"
                            + (f" and differs in {', '.join(outside[:5])}" if outside else ""))
    if dirty:
        problems.append(f"uncommitted changes: {', '.join(line[3:] for line in dirty[:5])}")
    if problems and not allow_dirty:
        raise SystemExit("; ".join(problems) + ": commit and build first (or --allow-dirty for a trial, "
                         "which is never committed)")
    return commit if not problems else f"{commit}-dirty"


def record_chunk(minutes: float, workers: int, split: str | None, commit_it: bool, allow_dirty: bool,
                 only: int) -> None:
    import multiprocessing

    from replay import browser as _  # noqa: F401 (fails early when the harness cannot import)

    plan = load_plan()
    manifest = load_manifest()
    kept, attempts, kept_labels = recorded_state(manifest)
    todo = [entry for entry in plan if entry["id"] not in kept]
    if split is None:
        split = next((s for s in SPLITS if any(e["split"] == s for e in todo)), None)
        if split is None:
            log("every session of the plan is recorded")
            return
    todo = [entry for entry in todo if entry["split"] == split]
    if only:
        todo = todo[:only]
    if not todo:
        log(f"every {split} session of the plan is recorded")
        return
    commit = check_clean_tree(allow_dirty)
    number = len(manifest["chunks"]) + 1
    chunk_id = f"{number:03d}-{split}"
    work = CACHE / "chunks" / chunk_id
    if work.exists():
        shutil.rmtree(work)  # an interrupted recording of this chunk: dropped whole, never merged
    work.mkdir(parents=True)
    people, typists = people_sources()
    strokes, typing = bot_resources(people, typists)
    touch = CACHE / "touch-people.json"
    touch.write_text(json.dumps(touch_export()))
    donors = {}
    for s in SPLITS:
        candidates = [p for p in people if p.split == s and p.bursts]
        if candidates:
            donors[s] = max(candidates, key=lambda p: len(p.bursts))
    data = work / "data"
    data.mkdir()
    service = Service(data)
    hold = hold_log(data)
    started = time.time()
    recorded_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    labels: list[dict] = []
    try:
        survey = service.provision(f"corpus-{chunk_id}")
        ctx = Context(service.base, survey["trackingKey"], {p.name: p for p in people},
                      {t.name: t for t in typists}, donors, strokes, typing, touch,
                      {pid: label.get("typed") for pid, label in kept_labels.items()})
        log(f"chunk {chunk_id}: {len(todo)} {split} sessions to go, {workers} workers, {minutes:g} minutes "
            f"(binary {commit}, {chromium_version()})")
        context = multiprocessing.get_context("fork")
        tasks, results = context.Queue(), context.Queue()
        processes = [context.Process(target=worker, args=(ctx, tasks, results), daemon=True) for _ in range(workers)]
        for process in processes:
            process.start()
        queue = list(todo)
        tries: dict[str, int] = {}
        busy, exited = 0, 0
        deadline = started + minutes * 60 - TAIL_SECONDS

        in_flight: set[str] = set()

        def hand_out() -> bool:
            """Gives a worker the next session of the queue that can go now (a twin waits for
            its person, whose keys it types), unless the chunk's time is up."""
            nonlocal busy
            if time.time() >= deadline:
                return False
            waiting = {e["id"] for e in queue} | in_flight
            for index, entry in enumerate(queue):
                if entry["kind"] == "twin" and entry["original"] in waiting:
                    continue
                queue.pop(index)
                if entry["kind"] == "twin":
                    entry = {**entry, "answers": ctx.typed.get(entry["original"])}
                tries[entry["id"]] = tries.get(entry["id"], 0) + 1
                attempt = attempts.get(entry["id"], 0) + tries[entry["id"]]
                tasks.put((entry, str(uuid.uuid4()), attempt))
                in_flight.add(entry["id"])
                busy += 1
                return True
            return False

        for _ in range(workers):
            hand_out()
        stopping = False
        while exited < workers:
            kind, task, payload = results.get()
            if kind == "exit":
                exited += 1
                continue
            if kind == "broken":
                raise RuntimeError(f"a recording worker could not start: {payload}")
            busy -= 1
            entry, reference, attempt = task
            in_flight.discard(entry["id"])
            common = {"id": entry["id"], "reference": reference, "attempt": attempt, "split": entry["split"],
                      "class": entry["class"], "kind": entry["kind"], "layout": entry["layout"],
                      "input": entry["input"], "person": entry.get("person"), "seed": entry.get("seed"),
                      "recorded": recorded_at}
            if kind == "done":
                label = {**common, **payload, "kept": True}
                if entry["kind"] == "person":
                    ctx.typed[entry["id"]] = payload.get("typed")
                labels.append(label)
            else:
                labels.append({**common, "kept": False, "dropped": f"failed: {payload[:300]}"})
                log(f"  {entry['id']} attempt {attempt} failed: {payload[:200]}")
                if tries[entry["id"]] < SESSION_ATTEMPTS:
                    queue.insert(0, entry)
            done = sum(label["kept"] for label in labels)
            if done and done % 10 == 0 and kind == "done":
                log(f"  {done} recorded, {len(labels) - done} dropped, {time.time() - started:.0f} s")
            if not hand_out() and not stopping and (busy == 0 or not queue or time.time() >= deadline):
                stopping = True
                for _ in range(workers):
                    tasks.put(None)
        for process in processes:
            process.join(timeout=60)
        recording_seconds = time.time() - started
        log(f"recorded {sum(l['kept'] for l in labels)} sessions in {recording_seconds / 60:.1f} min; scoring")
        time.sleep(2)  # past the lookup statistics' interval
        run_id = service.score(survey["surveyId"])
        rows = feature_rows(data, run_id)
    finally:
        service.stop()
        hold.close()
    records = read_jsonl_text(telltale(data, "log", "export"))
    finish_chunk(chunk_id, split, labels, rows, records, commit, recorded_at, recording_seconds, workers,
                 commit_it)
    # The deployment reproduces people's recordings (and its held log is large): it goes once the
    # chunk holds what is kept.
    shutil.rmtree(work, ignore_errors=True)


def read_jsonl_text(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def session_references(records: list[dict]) -> dict[str, set[str]]:
    """Each browser-session identifier's references, from the `session` events of its batches."""
    refs: dict[str, set[str]] = {}
    for record in records:
        for event in json.loads(record["body"]).get("events", []):
            if isinstance(event, dict) and event.get("type") == "session":
                reference = (event.get("data") or {}).get("interviewId")
                if reference:
                    refs.setdefault(record["identifier"], set()).add(reference)
    return refs


def embed_versions(records: list[dict]) -> dict[str, str]:
    versions = {}
    for record in records:
        for event in json.loads(record["body"]).get("events", []):
            if isinstance(event, dict) and event.get("type") == "session":
                data = event.get("data") or {}
                if data.get("interviewId"):
                    versions[data["interviewId"]] = data.get("embedVersion")
    return versions


def finish_chunk(chunk_id: str, split: str, labels: list[dict], rows: dict[str, dict], records: list[dict],
                 commit: str, recorded_at: str, seconds: float, workers: int, commit_it: bool) -> None:
    """Drops what cannot be kept (no features, a late event, a browser session under two
    references or a reference under two browser sessions), writes the chunk's files and adds it
    to the manifest."""
    refs = session_references(records)
    identifiers: dict[str, set[str]] = {}
    for identifier, references in refs.items():
        for reference in references:
            identifiers.setdefault(reference, set()).add(identifier)
    versions = embed_versions(records)
    browser_version = chromium_version()
    for label in labels:
        if not label["kept"]:
            continue
        reference = label["reference"]
        row = rows.get(reference)
        reason = None
        if row is None:
            reason = "no features: no event reached the lake"
        elif (row.get("late_event_fraction") or 0) > 0:
            reason = f"late_event_fraction {row['late_event_fraction']:.4f}"
        elif len(identifiers.get(reference, ())) != 1:
            reason = f"{len(identifiers.get(reference, ()))} browser sessions under this reference"
        elif any(len(refs[i]) != 1 for i in identifiers[reference]):
            reason = "its browser session also sent another reference"
        if reason:
            label.update(kept=False, dropped=reason)
            log(f"  dropped {label['id']}: {reason}")
        label.update(browser=browser_version, embed=versions.get(reference), commit=commit)
    kept = {label["reference"]: label for label in labels if label["kept"]}
    automation = {reference for reference, label in kept.items() if label["class"] == "bot"}
    keep_identifiers = {next(iter(identifiers[r])) for r in automation}
    out = CHUNKS / chunk_id
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with open(out / "labels.jsonl", "w") as file:
        for label in sorted(labels, key=lambda l: (l["id"], l["attempt"])):
            file.write(json.dumps(label, sort_keys=True) + "\n")
    write_gzip_jsonl(out / "features.jsonl.gz",
                     [{"reference": reference, "features": rows[reference]} for reference in sorted(kept)])
    write_gzip_jsonl(out / "requests.jsonl.gz",
                     [{"receivedAt": r["receivedAt"], "identifier": r["identifier"], "body": r["body"]}
                      for r in records if r["identifier"] in keep_identifiers])
    manifest = load_manifest()
    counts = {"human": sum(l["class"] == "human" for l in kept.values()),
              "bot": sum(l["class"] == "bot" for l in kept.values()),
              "dropped": sum(not l["kept"] for l in labels)}
    files = {path.name: {"sha256": sha256(path), "bytes": path.stat().st_size} for path in sorted(out.iterdir())}
    manifest["chunks"].append({"id": chunk_id, "split": split, "recorded": recorded_at, "commit": commit,
                               "browser": browser_version, "minutes": round(seconds / 60, 1), "workers": workers,
                               "sessions": counts, "files": files})
    save_manifest(manifest)
    size = sum(f["bytes"] for f in files.values())
    log(f"chunk {chunk_id}: {counts['human']} people's and {counts['bot']} automation sessions kept, "
        f"{counts['dropped']} dropped; {size / 1e6:.2f} MB in {out.relative_to(REPO)}")
    if commit_it:
        if commit.endswith("-dirty"):
            log("not committed: recorded from a dirty tree (a trial)")
            return
        subprocess.run(["git", "add", str(out), str(MANIFEST)], cwd=REPO, check=True)
        message = (f"Record corpus chunk {chunk_id}\n\n{counts['human']} people's and {counts['bot']} automation "
                   f"sessions kept, {counts['dropped']} attempts dropped, in {seconds / 60:.1f} minutes with "
                   f"{workers} workers; {size / 1e6:.2f} MB. Features by telltale {commit}.")
        subprocess.run(["git", "commit", "-q", "-m", message, "--", str(out), str(MANIFEST)], cwd=REPO, check=True)
        log("committed")


# ---- reading the corpus back ---------------------------------------------------------------------


def chunks_of(manifest: dict, split: str | None = None, ids: list[str] | None = None) -> list[dict]:
    chunks = [c for c in manifest["chunks"] if (split is None or c["split"] == split) and (not ids or c["id"] in ids)]
    if ids:
        missing = set(ids) - {c["id"] for c in chunks}
        if missing:
            raise SystemExit(f"no chunk {', '.join(sorted(missing))} in the manifest")
    return chunks


def status() -> None:
    plan = load_plan()
    manifest = load_manifest()
    kept, attempts, labels = recorded_state(manifest)
    total_bytes = 0
    for chunk in manifest["chunks"]:
        size = sum(f["bytes"] for f in chunk["files"].values())
        total_bytes += size
        s = chunk["sessions"]
        print(f"{chunk['id']}: {s['human']} people, {s['bot']} automation, {s['dropped']} dropped, "
              f"{chunk['minutes']} min, {size / 1e6:.2f} MB, telltale {chunk['commit']}")
    for split in SPLITS:
        for klass in ("human", "bot"):
            planned = [e for e in plan if e["split"] == split and e["class"] == klass]
            done = [e for e in planned if e["id"] in kept]
            xtest = sum(labels[e["id"]]["input"] == "xtest" for e in done)
            people = len({labels[e["id"]]["cluster"] for e in done}) if klass == "human" else None
            print(f"{split} {klass}: {len(done)} of {len(planned)} recorded"
                  + (f", {xtest / len(done):.0%} through XTEST" if done and klass == "bot" else "")
                  + (f", {people} people or devices" if people is not None else ""))
    sessions = len(kept)
    if sessions:
        print(f"{sessions} sessions, {total_bytes / 1e6:.2f} MB, {total_bytes / sessions / 1e3:.1f} kB a session")


def verify(manifest: dict | None = None) -> list[str]:
    """Every check a chunk must pass; the problems found (none: the corpus holds)."""
    manifest = manifest or load_manifest()
    problems = []
    if manifest["plan"]["sha256"] != sha256(PLAN):
        problems.append("plan.jsonl differs from the plan the manifest fixes")
    plan = {entry["id"]: entry for entry in read_jsonl(PLAN)}
    references: dict[str, str] = {}
    attempts: dict[str, list[int]] = {}
    kept_ids: set[str] = set()
    for chunk in manifest["chunks"]:
        folder = CHUNKS / chunk["id"]
        for name, meta in chunk["files"].items():
            path = folder / name
            if not path.exists():
                problems.append(f"{chunk['id']}: {name} is missing")
            elif sha256(path) != meta["sha256"]:
                problems.append(f"{chunk['id']}: {name} does not match its checksum")
        if problems:
            continue
        labels = chunk_labels(chunk)
        rows = {row["reference"]: row["features"] for row in read_jsonl(folder / "features.jsonl.gz")}
        requests = read_jsonl(folder / "requests.jsonl.gz")
        identifiers = {}
        for record in requests:
            identifiers.setdefault(record["identifier"], 0)
        refs = session_references(requests)
        for label in labels:
            reference = label["reference"]
            if reference in references:
                problems.append(f"reference {reference} is in two attempts ({references[reference]}, {label['id']})")
            references[reference] = label["id"]
            if label["id"] not in plan:
                problems.append(f"{chunk['id']}: {label['id']} is not in the plan")
            elif plan[label["id"]]["split"] != chunk["split"]:
                problems.append(f"{chunk['id']}: {label['id']} is of the other split")
            attempts.setdefault(label["id"], []).append(label["attempt"])
            if not label["kept"]:
                if reference in rows:
                    problems.append(f"{chunk['id']}: dropped {reference} has features in the chunk")
                continue
            if label["id"] in kept_ids:
                problems.append(f"{label['id']} is kept twice")
            kept_ids.add(label["id"])
            row = rows.get(reference)
            if row is None:
                problems.append(f"{chunk['id']}: kept {reference} has no feature row")
            elif (row.get("late_event_fraction") or 0) != 0:
                problems.append(f"{chunk['id']}: {reference} has late_event_fraction {row['late_event_fraction']}")
            if label["class"] == "bot":
                sessions = [i for i, r in refs.items() if reference in r]
                if len(sessions) != 1 or len(refs[sessions[0]]) != 1:
                    problems.append(f"{chunk['id']}: automation {reference} is not exactly one browser session "
                                    "of its own in requests")
        people_refs = {l["reference"] for l in labels if l["class"] == "human"}
        if any(reference in people_refs for r in refs.values() for reference in r):
            problems.append(f"{chunk['id']}: requests hold a person's session (only automation's are kept)")
    for pid, numbers in attempts.items():
        if len(numbers) != len(set(numbers)):
            problems.append(f"{pid}: two attempts numbered alike {numbers}")
    return problems


def chunk_sessions(chunk: dict) -> tuple[list[dict], dict[str, dict]]:
    """A chunk's kept labels and recorded feature rows (by reference)."""
    labels = [label for label in chunk_labels(chunk) if label["kept"]]
    rows = {row["reference"]: row["features"] for row in read_jsonl(CHUNKS / chunk["id"] / "features.jsonl.gz")}
    return labels, rows


# Recomputed features that may differ from the recorded ones by design: the cohort's count is a
# property of the run a session was scored in (at recording, with the chunk's people), not of the
# session.
RUN_DEPENDENT = {"cohort_alike"}


def same_value(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def load(chunks: list[dict], keep: Path | None = None) -> dict[str, dict]:
    """Loads each chunk's automation into a fresh deployment through the collector's path
    (`telltale log import`, which keeps every arrival time), scores it with the product's own
    run, and checks every recomputed feature of every session against the recorded one. Returns
    the recomputed rows by reference."""
    work = Path(tempfile.mkdtemp(prefix="telltale-corpus-load-")) if keep is None else keep
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    service = Service(data)
    try:
        surveys = {chunk["id"]: service.provision(f"corpus-{chunk['id']}")["surveyId"] for chunk in chunks}
    finally:
        service.stop()
    recomputed: dict[str, dict] = {}
    mismatches = []
    for chunk in chunks:
        started = time.time()
        imported = json.loads(telltale(data, "log", "import", "--survey", surveys[chunk["id"]], "--json",
                                       str(CHUNKS / chunk["id"] / "requests.jsonl.gz")))
        run = json.loads(telltale(data, "score", "--survey", surveys[chunk["id"]], "--force", "--json"))
        rows = feature_rows(data, run["id"])
        labels, recorded = chunk_sessions(chunk)
        automation = [label["reference"] for label in labels if label["class"] == "bot"]
        for reference in automation:
            row = rows.get(reference)
            if row is None:
                mismatches.append(f"{chunk['id']}: {reference} has no features after loading")
                continue
            for name, value in recorded[reference].items():
                if name not in RUN_DEPENDENT and not same_value(value, row.get(name)):
                    mismatches.append(f"{chunk['id']}: {reference} {name} recorded {value}, loaded {row.get(name)}")
            recomputed[reference] = row
        extra = set(rows) - set(automation)
        if extra:
            mismatches.append(f"{chunk['id']}: {len(extra)} sessions loaded that the labels do not keep")
        log(f"{chunk['id']}: {imported['batches']} batches of {imported['sessions']} sessions loaded and "
            f"{len(automation)} scored in {time.time() - started:.1f} s")
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    if mismatches:
        for line in mismatches[:40]:
            log(f"  MISMATCH {line}")
        raise SystemExit(f"{len(mismatches)} recomputed values differ from the recorded ones")
    return recomputed


def corpus_samples(chunks: list[dict], recomputed: dict[str, dict] | None) -> list[tuple[dict, dict]]:
    """(label, feature row) of every kept session of the chunks: people's recorded rows, and
    automation's rows as loading recomputed them (or as recorded, when not loaded)."""
    samples = []
    for chunk in chunks:
        labels, rows = chunk_sessions(chunk)
        for label in labels:
            row = dict((recomputed or {}).get(label["reference"]) or rows[label["reference"]])
            row["reference"] = label["reference"]
            samples.append(({**label, "chunk": chunk["id"]}, row))
    return samples


def score_rows(samples: list[tuple[dict, dict]], model: Path | None = None) -> dict[str, dict]:
    """Scores of the samples as one survey (`telltale score-features`: the product's own cohort
    and model), by reference."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as file:
        for _, row in samples:
            features = {name: value for name, value in row.items() if name != "reference"}
            file.write(json.dumps({"reference": row["reference"], "features": features}) + "\n")
        path = file.name
    try:
        args = ["score-features", path] + (["--model", str(model)] if model else [])
        out = subprocess.run([str(binary()), *args], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"score-features failed: {out.stderr[-2000:]}")
    finally:
        os.unlink(path)
    return {score["reference"]: score for score in read_jsonl_text(out.stdout)}


# ---- cross-validation on TRAIN, and the one HOLDOUT read ------------------------------------------

FOLDS = 5
# What says how input reached the page and what browser it ran in, not how a hand moved: the
# facts a harness could give away if the classes were recorded differently.
DELIVERY_AND_ENVIRONMENT = [
    "webdriver", "headless_user_agent", "impossible_screen", "missing_session_event", "webdriver_patched",
    "automation_globals", "software_renderer", "automation_stack", "untrusted_fraction", "late_event_fraction",
    "oversized_batch", "unknown_embed", "zero_pressure_presses", "multi_sample_move_fraction",
    "sampling_interval_cv",
]


def fold_of(label: dict, folds: int = FOLDS) -> int:
    """A session's cross-validation fold, grouped by person and by typist: a person's sessions in
    the person's fold (whose typists are of that fold, replay/record.py), automation that types
    a real typist's keys in that typist's fold, any other automation by its plan id."""
    if label["class"] == "human":
        return fold_of_name(label["person"]) % folds
    typist = ((label.get("details") or {}).get("typist") or {}).get("person")
    if typist:
        return fold_of_name(typist) % folds
    return fold_of_name(label["id"]) % folds


def auc(positive, negative) -> float:
    """P(a positive scores above a negative), ties half."""
    import numpy as np

    positive, negative = np.asarray(positive, float), np.asarray(negative, float)
    if not len(positive) or not len(negative):
        return float("nan")
    values = np.concatenate([positive, negative])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):  # average ranks of ties
        same = values == value
        ranks[same] = ranks[same].mean()
    return float((ranks[:len(positive)].sum() - len(positive) * (len(positive) + 1) / 2) / (len(positive) * len(negative)))


def delivery_only(samples: list[tuple[dict, dict]]) -> list[float]:
    """Out-of-fold P(human) of each session from the delivery and environment facts alone
    (LightGBM, folds by person and typist)."""
    import lightgbm
    import numpy as np

    x = np.array([[np.nan if row.get(name) is None else float(row[name]) for name in DELIVERY_AND_ENVIRONMENT]
                  for _, row in samples])
    y = np.array([1.0 if label["class"] == "human" else 0.0 for label, _ in samples])
    folds = np.array([fold_of(label) for label, _ in samples])
    out = np.zeros(len(samples))
    params = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 8, "min_data_in_leaf": 5,
              "verbose": -1, "seed": 1, "deterministic": True, "num_threads": 2}
    for k in range(FOLDS):
        train, test = folds != k, folds == k
        if not test.any() or len(set(y[train])) < 2:
            continue
        booster = lightgbm.train(params, lightgbm.Dataset(x[train], label=y[train]), num_boost_round=100)
        out[test] = booster.predict(x[test])
    return list(out)


def cross_validate(samples: list[tuple[dict, dict]]) -> None:
    """TRAIN only: the model's out-of-fold scores (pipeline.out_of_fold, behaviour with the
    environment masked), by input path; and how well delivery and environment alone separate the
    classes within each input path (what the path alone gives away)."""
    import numpy as np

    import model as fit
    import pipeline

    humans = [label for label, _ in samples if label["class"] == "human"]
    bots = [label for label, _ in samples if label["class"] == "bot"]
    print(f"TRAIN: {len(humans)} people's sessions ({len({l['person'] for l in humans})} people or devices), "
          f"{len(bots)} automation sessions; {FOLDS} folds by person and typist")
    oof = pipeline.out_of_fold(samples, FOLDS, fold_of=fold_of)
    reference_model = {"bias": 0.0, "bands": dict(fit.BANDS), "evidence": fit.evidence_table(), "terms": [], "trees": []}
    labels = [label for label, _ in samples]
    rows = [row for _, row in samples]
    bias = fit.tune_bias(reference_model, labels, rows, offsets=np.array([masked for _, masked in oof]))
    percent = [fit.percent_of(reference_model, row, bias + masked) for (_, row), (_, masked) in zip(samples, oof)]
    print(f"\nbehaviour, out of fold (environment masked, bias {bias:.2f} tuned on these scores):")
    for path in ("xtest", "devtools"):
        people = [p for (label, _), p in zip(samples, percent) if label["class"] == "human" and label["input"] == path]
        machines = [p for (label, _), p in zip(samples, percent) if label["class"] == "bot" and label["input"] == path]
        if people:
            print(f"  people through {path}: {len(people)}, automation-like {np.mean(np.array(people) < 30):.3f}, "
                  f"human-like {np.mean(np.array(people) >= 70):.3f}")
        if machines:
            all_people = [p for (label, _), p in zip(samples, percent) if label["class"] == "human"]
            print(f"  automation through {path}: {len(machines)}, not human-like {np.mean(np.array(machines) < 70):.3f}, "
                  f"AUC against all people {auc(all_people, machines):.3f}")
    families: dict[str, list[float]] = {}
    for (label, _), p in zip(samples, percent):
        if label["class"] == "bot":
            families.setdefault(f"{label.get('family')} ({label['input']})", []).append(p)
    all_people = [p for (label, _), p in zip(samples, percent) if label["class"] == "human"]
    for family, values in sorted(families.items()):
        print(f"    {family}: n={len(values)}, AUC {auc(all_people, values):.3f}, "
              f"not human-like {np.mean(np.array(values) < 70):.3f}")
    p_human = delivery_only(samples)
    print("\ndelivery and environment facts alone (no behaviour), out of fold, AUC people against automation:")
    for path in ("xtest", "devtools"):
        people = [p for (label, _), p in zip(samples, p_human) if label["class"] == "human" and label["input"] == path]
        machines = [p for (label, _), p in zip(samples, p_human) if label["class"] == "bot" and label["input"] == path]
        every = [p for (label, _), p in zip(samples, p_human) if label["class"] == "human"]
        print(f"  within {path}: {len(people)} people, {len(machines)} automation: AUC "
              f"{auc(people, machines):.3f}; against every person {auc(every, machines):.3f}")


MODEL_VERSION = "telltale-v7"
MODEL_PATH = REPO / "scorer" / "models" / f"{MODEL_VERSION}.json"


def train(samples: list[tuple[dict, dict]]) -> None:
    """Fits the model on every TRAIN session of the corpus (`model.fit_gbdt`); its bias comes
    from out-of-fold scores of the cross-validation grouped by person and typist, never from the
    sessions a model was fitted on. Writes scorer/models/<MODEL_VERSION>.json and the out-of-fold
    scores beside the cache's recordings. From telltale-v7 the file (format 2) carries the TRAIN
    people's cohort features (`cohort_reference`), which the cohort's people test counts against."""
    import numpy as np

    import cohort_rule
    import model as fit
    import pipeline

    training = [(label, row) for label, row in samples if not label.get("evaluation_only")]
    log(f"cross-validating on {len(training)} TRAIN sessions ({FOLDS} folds by person and typist)")
    oof = pipeline.out_of_fold(training, FOLDS, fold_of=fold_of)
    model, _ = fit.fit_gbdt(training, version=MODEL_VERSION, tune=False)
    labels = [label for label, _ in training]
    rows = [row for _, row in training]
    model["bias"] = round(fit.tune_bias(model, labels, rows, offsets=np.array([z for z, _ in oof])), 3) + 0.0
    model["description"] += (f" Trained on the recorded corpus's TRAIN chunks "
                             f"({', '.join(sorted({label['chunk'] for label in labels if 'chunk' in label}))}).")
    model = with_cohort_reference(model, training)
    MODEL_PATH.write_text(json.dumps(model, indent=2) + "\n")
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / f"oof-{MODEL_VERSION}.json").write_text(json.dumps({
        "model": MODEL_VERSION, "folds": FOLDS, "bias": model["bias"],
        "sessions": [{"reference": label["reference"], "z": z, "masked_z": masked}
                     for (label, _), (z, masked) in zip(training, oof)]}) + "\n")
    log(f"wrote {MODEL_PATH.relative_to(REPO)} (bias {model['bias']} from out-of-fold scores)")


def with_cohort_reference(model: dict, samples: list[tuple[dict, dict]]) -> dict:
    """The model (format 2) with the TRAIN people's cohort features as its `cohort_reference`:
    what the cohort's people test (scorer/src/cohort.rs) counts a session's alike against."""
    import cohort_rule

    people = [row for label, row in samples if label["class"] == "human"]
    reference = {"features": cohort_rule.COHORT_FEATURES,
                 "sessions": [[row[name] if isinstance(row.get(name), (int, float)) and math.isfinite(row[name])
                               else None for name in cohort_rule.COHORT_FEATURES] for row in people]}
    described = f" The cohort's people test counts against the {len(people)} TRAIN people's sessions."
    return {"format": 2, **{k: v for k, v in model.items() if k != "format"},
            "description": model["description"] + described, "cohort_reference": reference}


def reference_only(samples: list[tuple[dict, dict]], base: Path) -> None:
    """Writes MODEL_VERSION as `base`'s trees, terms, bias and ranges unchanged, with the TRAIN
    people's cohort reference: a new version for the cohort's people test alone."""
    model = json.loads(base.read_text())
    model["version"] = MODEL_VERSION
    model["description"] = model["description"].replace("Gradient-boosted", f"{base.stem}'s fit unchanged: gradient-boosted", 1)
    model = with_cohort_reference(model, samples)
    MODEL_PATH.write_text(json.dumps(model, indent=2) + "\n")
    log(f"wrote {MODEL_PATH.relative_to(REPO)}: {base.name} with {len(model['cohort_reference']['sessions'])} "
        "TRAIN people as its cohort reference")


def families(samples: list[tuple[dict, dict]]) -> None:
    """TRAIN only: each automation family (and each factor level) left out of the fit in turn,
    its sessions scored by the model fitted without them against the people's out-of-fold
    scores: how well what the model learned of the other families carries to one it never saw,
    and which evidence carries it (the terms and trees with the largest share of its log-odds)."""
    import numpy as np

    import model as fit
    import pipeline

    training = [(label, row) for label, row in samples if not label.get("evaluation_only")]
    people_oof = {}
    oof = pipeline.out_of_fold(training, FOLDS, fold_of=fold_of)
    for (label, row), (_, masked) in zip(training, oof):
        if label["class"] == "human":
            people_oof[label["reference"]] = masked
    reference_model = {"bias": 0.0, "bands": dict(fit.BANDS), "evidence": fit.evidence_table(), "terms": [], "trees": []}
    groups: dict[tuple[str, str], list[int]] = {}
    for index, (label, _) in enumerate(training):
        if label["class"] != "bot":
            continue
        groups.setdefault(("family", f"{label.get('family')}"), []).append(index)
        groups.setdefault(("input", label["input"]), []).append(index)
        for factor, level in (label.get("factors") or {}).items():
            groups.setdefault((factor, str(level)), []).append(index)
    people = np.array(list(people_oof.values()))
    print(f"leave one out on TRAIN ({len(people)} people's sessions out of fold):")
    for (kind, name), members in sorted(groups.items()):
        if len(members) < 5:
            continue
        left_out = set(members)
        fitted, _ = fit.fit_gbdt([s for i, s in enumerate(training) if i not in left_out],
                                 version=f"without-{kind}-{name}", tune=False)
        masked = fit.mask_environment(fitted)
        scores = np.array([fit.log_odds(masked, training[i][1]) - masked["bias"] for i in members])
        carried: dict[str, float] = {}
        for i in members:
            _, parts = fit.contributions(masked, training[i][1])
            for feature, value in parts.items():
                carried[feature] = carried.get(feature, 0.0) + value
        top = sorted(carried.items(), key=lambda item: item[1])[:3]
        print(f"  {kind} {name}: n={len(members)}, AUC {auc(people, scores):.3f}, "
              f"below every person's median {np.mean(scores < np.median(people)):.2f}; carried by "
              + ", ".join(f"{feature} {value / len(members):+.2f}" for feature, value in top))


# A farm as issue 54 measures one: 20 sessions of one family in a survey of at least 100 people.
FARM_SIZE = 20
FARM_MIN_PEOPLE = 100


def farms(samples: list[tuple[dict, dict]], model: Path | None = None, size: int = FARM_SIZE) -> dict:
    """Each automation family (or recorded farm) as a farm: its first `size` sessions scored with
    every person of `samples` as one survey by the product's cohort and model. A farm session is
    *named* when the cohort clusters it; a person is *moved* when the farm changes the person's
    band or clusters the person, against the people scored alone."""
    import corpus_report

    people = [(label, row) for label, row in samples if label["class"] == "human"]
    if len(people) < FARM_MIN_PEOPLE:
        raise SystemExit(f"a farm needs a survey of at least {FARM_MIN_PEOPLE} people; these samples hold {len(people)}")
    alone = score_rows(people, model)
    by_family: dict[str, list[tuple[dict, dict]]] = {}
    for label, row in samples:
        if label["class"] == "bot":
            # A recorded farm (TRAIN_FARMS) by its name, every other session by its family.
            name = f"recorded farm {label['farm']}" if label.get("farm") else corpus_report.family_name(label)
            by_family.setdefault(name, []).append((label, row))
    out = {}
    for family, members in sorted(by_family.items()):
        farm = members[:size]
        scores = score_rows(people + farm, model)
        named = [bool(scores[label["reference"]].get("clustered")) for label, _ in farm]
        moved = [scores[label["reference"]]["scoreBand"] != alone[label["reference"]]["scoreBand"]
                 or bool(scores[label["reference"]].get("clustered")) for label, _ in people]
        out[family] = {"farm": len(farm), "people": len(people), "named": sum(named),
                       "named_rate": corpus_report.rate(named, bool),
                       "people_moved": corpus_report.rate(moved, bool),
                       "moved": sorted(label["person"] for (label, _), m in zip(people, moved) if m),
                       # Each moved person's session: how it moved, and the cohort's finding (in
                       # which modality, the people test's counts), beside how many sessions of
                       # the same person the survey holds.
                       "moved_sessions": [moved_session(label, alone[label["reference"]], scores[label["reference"]],
                                                        people)
                                          for (label, _), m in zip(people, moved) if m],
                       "not_human_like": corpus_report.rate([scores[label["reference"]]["humanScorePercent"]
                                                             for label, _ in farm], lambda v: v < 70.0)}
    return out


def moved_session(label: dict, alone: dict, scored: dict, people: list[tuple[dict, dict]]) -> dict:
    return {"person": label["person"], "reference": label["reference"], "layout": label.get("layout"),
            "band_alone": alone["scoreBand"], "band": scored["scoreBand"], "clustered": bool(scored.get("clustered")),
            "modality": scored.get("cohortModality"), "alike_people": scored.get("cohortAlikePeople"),
            "expected_people": scored.get("cohortExpectedPeople"),
            "same_person_sessions": sum(other["person"] == label["person"] for other, _ in people)}


def print_farms(result: dict) -> None:
    for family, farm in result.items():
        log(f"  {family}: {farm['named']} of {farm['farm']} named, {farm['people_moved']['k']} of "
            f"{farm['people']} people moved, {farm['not_human_like']['k']} of {farm['farm']} not human-like")


def holdout_read(version: str, what: str) -> None:
    """Logs a read of HOLDOUT for a model version before anything of it is read; a second read
    of the same version is refused (a retrain is a new version)."""
    existing = HOLDOUT_LOG.read_text() if HOLDOUT_LOG.exists() else ""
    marker = f"| corpus | {version} |"
    if marker in existing:
        raise SystemExit(f"HOLDOUT of the corpus was read for {version} already ({HOLDOUT_LOG.relative_to(REPO)}): "
                         "a new read needs a new model version")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    if not existing:
        existing = "# Reads of HOLDOUT\n\n| date (UTC) | commit | model | model file sha256 | what was read | reread because |\n|---|---|---|---|---|---|\n"
    entry = f"| {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} | {commit} | corpus | {version} | {what} |\n"
    if "## Reads of the recorded corpus" not in existing:
        existing += ("\n## Reads of the recorded corpus\n\nAppended by `python3 lab/corpus.py evaluate` before it "
                     "reads a HOLDOUT chunk; one read per model version.\n\n"
                     "| date (UTC) | commit | source | model version | what was read |\n|---|---|---|---|---|\n")
    HOLDOUT_LOG.parent.mkdir(parents=True, exist_ok=True)
    HOLDOUT_LOG.write_text(existing + entry)


def evaluate(models: list[Path]) -> None:
    """The one read of HOLDOUT for each model version named: each read logged before anything of
    HOLDOUT is loaded, every session scored with each model as one survey, the report
    (lab/corpus_report.py) written to docs/evaluation/ and the scores kept in the cache."""
    import numpy as np

    import corpus_report

    versions = [json.loads(model.read_text())["version"] for model in models]
    if len(set(versions)) != len(versions):
        raise SystemExit(f"two model files of one version: {versions}")
    manifest = load_manifest()
    chunks = chunks_of(manifest, "holdout")
    if not chunks:
        raise SystemExit("no HOLDOUT chunk is recorded yet")
    # The typist speed groups: the TRAIN people's tertiles (TRAIN only, read before HOLDOUT).
    train_people = [row.get("key_flight_mean_ms") for label, row in corpus_samples(chunks_of(manifest, "train"), None)
                    if label["class"] == "human"]
    cuts = [float(q) for q in np.nanpercentile([v for v in train_people if v is not None], [100 / 3, 200 / 3])]
    sessions = sum(c["sessions"]["human"] + c["sessions"]["bot"] for c in chunks)
    for version in versions:
        holdout_read(version, f"{len(chunks)} HOLDOUT chunks ({', '.join(c['id'] for c in chunks)}), {sessions} sessions")
    samples = corpus_samples(chunks, load(chunks))
    scores = {version: score_rows(samples, model) for version, model in zip(versions, models)}
    result = corpus_report.report(samples, scores, cuts, auc)
    for version, model in zip(versions, models):
        result["models"][version]["farms"] = farms(samples, model)
    result["chunks"] = [c["id"] for c in chunks]
    result["typist_speed_cuts_ms"] = [round(c, 1) for c in cuts]
    folder = REPO / "docs" / "evaluation"
    stem = corpus_report.stem_of(versions)
    written = [corpus_report.write(result, folder, stem)] + corpus_report.plots(samples, scores, folder, auc, stem)
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / f"holdout-{'-'.join(versions)}.json").write_text(
        json.dumps({"scores": scores, "labels": [l for l, _ in samples]}, indent=1))
    for version in versions:
        model = result["models"][version]
        people = model["people"]
        log(f"{version}: people automation-like {people['automation_like']['k']}/{people['automation_like']['n']}, "
            f"human-like {people['human_like']['k']}/{people['human_like']['n']}")
        for family, paths in model["families"].items():
            log(f"  {family}: " + "; ".join(f"{path} n={v['n']} AUC {v['auc']:.3f} not human-like "
                                           f"{v['not_human_like']['rate']:.3f}" for path, v in paths.items()))
        print_farms(model["farms"])
    log("wrote " + ", ".join(str(path.relative_to(REPO)) for path in written))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["plan", "record", "status", "verify", "load", "cv", "train", "reference",
                                         "families", "farms", "evaluate"])
    parser.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="record: the chunk's length at most")
    parser.add_argument("--workers", type=int, default=4, help="record: displays (one browser each) at once")
    parser.add_argument("--split", choices=SPLITS, help="record: this split (default: TRAIN until it is done)")
    parser.add_argument("--only", type=int, default=0, help="record: at most this many sessions (a trial)")
    parser.add_argument("--commit", action="store_true", help="record: commit the chunk once written")
    parser.add_argument("--allow-dirty", action="store_true", help="record: a trial from an uncommitted tree")
    parser.add_argument("--force", action="store_true", help="plan: write it again (only before any chunk)")
    parser.add_argument("--extend", action="store_true",
                        help="plan: append the extension's sessions (EXTENSION) to the fixed plan")
    parser.add_argument("--chunk", action="append", help="load: only these chunks (TRAIN only)")
    parser.add_argument("--smallest", action="store_true", help="load: only the smallest TRAIN chunk (CI)")
    parser.add_argument("--model", type=Path, action="append",
                        help="evaluate: a model file whose version reads HOLDOUT (again for each model to compare); "
                        "farms: the model to score with; reference: the fit to keep")
    args = parser.parse_args()
    if args.step == "plan" and args.extend:
        extend_plan()
    elif args.step == "plan":
        write_plan(args.force)
    elif args.step == "record":
        record_chunk(args.minutes, args.workers, args.split, args.commit, args.allow_dirty, args.only)
    elif args.step == "status":
        status()
    elif args.step == "verify":
        problems = verify()
        for problem in problems:
            print(f"FAIL {problem}")
        if problems:
            raise SystemExit(f"{len(problems)} problems")
        print(f"the corpus holds: {len(load_manifest()['chunks'])} chunks verified")
    elif args.step in ("load", "cv", "train", "reference", "families", "farms"):
        manifest = load_manifest()
        chunks = chunks_of(manifest, "train", args.chunk)
        if not chunks:
            raise SystemExit("no TRAIN chunk is recorded yet")
        if args.smallest:
            chunks = [min(chunks, key=lambda c: sum(f["bytes"] for f in c["files"].values()))]
        started = time.time()
        recomputed = load(chunks)
        samples = corpus_samples(chunks, recomputed)
        scores = score_rows(samples)
        bands = {}
        for label, _ in samples:
            key = (label["class"], scores[label["reference"]]["scoreBand"])
            bands[key] = bands.get(key, 0) + 1
        log(f"{len(samples)} TRAIN sessions loaded, checked and scored with the built-in model in "
            f"{time.time() - started:.0f} s: " + ", ".join(f"{k[0]} {k[1]} {v}" for k, v in sorted(bands.items())))
        # The cohort over all of them as one survey: how many of each class it clustered.
        clustered = {}
        for label, _ in samples:
            key = label["class"]
            total, named = clustered.get(key, (0, 0))
            clustered[key] = (total + 1, named + bool(scores[label["reference"]].get("clustered")))
        log("cohort, all as one survey: " + ", ".join(f"{named} of {total} {cls} clustered"
                                                     for cls, (total, named) in sorted(clustered.items())))
        if args.step == "cv":
            cross_validate(samples)
            log(f"load, score and cv took {time.time() - started:.0f} s")
        elif args.step == "train":
            train(samples)
        elif args.step == "reference":
            if not args.model:
                raise SystemExit("reference needs --model (the fit to keep)")
            reference_only(samples, args.model[0])
        elif args.step == "families":
            families(samples)
        elif args.step == "farms":
            chosen = args.model[0] if args.model else None
            log(f"each family as a farm of at most {FARM_SIZE} among the TRAIN people, "
                f"{chosen.name if chosen else 'built-in model'}:")
            print_farms(farms(samples, chosen))
    elif args.step == "evaluate":
        if not args.model:
            raise SystemExit("evaluate needs --model")
        evaluate(args.model)


if __name__ == "__main__":
    main()
