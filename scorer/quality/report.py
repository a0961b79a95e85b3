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


def human_groups(features: dict) -> list[tuple[str, object]]:
    """(name, predicate) of every group of people the report has a row for."""
    def flight(label):
        return features[label["reference"]].get("key_flight_mean_ms")

    groups = [
        ("desktop mouse in a browser (SapiMouse)", lambda l: l["device"] == "browser-mouse"),
        ("desktop mouse over remote desktop (Balabit)", lambda l: l["device"] == "desktop-rdp"),
        ("desktop mouse, drawing (DELBOT pc)", lambda l: l["device"] == "pc-mouse"),
        ("trackpad, drawing (DELBOT)", lambda l: l["device"] == "touchpad"),
        ("virtual machine, drawing (DELBOT)", lambda l: l["device"] == "virtual-machine"),
        ("phone touch (HMOG)", lambda l: l["device"] == "phone-touch" and dataset_of(l) == "hmog"),
        ("phone touch, drawing (DELBOT)", lambda l: l["device"] == "phone-touch" and dataset_of(l) != "hmog"),
        (f"slow typists (keys {SLOW_TYPIST_MS:.0f} ms apart or more)",
         lambda l: fit.measured(flight(l)) and flight(l) >= SLOW_TYPIST_MS),
        (f"fast typists (keys {FAST_TYPIST_MS:.0f} ms apart or less)",
         lambda l: fit.measured(flight(l)) and flight(l) <= FAST_TYPIST_MS),
    ]
    for kind in ("cmu", "aalto", "synthetic", "soft", "none"):
        groups.append((f"typing: {kind}", lambda l, k=kind: l.get("typing") == k))
    return groups


# ---- leave one level out ------------------------------------------------------------------------


def levels_of(labels: list[dict]) -> list[tuple[str, str]]:
    seen = sorted({(factor, label["factors"][factor]) for label in labels
                   if label["class"] == "bot" and label.get("factors") and not label.get("evaluation_only")
                   for factor in FACTORS if factor in label["factors"]})
    return seen


def has_level(label: dict, factor: str, level: str) -> bool:
    return label["class"] == "bot" and (label.get("factors") or {}).get(factor) == level


