"""Writes docs/evaluation.md and its plots from HOLDOUT scores the server computed.

The page leads with the acceptance figures, then what automation the model never saw meets:
every level of every generator factor left out of training in turn, behaviour alone (the
environment masked, as an anti-detect browser presents it). Then the people, group by group and
counted by person; the typing swaps; the conversions a real fleet of browsers produces; direct
injection and the red team's automation; and the model itself.

Every human figure is counted by person: each person (or device, for DELBOT) weighs the same,
whatever their number of sessions and variants, and the 95 % intervals resample people with all
their sessions. Thresholds (the score below which 1 % of humans fall) come from TRAIN humans,
never from the HOLDOUT people they are measured on.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import model as fit

BANDS = ["automation-like", "review", "human-like"]
BOOTSTRAP = 1000
RNG = np.random.default_rng(20261127)
FACTORS = ("path", "typing", "pacing", "modality", "driver")
# Factor levels whose sessions carry no pointer path: left out, they must stay out of human-like.
NOT_HUMAN_LEVELS = {("modality", "keyboard"), ("modality", "touch"), ("modality", "paste"), ("typing", "replay")}
POINTER_PATHS = ("bezier", "ghost-cursor", "windmouse", "perlin", "minjerk", "replay")
# Typists are slow or fast by their measured mean keydown-to-keydown interval.
SLOW_TYPIST_MS, FAST_TYPIST_MS = 300.0, 180.0


# ---- statistics -----------------------------------------------------------------------------


def auc(bots: np.ndarray, humans: np.ndarray) -> float:
    """P(a bot scores below a human), ties counting half: the ROC AUC of flagging low scores."""
    bots, humans = np.asarray(bots, dtype=float), np.asarray(humans, dtype=float)
    if len(bots) == 0 or len(humans) == 0:
        return float("nan")
    ordered = np.sort(humans)
    below_or_equal = np.searchsorted(ordered, bots, side="right")
    below = np.searchsorted(ordered, bots, side="left")
    above = len(ordered) - below_or_equal
    return float(np.mean((above + 0.5 * (below_or_equal - below)) / len(ordered)))


def threshold_at(humans: np.ndarray, fpr: float) -> float:
    """The highest threshold (flag scores below it) that flags at most `fpr` of `humans`."""
    humans = np.asarray(humans, dtype=float)
    allowed = math.floor(fpr * len(humans))
    return float(np.partition(humans, allowed)[allowed])


def tpr_at_fpr(bots: np.ndarray, humans: np.ndarray, fpr: float) -> float:
    """Share of bots flagged by the highest threshold that still flags at most `fpr` of
    `humans` (the threshold set on these humans)."""
    bots = np.asarray(bots, dtype=float)
    if len(bots) == 0 or len(humans) == 0:
        return float("nan")
    return float(np.mean(bots < threshold_at(humans, fpr)))


def wilson(successes: int, n: int) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    z = 1.959964
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pct(value: float) -> str:
    return "n/a" if value != value else f"{100 * value:.1f} %"


def interval(point: float, low: float, high: float, percent: bool = True) -> str:
    if point != point:
        return "n/a"
    if percent:
        return f"{pct(point)} [{100 * low:.1f}, {100 * high:.1f}]"
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def verdict(ok: bool) -> str:
    return "yes" if ok else "**no**"


def family_of(label: dict) -> str:
    return label.get("family") or label["generator"]


class People:
    """Human scores grouped by person: a share is each person's share averaged over people, and
    its interval resamples people."""

    def __init__(self, rows: list[tuple[dict, float]]):
        self.by_person: dict[str, list[tuple[dict, float]]] = defaultdict(list)
        for label, percent in rows:
            self.by_person[label["cluster"]].append((label, percent))

    def scores(self, where=lambda label: True) -> np.ndarray:
        return np.array([p for rows in self.by_person.values() for label, p in rows if where(label)])

    def people(self, where=lambda label: True) -> list[str]:
        return [name for name, rows in self.by_person.items() if any(where(label) for label, _ in rows)]

    def share(self, predicate, where=lambda label: True, names=None) -> float:
        names = self.people(where) if names is None else names
        shares = []
        for name in names:
            values = [p for label, p in self.by_person[name] if where(label)]
            if values:
                shares.append(np.mean([predicate(p) for p in values]))
        return float(np.mean(shares)) if shares else float("nan")

    def share_interval(self, predicate, where=lambda label: True) -> tuple[float, float, float, int]:
        names = self.people(where)
        point = self.share(predicate, where, names)
        if not names:
            return point, float("nan"), float("nan"), 0
        values = [self.share(predicate, where, list(RNG.choice(names, size=len(names), replace=True)))
                  for _ in range(BOOTSTRAP)]
        low, high = np.nanpercentile(values, [2.5, 97.5])
        return point, float(low), float(high), len(names)

    def label_share(self, predicate, where=lambda label: True) -> float:
        """As `share`, of a predicate on the sessions' labels."""
        shares = [np.mean([predicate(label) for label, _ in rows if where(label)])
                  for rows in self.by_person.values() if any(where(label) for label, _ in rows)]
        return float(np.mean(shares)) if shares else float("nan")

    def sessions(self, where=lambda label: True) -> int:
        return sum(1 for rows in self.by_person.values() for label, _ in rows if where(label))


def bot_interval(statistic, bots: np.ndarray, humans: People, where=lambda label: True):
    """Point and 95 % interval of statistic(bots, human scores): bots resampled by session,
    humans by person."""
    point = statistic(bots, humans.scores(where))
    names = humans.people(where)
    values = []
    for _ in range(BOOTSTRAP):
        chosen = RNG.choice(names, size=len(names), replace=True) if names else []
        human = np.array([p for n in chosen for label, p in humans.by_person[n] if where(label)])
        values.append(statistic(RNG.choice(bots, size=len(bots), replace=True), human) if len(bots) else float("nan"))
    low, high = np.nanpercentile(values, [2.5, 97.5]) if values else (float("nan"), float("nan"))
    return point, float(low), float(high)


def automation_like(p: float) -> bool:
    return fit.band(p) == "automation-like"


def human_like(p: float) -> bool:
    return fit.band(p) == "human-like"


# ---- groups of people -----------------------------------------------------------------------


def dataset_of(label: dict) -> str:
    return label["source"].split(":", 1)[0]


def judged(features: dict):
    """A session with enough behaviour for a verdict (the model's evidence rule)."""
    return lambda label: not features[label["reference"]]["_too_little"]


LAYOUT_NAMES = {"demo": "the demo survey", "grid": "a long grid page", "text": "a free-text page",
                "phone": "a phone layout"}
TYPING_NAMES = {"cmu-keystroke": "CMU password timing", "aalto-136m": "Aalto free text",
                "hmog-soft": "HMOG soft keyboard"}


def human_groups(features: dict) -> list[tuple[str, object]]:
    """(name, predicate) of every group of people the report has a row for."""
    def flight(label):
        return features[label["reference"]].get("key_flight_mean_ms")

    groups = [
        ("desktop mouse in a browser (SapiMouse)", lambda l: l["device"] == "browser-mouse" and l.get("mode") != "keyboard"),
        ("desktop mouse over remote desktop (Balabit)", lambda l: l["device"] == "desktop-rdp" and l.get("mode") != "keyboard"),
        ("phone touch (HMOG, through DevTools touch)", lambda l: l["device"] == "phone-touch"),
        ("keyboard only (Tab, Space, arrows, Enter)", lambda l: l.get("mode") == "keyboard"),
    ]
    groups += [(f"layout `{layout}` ({name})", lambda l, x=layout: l.get("layout") == x)
               for layout, name in LAYOUT_NAMES.items()]
    groups += [
        (f"slow typists (keys {SLOW_TYPIST_MS:.0f} ms apart or more)",
         lambda l: fit.measured(flight(l)) and flight(l) >= SLOW_TYPIST_MS),
        (f"fast typists (keys {FAST_TYPIST_MS:.0f} ms apart or less)",
         lambda l: fit.measured(flight(l)) and flight(l) <= FAST_TYPIST_MS),
    ]
    groups += [(f"typing: {name}", lambda l, k=kind: l.get("typing") == k) for kind, name in TYPING_NAMES.items()]
    return groups