def leave_one_level_out(train_samples, holdout_samples, fitter) -> dict:
    """For each level of each factor: the whole fit on TRAIN without the bots of that level,
    scoring the HOLDOUT humans and that level's HOLDOUT bots with the environment masked, and
    the TRAIN humans (the threshold for 1 % false positives is theirs)."""
    out = {}
    humans = [(label, row) for label, row in holdout_samples if label["class"] == "human"]
    train_humans = [row for label, row in train_samples if label["class"] == "human"]
    for factor, level in levels_of([label for label, _ in train_samples]):
        held = [(label, row) for label, row in holdout_samples if has_level(label, factor, level)]
        if not held:
            continue
        subset = [(label, row) for label, row in train_samples if not has_level(label, factor, level)]
        masked = fit.mask_environment(fitter(subset, f"lolo-without-{factor}-{level}"))
        out[(factor, level)] = {
            "humans": People([(label, fit.score(masked, row)) for label, row in humans]),
            "bots": np.array([fit.score(masked, row) for _, row in held]),
            "threshold": threshold_at(np.array([fit.score(masked, row) for row in train_humans]), 0.01),
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


def write(labels, scores, features, train_features, model, baseline, docs: Path, command: str,
          recorded_with: str, model_path: str, read_log: str) -> None:
    feature_rows = {f["reference"]: f for f in features if f["reference"] in labels}
    for reference, row in feature_rows.items():
        row["_too_little"] = fit.too_little_behaviour(model, row)
    # The server's scores must be the formula model.py reimplements (the left-out fits use it).
    mismatches = [s for s in scores if s["reference"] in feature_rows
                  and abs(fit.score(model, feature_rows[s["reference"]]) - s["human_score_percent"]) > 0.011]
    if mismatches:
        raise SystemExit(f"{len(mismatches)} server scores differ from model.py's replica")
    reasons_of = {s["reference"]: list(s["reasons"]) for s in scores}
    rows = [(labels[s["reference"]], s["human_score_percent"]) for s in scores if s["reference"] in labels]
    humans = People([(label, p) for label, p in rows if label["class"] == "human"])
    bots_by_family: dict[str, list[float]] = defaultdict(list)
    for label, p in rows:
        if label["class"] == "bot":
            bots_by_family[family_of(label)].append(p)
    holdout_samples = [(labels[r], f) for r, f in feature_rows.items()]
    train_samples = [(labels[f["reference"]], f) for f in train_features
                     if f["reference"] in labels and not labels[f["reference"]].get("evaluation_only")]
    train_human_scores = np.array([fit.score(model, row) for label, row in train_samples if label["class"] == "human"])
    shipped_threshold = threshold_at(train_human_scores, 0.01)
    lolo = leave_one_level_out([s for s in train_samples if s[0]["class"] == "human" or s[0].get("factors")],
                               holdout_samples, lambda samples, version: fit.fit_gbdt(samples, version)[0])
    variants = sorted({label.get("variant", "embed") for label, _ in rows if label["class"] == "human"},
                      key=lambda v: (v != "embed", v.startswith("typing-"), v))
    conversions = [v for v in variants if not v.startswith("typing-")]
    is_judged = judged(feature_rows)

    lines: list[str] = []
    add = lines.append
    add("# Scoring quality: evaluation of the human-likeness model")
    add("")
    add(f"Regenerated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` "
        f"(scorer/quality/) on sessions recorded by `{recorded_with}`, with the model file "
        f"`{model_path}` (`{model['version']}`) written by `python3 scorer/quality/pipeline.py train`. "
        "Every figure is measured on HOLDOUT: people of the fixed person-level split "
        "(`../shared/datasets/README.md`; DELBOT by device) in every conversion variant, and bot "
        "sessions of seeds never used in training. The shipped model's scores are the server's own "
        "(a scoring run on the HOLDOUT survey through the API, read from the lake's `scores`); the "
        "left-out fits are scored by `model.py`, the replica of the Rust formula, checked here "
        "against every server score first. HOLDOUT is read once per model release, by this report, "
        f"and each read is logged in `docs/evaluation/holdout-reads.md` ({read_log}).")
    add("")
    add("Human figures are counted by person: each person (or DELBOT device) weighs the same, and the "
        f"95 % intervals resample people with all their sessions and variants ({BOOTSTRAP} resamples). "
        "Bots are resampled by session. Thresholds for a 1 % false-positive rate are set on TRAIN "
        "humans' scores and then applied to HOLDOUT; the realised HOLDOUT human rate is shown beside them.")
    add("")

    # What was measured.
    add("## What was measured")
    add("")
    human_labels = [label for label, _ in rows if label["class"] == "human"]
    by_device = Counter((label["device"], dataset_of(label)) for label in human_labels)
    add(f"- Humans: {len(humans.by_person)} people or devices, "
        f"{len({label.get('base') for label in human_labels})} recorded sessions, {len(human_labels)} sessions "
        f"with their variants ({', '.join(f'{d} from {s} {n}' for (d, s), n in sorted(by_device.items()))}); "
        f"conversion variants {', '.join(conversions)}; typing swaps {', '.join(v for v in variants if v.startswith('typing-')) or 'none'}.")
    add("- Bots: " + "; ".join(f"{family} {len(values)}" for family, values in sorted(bots_by_family.items())) + ".")
    levels = Counter((factor, label["factors"][factor]) for label, _ in rows
                     if label["class"] == "bot" and label.get("factors") for factor in FACTORS
                     if factor in label["factors"])
    add("- Factor levels of the factorial generator (HOLDOUT sessions): " + "; ".join(
        f"{factor} {', '.join(f'{level} {n}' for (f, level), n in sorted(levels.items()) if f == factor)}"
        for factor in FACTORS if any(f == factor for f, _ in levels)) + ".")
    add("")

    # Acceptance.
    add("## Acceptance figures (issue 35)")
    add("")
    add("`met` compares the point estimate with the target; the interval says how far the sample can be trusted.")
    add("")
    add("| figure | target | HOLDOUT value [95 % interval] | people | met |")
    add("|---|---|---|---|---|")
    for name, where in human_groups(feature_rows):
        keep = (lambda label, w=where: w(label) and is_judged(label))
        if not humans.people(keep):
            continue
        low = humans.share_interval(automation_like, keep)
        high = humans.share_interval(human_like, keep)
        add(f"| humans, {name}, with enough behaviour: automation-like | at most 1 % | {interval(*low[:3])} | {low[3]} | {verdict(low[0] <= 0.01)} |")
        add(f"| humans, {name}, with enough behaviour: human-like | at least 90 % | {interval(*high[:3])} | {high[3]} | {verdict(high[0] >= 0.90)} |")
    for variant in conversions:
        keep = (lambda label, v=variant: label.get("variant", "embed") == v and is_judged(label))
        low = humans.share_interval(automation_like, keep)
        high = humans.share_interval(human_like, keep)
        add(f"| humans, variant `{variant}`, with enough behaviour: automation-like | at most 1 % | {interval(*low[:3])} | {low[3]} | {verdict(low[0] <= 0.01)} |")
        add(f"| humans, variant `{variant}`, with enough behaviour: human-like | at least 90 % | {interval(*high[:3])} | {high[3]} | {verdict(high[0] >= 0.90)} |")
    too_little = [(label, p) for label, p in rows if feature_rows[label["reference"]]["_too_little"]]
    hits = sum(human_like(p) for _, p in too_little)
    add(f"| sessions with too little behaviour (humans and bots): human-like | never | {hits} of {len(too_little)} | - | {verdict(hits == 0)} |")
    for (factor, level), scored in lolo.items():
        if (factor, level) in NOT_HUMAN_LEVELS:
            not_human = float(np.mean([not human_like(p) for p in scored["bots"]]))
            low, high = wilson(int(round(not_human * len(scored["bots"]))), len(scored["bots"]))
            add(f"| {factor} `{level}` left out, behaviour alone: not human-like | at least 95 % | "
                f"{pct(not_human)} [Wilson {100 * low:.1f}, {100 * high:.1f}] | - | {verdict(not_human >= 0.95)} |")
        if factor == "path" and level in POINTER_PATHS:
            a = bot_interval(auc, scored["bots"], scored["humans"])
            tpr = float(np.mean(scored["bots"] < scored["threshold"]))
            add(f"| path `{level}` left out, behaviour alone: ROC AUC | at least 0.95 | {interval(*a, percent=False)} | - | {verdict(a[0] >= 0.95)} |")
            add(f"| path `{level}` left out, behaviour alone: TPR at 1 % TRAIN-human FPR | at least 80 % | {pct(tpr)} | - | {verdict(tpr >= 0.80)} |")
    swaps = [v for v in variants if v.startswith("typing-") and not v.startswith("typing-iki")]
    if swaps:
        rates = {v: humans.share(automation_like, lambda label, v=v: label.get("variant") == v and is_judged(label))
                 for v in swaps}
        spread = max(rates.values()) - min(rates.values())
        add(f"| typing swaps: humans automation-like, largest difference between sources | at most 0.5 points | "
            f"{100 * spread:.2f} points ({', '.join(f'{v} {pct(r)}' for v, r in rates.items())}) | - | {verdict(spread <= 0.005)} |")
    for v in (v for v in variants if v.startswith("typing-iki")):
        share = humans.share(human_like, lambda label, v=v: label.get("variant") == v and is_judged(label))
        add(f"| typing swap `{v}` (humans whose keys are {v.removeprefix('typing-iki')} ms apart): human-like | at least 90 % | {pct(share)} | - | {verdict(share >= 0.90)} |")
    metronome = [p for label, p in rows if (label.get("factors") or {}).get("typing") == "metronome"]
    if metronome:
        flagged = float(np.mean([not human_like(p) for p in metronome]))
        add(f"| metronome typing (shipped model): not human-like | at least 95 % | {pct(flagged)} of {len(metronome)} | - | {verdict(flagged >= 0.95)} |")
    add("")

    # Leave one level out, in full.
    add("## Every factor level left out of training")
    add("")
    add("For each level of each factor of the factorial generator: the whole fit (`model.fit_gbdt`) on "
        "TRAIN without that level's sessions, then that level's HOLDOUT sessions against the HOLDOUT "
        "people, every environment term masked. A bot is flagged when its score is below the threshold "
        "under which 1 % of TRAIN humans fall; `human FPR` is how many HOLDOUT people that threshold "
        "flags (by person).")
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

    # Conversions and swaps.
    add("## The same people through other conversions and other typists")
    add("")
    add("Each HOLDOUT session in every conversion variant (humans.py), and with its typing swapped "
        "(`typing-*`: the same recording, the `embed` conversion, the answers typed by another source). "
        "The change is each session's score minus its `embed` score.")
    add("")
    add("| variant | sessions | automation-like | human-like (enough behaviour) | median change | 99th percentile absolute change |")
    add("|---|---|---|---|---|---|")
    reference = {label["base"]: p for label, p in rows if label["class"] == "human" and label.get("variant") == "embed"}
    for variant in variants:
        where = (lambda label, v=variant: label.get("variant", "embed") == v)
        delta = np.array([p - reference[label["base"]] for label, p in rows if label["class"] == "human"
                          and label.get("variant") == variant and label["base"] in reference])
        cells = ("-", "-") if variant == "embed" or not len(delta) else (
            f"{np.median(delta):+.2f}", f"{np.percentile(np.abs(delta), 99):.2f}")
        add(f"| {variant} | {humans.sessions(where)} | {pct(humans.share(automation_like, where))} | "
            f"{pct(humans.share(human_like, lambda label, w=where: w(label) and is_judged(label)))} | {cells[0]} | {cells[1]} |")
    add("")

    # Bots with the shipped model.
    add("## The shipped model on every family")
    add("")
    add("Trained on every TRAIN factor level; these rows say how it does on kinds of automation it has seen "
        "(in other seeds), except `injection` and `redteam:*`, which no model ever trains on. The "
        f"threshold for TPR is the shipped model's 1 % TRAIN-human threshold ({shipped_threshold:.2f}).")
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
    shown = set()
    for label, p in rows:
        kind = "human " + label["device"] if label["class"] == "human" else family_of(label)
        if kind in shown:
            continue
        shown.add(kind)
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
    add(f"`{model['version']}`: bias {model['bias']}, {len(model['terms'])} terms, {len(trees)} trees "
        f"({', '.join(f'{m} {n}' for m, n in per_modality.items())}; depth at most 3), bands "
        f"{model['bands']['review_from']:g} / {model['bands']['human_from']:g}. Evidence: "
        + "; ".join(f"{e['modality']} at least {e['minimum']:g} {e['label']}" + ("" if e["sufficient"] else " (never decides alone)")
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
    (docs / "evaluation.md").write_text("\n".join(lines) + "\n" + sources.read_text())