# ---- leave one level out ------------------------------------------------------------------------


def levels_of(labels: list[dict]) -> list[tuple[str, str]]:
    seen = sorted({(factor, label["factors"][factor]) for label in labels
                   if label["class"] == "bot" and label.get("factors") and not label.get("evaluation_only")
                   for factor in FACTORS if factor in label["factors"]})
    return seen


def has_level(label: dict, factor: str, level: str) -> bool:
    return label["class"] == "bot" and (label.get("factors") or {}).get(factor) == level


def leave_one_level_out(train_samples, holdout_samples, fitter, threshold_of=None) -> dict:
    """For each level of each factor: the whole fit on TRAIN without the bots of that level,
    scoring the HOLDOUT humans and that level's HOLDOUT bots with the environment masked. The
    threshold for 1 % false positives is `threshold_of(subset, fitted)`'s (the pipeline passes
    one from out-of-fold scores of the subset), else the TRAIN humans' own scores'."""
    out = {}
    humans = [(label, row) for label, row in holdout_samples if label["class"] == "human"]
    for factor, level in levels_of([label for label, _ in train_samples]):
        held = [(label, row) for label, row in holdout_samples if has_level(label, factor, level)]
        if not held:
            continue
        subset = [(label, row) for label, row in train_samples if not has_level(label, factor, level)]
        fitted = fitter(subset, f"lolo-without-{factor}-{level}")
        masked = fit.mask_environment(fitted)
        if threshold_of is not None:
            threshold = threshold_of(subset, fitted)
        else:
            threshold = threshold_at(np.array([fit.score(masked, row) for label, row in subset
                                               if label["class"] == "human"]), 0.01)
        out[(factor, level)] = {
            "humans": People([(label, fit.score(masked, row)) for label, row in humans]),
            "bots": np.array([fit.score(masked, row) for _, row in held]),
            "threshold": threshold,
        }
    return out


# ---- plots ------------------------------------------------------------------------------------


def roc_points(bots: np.ndarray, humans: np.ndarray):
    thresholds = np.unique(np.concatenate([humans, bots, [101.0]]))
    fpr = np.array([np.mean(humans < th) for th in thresholds])
    tpr = np.array([np.mean(bots < th) for th in thresholds])
    return fpr, tpr


def plots(lolo: dict, humans: People, bots_by_family: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = [f for f in POINTER_PATHS if ("path", f) in lolo]
    figure, axis = plt.subplots(1, 1, figsize=(7, 5))
    for path in paths:
        scored = lolo[("path", path)]
        human_scores = scored["humans"].scores()
        fpr, tpr = roc_points(scored["bots"], human_scores)
        floor = 0.5 / max(len(human_scores), 1)
        axis.step(np.maximum(fpr, floor), tpr, where="post",
                  label=f"{path} (AUC {auc(scored['bots'], human_scores):.3f})")
    axis.set_xscale("log")
    axis.set_xlim(0.5 / max(len(humans.scores()), 1), 1.0)
    axis.axvline(0.01, color="grey", linestyle="--", linewidth=0.8)
    axis.set_xlabel("human false-positive rate (sessions; log; dashed: 1 %)")
    axis.set_ylabel("bot true-positive rate")
    axis.set_title("Each pointer path left out of training, behaviour alone", fontsize=10)
    axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "roc.png", dpi=100)
    plt.close(figure)

    classes = [("human", humans.scores())] + [(f, np.array(v)) for f, v in sorted(bots_by_family.items())]
    figure, axes = plt.subplots(len(classes), 1, figsize=(7, 1.2 * len(classes)), sharex=True)
    bins = np.linspace(0, 100, 51)
    for axis, (name, values) in zip(np.atleast_1d(axes), classes):
        axis.hist(values, bins=bins, color="tab:green" if name == "human" else "tab:red")
        axis.axvline(30, color="grey", linestyle="--", linewidth=0.8)
        axis.axvline(70, color="grey", linestyle="--", linewidth=0.8)
        axis.set_ylabel(f"{name}\n(n={len(values)})", rotation=0, ha="right", va="center", fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel("humanScorePercent of the shipped model (HOLDOUT; dashed: bands 30 and 70)")
    figure.tight_layout()
    figure.savefig(out / "score-histograms.png", dpi=100)
    plt.close(figure)
    return ["evaluation/roc.png", "evaluation/score-histograms.png"]


# ---- the page ---------------------------------------------------------------------------------

# Features set beside each other for the replay path and the old conversion, and per layout.
COMPARED = ("movements", "movement_peak_speed_ratio", "movement_submovements", "movement_efficiency",
            "fitts_correlation", "press_dwell_mean_ms", "zero_dwell_clicks", "press_offset_spread",
            "input_without_keys", "key_hold_cv", "key_flight_cv", "key_flight_lag1", "tab_focus_fraction",
            "wheels", "duration_s", "touch_taps", "tap_dwell_mean_ms", "swipe_efficiency")


def median_of(rows: list[dict], feature: str) -> float:
    values = [row.get(feature) for row in rows if fit.measured(row.get(feature))]
    return float(np.median(values)) if values else float("nan")


def cell(value: float) -> str:
    if value != value:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def write(labels, scores, features, train_features, model, baseline, docs: Path, command: str,
          recorded_with: str, model_path: str, read_log: str, oof: dict | None = None,
          conversions: list | None = None, refused: list | None = None, threshold_of=None) -> None:
    """docs/evaluation.md and its plots. `oof` holds the TRAIN sessions' out-of-fold log-odds
    (pipeline.py train): the thresholds are theirs. `conversions` are (label, features) of the
    HOLDOUT people's recordings as the old JSON conversion sent them; `refused` the recorded
    sessions refused for late events; `threshold_of(subset, fitted)` a left-out fit's 1 %
    threshold from out-of-fold scores."""
    feature_rows = {f["reference"]: f for f in features if f["reference"] in labels}
    for reference, row in feature_rows.items():
        row["_too_little"] = fit.too_little_behaviour(model, row)
    # The server's scores must be the formula model.py reimplements (the left-out fits use it),
    # with the cohort's adjustment where the run found a cluster (its reason comes first).
    mismatches = [s for s in scores if s["reference"] in feature_rows
                  and abs(fit.cohort_adjusted(model, fit.score(model, feature_rows[s["reference"]]),
                                              list(s["reasons"])) - s["human_score_percent"]) > 0.011]
    if mismatches:
        raise SystemExit(f"{len(mismatches)} server scores differ from model.py's replica")
    reasons_of = {s["reference"]: list(s["reasons"]) for s in scores}
    rows = [(labels[s["reference"]], s["human_score_percent"]) for s in scores if s["reference"] in labels
            and labels[s["reference"]]["class"] in ("human", "bot")]
    humans = People([(label, p) for label, p in rows if label["class"] == "human"])
    bots_by_family: dict[str, list[float]] = defaultdict(list)
    for label, p in rows:
        if label["class"] == "bot":
            bots_by_family[family_of(label)].append(p)
    holdout_samples = [(labels[r], f) for r, f in feature_rows.items() if labels[r]["class"] in ("human", "bot")]
    train_samples = [(labels[f["reference"]], f) for f in train_features
                     if f["reference"] in labels and not labels[f["reference"]].get("evaluation_only")]
    train_by_reference = {label["reference"]: row for label, row in train_samples}
    # The shipped model's 1 % threshold: out-of-fold TRAIN human scores with the shipped bias.
    if oof:
        oof_humans = np.array([fit.percent_of(model, train_by_reference[s["reference"]], oof["bias"] + s["z"])
                               for s in oof["sessions"] if s["reference"] in train_by_reference
                               and labels[s["reference"]]["class"] == "human"])
        threshold_source = f"out-of-fold scores of {len(oof_humans)} TRAIN human sessions ({oof['folds']} folds by person and typist)"
    else:
        oof_humans = np.array([fit.score(model, row) for label, row in train_samples if label["class"] == "human"])
        threshold_source = "in-sample TRAIN human scores"
    shipped_threshold = threshold_at(oof_humans, 0.01)
    lolo = leave_one_level_out([s for s in train_samples if s[0]["class"] == "human" or s[0].get("factors")],
                               holdout_samples, lambda samples, version: fit.fit_gbdt(samples, version)[0],
                               threshold_of)
    is_judged = judged(feature_rows)

    lines: list[str] = []
    add = lines.append
    add("# Scoring quality: evaluation of the human-likeness model")
    add("")
    add(f"Regenerated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` "
        f"(lab/) on sessions recorded by `{recorded_with}`, with the model file "
        f"`{model_path}` (`{model['version']}`) written by `python3 lab/pipeline.py train`. "
        "Every session, people and automation alike, is a real headed Chromium on a virtual display "
        "filling one of four survey layouts through the production embed and collector: people are "
        "their recordings played through the operating system's input path (XTEST; touch through "
        "DevTools, counted apart), automation is bots.js and the red team on the same pages. Every "
        "figure is measured on HOLDOUT: people of the fixed person-level split "
        "(`../shared/datasets/README.md`) and bot sessions of seeds never used in training. The shipped "
        "model's scores are the server's own (a scoring run on the HOLDOUT survey through the API, read "
        "from the lake's `scores`); the left-out fits are scored by `model.py`, the replica of the Rust "
        "formula, checked here against every server score first. HOLDOUT is read once per model "
        f"release, by this report, and each read is logged in `docs/evaluation/holdout-reads.md` ({read_log}).")
    add("")
    add("Human figures are counted by person: each person weighs the same, and the 95 % intervals "
        f"resample people with all their sessions ({BOOTSTRAP} resamples). Bots are resampled by "
        f"session. Thresholds for a 1 % false-positive rate come from {threshold_source}, never from "
        "HOLDOUT; the realised HOLDOUT human rate is shown beside them.")
    add("")

    # What was measured.
    add("## What was measured")
    add("")
    human_labels = [label for label, _ in rows if label["class"] == "human"]
    by_device = Counter(label["device"] for label in human_labels)
    by_layout = Counter(label.get("layout") for label in human_labels)
    add(f"- People: {len(humans.by_person)} HOLDOUT people, {len(human_labels)} sessions "
        f"({', '.join(f'{d} {n}' for d, n in sorted(by_device.items()))}; layouts "
        f"{', '.join(f'{l} {n}' for l, n in sorted(by_layout.items(), key=lambda x: str(x[0])))}; "
        f"{sum(label.get('mode') == 'keyboard' for label in human_labels)} by keyboard alone, "
        f"{sum(str(label.get('variant', '')).startswith('swap') for label in human_labels)} typing swaps).")
    add("- Automation: " + "; ".join(f"{family} {len(values)}" for family, values in sorted(bots_by_family.items())) + ".")
    levels = Counter((factor, label["factors"][factor]) for label, _ in rows
                     if label["class"] == "bot" and label.get("factors") for factor in FACTORS
                     if factor in label["factors"])
    add("- Factor levels of the factorial generator (HOLDOUT sessions): " + "; ".join(
        f"{factor} {', '.join(f'{level} {n}' for (f, level), n in sorted(levels.items()) if f == factor)}"
        for factor in FACTORS if any(f == factor for f, _ in levels)) + ".")
    add("- Not measured: trackpads (no data set here records one with survey-like clicks: SapiMouse does "
        "not say which device its people used) and drawing (DELBOT's human strokes are drags on a "
        "canvas, not movements to a control: they are not replayed, and DELBOT's bot strokes are not "
        "browser sessions).")
    add("")

    # Acceptance.
    add("## Acceptance figures (issue 42)")
    add("")
    add("`met` compares the point estimate with the target; the interval says how far the sample can be trusted.")
    add("")
    add("| figure | target | HOLDOUT value [95 % interval] | people | met |")
    add("|---|---|---|---|---|")
    for name, where in human_groups(feature_rows):
        keep = (lambda label, w=where: w(label) and is_judged(label))
        if not humans.people(keep):
            add(f"| humans, {name}: no session with enough behaviour | - | - | 0 | - |")
            continue
        low = humans.share_interval(automation_like, keep)
        high = humans.share_interval(human_like, keep)
        add(f"| humans, {name}, with enough behaviour: automation-like | at most 1 % | {interval(*low[:3])} | {low[3]} | {verdict(low[0] <= 0.01)} |")
        add(f"| humans, {name}, with enough behaviour: human-like | at least 90 % | {interval(*high[:3])} | {high[3]} | {verdict(high[0] >= 0.90)} |")
    keyboard = (lambda label: label.get("mode") == "keyboard")
    if humans.people(keyboard):
        share = humans.share_interval(lambda p: not automation_like(p), keyboard)
        add(f"| keyboard-only people: not automation-like | at least 90 % | {interval(*share[:3])} | {share[3]} | {verdict(share[0] >= 0.90)} |")
    # Typing swaps: the text layout's sessions recorded twice, once per typing source.
    pairs = defaultdict(dict)
    for label, p in rows:
        if label["class"] == "human" and label.get("layout") == "text" and label.get("mode") == "mouse":
            pairs[label.get("base", label["reference"])][label.get("typing")] = (label, p)
    pairs = {base: typed for base, typed in pairs.items() if len(typed) == 2}
    if pairs:
        rates = {}
        for kind in sorted({k for typed in pairs.values() for k in typed}):
            paired = People([typed[kind] for typed in pairs.values() if kind in typed])
            rates[kind] = paired.share(automation_like)
        spread = max(rates.values()) - min(rates.values())
        add(f"| typing swaps (the text layout typed by each source, the same movements): automation-like, "
            f"largest difference | at most 0.5 points | {100 * spread:.2f} points "
            f"({', '.join(f'{TYPING_NAMES.get(k, k)} {pct(r)}' for k, r in rates.items())}; {len(pairs)} pairs) | - | "
            f"{verdict(spread <= 0.005)} |")
    recorded = len(human_labels) + sum(len(v) for v in bots_by_family.values())
    late = [label for label in (refused or []) if str(label.get("refused", "")).startswith("late")]
    add(f"| every recorded session (people and automation): `late_event_fraction` 0 | every one | "
        f"{len(late)} refused for late events; the {recorded} HOLDOUT sessions here all 0 | - | "
        f"{verdict(all((feature_rows[label['reference']].get('late_event_fraction') or 0) == 0 for label, _ in rows if family_of(label) != 'injection'))} |")
    too_little = [(label, p) for label, p in rows if feature_rows[label["reference"]]["_too_little"]]
    hits = sum(human_like(p) for _, p in too_little)
    add(f"| sessions with too little behaviour (people and automation): human-like | never | {hits} of {len(too_little)} | - | {verdict(hits == 0)} |")
    add("")

    # People.
    add("## People, group by group")
    add("")
    add("Shares by person. `enough behaviour` is the model's evidence rule (docs/scoring.md); a session "
        "with too little is held in review, so it is counted apart.")
    add("")
    add("| group | people | sessions | too little behaviour | automation-like | review | human-like (of those with enough) |")
    add("|---|---|---|---|---|---|---|")
    for name, where in [("everyone", lambda label: True)] + human_groups(feature_rows):
        if not humans.people(where):
            continue
        keep = (lambda label, w=where: w(label) and is_judged(label))
        add(f"| {name} | {len(humans.people(where))} | {humans.sessions(where)} | "
            f"{pct(humans.label_share(lambda label: not is_judged(label), where))} | "
            f"{pct(humans.share(automation_like, where))} | "
            f"{pct(humans.share(lambda p: fit.band(p) == 'review', where))} | {pct(humans.share(human_like, keep))} |")
    add("")

    # Features per layout.
    add("## Features per layout")
    add("")
    add("Medians over HOLDOUT sessions (people by session, not by person), people beside automation, on "
        "each layout: how much behaviour each page draws out, and where people and bots sit.")
    add("")
    shown = [f for f in COMPARED if any(fit.measured(row.get(f)) for row in feature_rows.values())]
    add("| layout | who | sessions | " + " | ".join(f"`{f}`" for f in shown) + " |")
    add("|---|---|---|" + "---|" * len(shown))
    for layout in LAYOUT_NAMES:
        for who in ("human", "bot"):
            chosen = [feature_rows[label["reference"]] for label, _ in rows
                      if label["class"] == who and label.get("layout") == layout]
            if chosen:
                add(f"| {layout} | {'people' if who == 'human' else 'automation'} | {len(chosen)} | "
                    + " | ".join(cell(median_of(chosen, f)) for f in shown) + " |")
    add("")

    # The replay path against the old conversion.
    if conversions:
        add("## What the replay path changed")
        add("")
        add("Each HOLDOUT person's sessions through the replay path (their recorded movements retargeted onto "
            "the layouts' controls, played through XTEST, typed by a real typist) beside the same person's "
            "recordings as the harness used to send them (humans.py's `embed` conversion posted as JSON, "
            "synthetic think pauses and typing, no page). Medians per person.")
        add("")
        compared = ("movements", "movement_peak_speed_ratio", "movement_efficiency", "movement_submovements",
                    "press_dwell_mean_ms", "zero_dwell_clicks", "press_offset_spread", "key_hold_cv",
                    "key_flight_lag1", "duration_s")
        add("| person | path | sessions | " + " | ".join(f"`{f}`" for f in compared) + " |")
        add("|---|---|---|" + "---|" * len(compared))
        old_by_person = defaultdict(list)
        for label, row in conversions:
            old_by_person[label["person"]].append(row)
        for person in sorted(humans.by_person):
            replayed = [feature_rows[label["reference"]] for label, _ in humans.by_person[person]
                        if label.get("mode") == "mouse"]
            if not replayed or person not in old_by_person:
                continue
            for path, chosen in (("replay", replayed), ("old conversion", old_by_person[person])):
                add(f"| {person} | {path} | {len(chosen)} | " + " | ".join(cell(median_of(chosen, f)) for f in compared) + " |")
        add("")

    # Leave one level out, in full.
    add("## Every factor level left out of training")
    add("")
    add("For each level of each factor of the factorial generator: the whole fit (`model.fit_gbdt`) on "
        "TRAIN without that level's sessions, then that level's HOLDOUT sessions against the HOLDOUT "
        "people, every environment term masked. A bot is flagged when its score is below the threshold "
        "under which 1 % of the left-out fit's TRAIN humans fall (out of fold); `human FPR` is how many "
        "HOLDOUT people that threshold flags (by person).")
    add("")
    add("| factor | level left out | sessions | ROC AUC | TPR at the 1 % threshold | human FPR | automation-like | not human-like |")
    add("|---|---|---|---|---|---|---|---|")
    for (factor, level), scored in lolo.items():
        bots = scored["bots"]
        a = bot_interval(auc, bots, scored["humans"])
        tpr = float(np.mean(bots < scored["threshold"]))
        fpr = scored["humans"].share(lambda p, th=scored["threshold"]: p < th)
        add(f"| {factor} | {level} | {len(bots)} | {interval(*a, percent=False)} | {pct(tpr)} | {pct(fpr)} | "
            f"{pct(float(np.mean([automation_like(p) for p in bots])))} | {pct(float(np.mean([not human_like(p) for p in bots])))} |")
    add("")
    paths = plots(lolo, humans, bots_by_family, docs / "evaluation")
    add(f"![ROC curves, each pointer path left out, logarithmic false-positive axis]({paths[0]})")
    add("")

    # Bots with the shipped model.
    add("## The shipped model on every family")
    add("")
    add("Trained on every TRAIN factor level; these rows say how it does on kinds of automation it has seen "
        "(in other seeds), except `injection` (people's recordings posted as JSON) and `redteam:*`, which no "
        f"model ever trains on. The threshold for TPR is the shipped model's 1 % threshold ({shipped_threshold:.2f}, "
        f"from out-of-fold TRAIN people); it flags {pct(humans.share(lambda p: p < shipped_threshold))} of "
        "HOLDOUT people.")
    add("")
    add("| family | sessions | ROC AUC | TPR at 1 % | automation-like | review | human-like |")
    add("|---|---|---|---|---|---|---|")
    for family, values in sorted(bots_by_family.items()):
        values = np.array(values)
        tally = Counter(fit.band(v) for v in values)
        add(f"| {family} | {len(values)} | {auc(values, humans.scores()):.3f} | {pct(float(np.mean(values < shipped_threshold)))} | "
            + " | ".join(pct(tally[b] / len(values)) for b in BANDS) + " |")
    add("")
    add(f"![score histograms]({paths[1]})")
    add("")
    add("Example reasons (the first HOLDOUT session of each kind, as the scores table holds them):")
    add("")
    seen = set()
    for label, p in rows:
        kind = f"people {label['device']} on {label.get('layout')}" if label["class"] == "human" else family_of(label)
        if kind in seen:
            continue
        seen.add(kind)
        add(f"- {kind}: {p:.2f} ({fit.band(p)}): " + "; ".join(f"`{r}`" for r in reasons_of.get(label["reference"], [])))
    add("")

    # The model.
    add("## The model")
    add("")
    effects = defaultdict(float)
    for _, row in holdout_samples:
        for feature, effect in fit.contributions(model, row)[1].items():
            effects[feature] += abs(effect)
    trees = model.get("trees", [])
    per_modality = Counter(tree.get("modality") for tree in trees)
    add(f"`{model['version']}`: bias {model['bias']} (out-of-fold), {len(model['terms'])} terms, {len(trees)} trees "
        f"({', '.join(f'{m} {n}' for m, n in per_modality.items())}; depth at most 3), bands "
        f"{model['bands']['review_from']:g} / {model['bands']['human_from']:g}. Evidence: "
        + "; ".join(f"{e['modality']} at least {e['minimum']:g} {e['label']}"
                    + (f" to speak, {e['human_minimum']:g} to decide human-like" if "human_minimum" in e else "")
                    + ("" if e["sufficient"] else " (never decides alone)")
                    for e in model.get("evidence", [])) + ".")
    add("")
    add("| feature | mean absolute contribution on HOLDOUT (log-odds) |")
    add("|---|---|")
    for feature, total in sorted(effects.items(), key=lambda item: -item[1])[:30]:
        add(f"| {feature} | {total / max(len(holdout_samples), 1):.3f} |")
    add("")
    add("Terms: " + ", ".join(f"`{t['feature']}` {t['weight']:+g}" for t in model["terms"]) + ".")
    add("")
    add("## Against the previous model")
    add("")
    add(f"The same HOLDOUT sessions scored by `{baseline['version']}` (scored with the replica; shares by person):")
    add("")
    add("| model | humans automation-like | humans human-like | " + " | ".join(f"{f} AUC" for f in sorted(bots_by_family)) + " |")
    add("|---|---|---|" + "---|" * len(bots_by_family))
    for candidate in (baseline, model):
        scored = [(label, fit.score(candidate, row)) for label, row in holdout_samples]
        people = People([(label, p) for label, p in scored if label["class"] == "human"])
        by_family = defaultdict(list)
        for label, p in scored:
            if label["class"] == "bot":
                by_family[family_of(label)].append(p)
        add(f"| {candidate['version']} | {pct(people.share(automation_like))} | {pct(people.share(human_like))} | "
            + " | ".join(f"{auc(np.array(by_family[f]), people.scores()):.3f}" for f in sorted(bots_by_family)) + " |")
    add("")
    sources = Path(__file__).resolve().parent / "evaluation-sources.md"
    # The corpus's table of what differs between the classes and is not behaviour (issue 53),
    # kept beside the corpus and carried into every regenerated report.
    differences = Path(__file__).resolve().parent / "corpus" / "differences.md"
    (docs / "evaluation.md").write_text("\n".join(lines) + "\n" + differences.read_text() + "\n"
                                        + sources.read_text())
