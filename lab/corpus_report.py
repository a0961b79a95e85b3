"""The report of a HOLDOUT read of the recorded corpus: models side by side on the same sessions.

`python3 lab/corpus.py evaluate --model A.json --model B.json` logs one read per model version
(docs/evaluation/holdout-reads.md) before anything of HOLDOUT is loaded, scores every HOLDOUT
session with each model as one survey (the product's cohort and model, `telltale
score-features`), and hands the scores here. What comes out is aggregates only (rates with
their intervals, AUCs, the reasons given to people scored `automation-like` with the data set's
public subject name): `docs/evaluation/corpus-holdout*.json` (`stem_of`) and two plots beside each.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

AUTOMATION_BELOW = 30.0
HUMAN_FROM = 70.0


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    """The 95 % Wilson interval of a rate of k in n."""
    if n == 0:
        return [float("nan"), float("nan")]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def rate(values: list[float], test) -> dict:
    k = sum(1 for v in values if test(v))
    return {"k": k, "n": len(values), "rate": round(k / len(values), 4) if values else None,
            "interval": wilson(k, len(values))}


def speed_of(row: dict, cuts: list[float]) -> str:
    """A typist's speed by the mean time between keys: the TRAIN people's tertiles."""
    flight = row.get("key_flight_mean_ms")
    if flight is None or not math.isfinite(flight):
        return "no typing"
    if flight < cuts[0]:
        return "fast typist"
    return "middle typist" if flight < cuts[1] else "slow typist"


def people_groups(label: dict, row: dict, cuts: list[float]) -> dict[str, str]:
    return {
        "layout": label.get("layout") or "?",
        "device": label.get("device") or "?",
        "input path": label["input"],
        "typing source": (label.get("typing") or "none"),
        "typist speed": speed_of(row, cuts),
    }


def family_name(label: dict) -> str:
    kind = label.get("kind")
    if kind == "redteam":
        return f"red team: {label.get('family') or label.get('generator')}"
    return label.get("family") or kind


def report(samples: list[tuple[dict, dict]], scores: dict[str, dict[str, dict]], cuts: list[float],
           auc) -> dict:
    """`scores`: model version -> reference -> `score-features` line."""
    out: dict = {"sessions": len(samples), "models": {}}
    people = [(label, row) for label, row in samples if label["class"] == "human"]
    bots = [(label, row) for label, row in samples if label["class"] == "bot"]
    out["people"] = {"sessions": len(people), "people": len({label["person"] for label, _ in people})}
    out["automation"] = {"sessions": len(bots)}
    for version, by_reference in scores.items():
        score = lambda label: by_reference[label["reference"]]["humanScorePercent"]  # noqa: E731
        every_person = [score(label) for label, _ in people]
        model: dict = {
            "people": {
                "automation_like": rate(every_person, lambda v: v < AUTOMATION_BELOW),
                "human_like": rate(every_person, lambda v: v >= HUMAN_FROM),
            },
            "people_groups": {},
            "families": {},
            "by_input": {},
            "people_automation_like": [],
            "clustered": {"people": sum(bool(by_reference[l["reference"]].get("clustered")) for l, _ in people),
                          "automation": {}},
        }
        groups: dict[tuple[str, str], list[float]] = {}
        for label, row in people:
            for kind, level in people_groups(label, row, cuts).items():
                groups.setdefault((kind, level), []).append(score(label))
        for (kind, level), values in sorted(groups.items()):
            model["people_groups"].setdefault(kind, {})[level] = {
                "automation_like": rate(values, lambda v: v < AUTOMATION_BELOW),
                "human_like": rate(values, lambda v: v >= HUMAN_FROM),
            }
        families: dict[tuple[str, str], list[tuple[float, bool]]] = {}
        for label, _ in bots:
            line = by_reference[label["reference"]]
            entry = (line["humanScorePercent"], bool(line.get("clustered")))
            families.setdefault((family_name(label), label["input"]), []).append(entry)
            families.setdefault((family_name(label), "every path"), []).append(entry)
            families.setdefault(("every family", label["input"]), []).append(entry)
        for (family, path), entries in sorted(families.items()):
            values = [v for v, _ in entries]
            model["families"].setdefault(family, {})[path] = {
                "n": len(values),
                "auc": round(auc(every_person, values), 4),
                "not_human_like": rate(values, lambda v: v < HUMAN_FROM),
                "clustered": sum(c for _, c in entries),
            }
        for label, _ in people:
            line = by_reference[label["reference"]]
            if line["humanScorePercent"] < AUTOMATION_BELOW:
                model["people_automation_like"].append({
                    "person": label["person"], "layout": label.get("layout"), "device": label.get("device"),
                    "score": line["humanScorePercent"], "reasons": line.get("reasons", [])})
        out["models"][version] = model
    return out


def plots(samples: list[tuple[dict, dict]], scores: dict[str, dict[str, dict]], folder: Path, auc,
          stem: str = "corpus-holdout") -> list[Path]:
    """Score histograms (people, automation through each path) and ROC curves of every model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    versions = list(scores)
    fig, axes = plt.subplots(1, len(versions), figsize=(5 * len(versions), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    bins = np.linspace(0, 100, 21)
    for ax, version in zip(axes, versions):
        by = scores[version]
        for name, test in (("people", lambda l: l["class"] == "human"),
                           ("automation, XTEST", lambda l: l["class"] == "bot" and l["input"] == "xtest"),
                           ("automation, DevTools", lambda l: l["class"] == "bot" and l["input"] == "devtools")):
            values = [by[l["reference"]]["humanScorePercent"] for l, _ in samples if test(l)]
            ax.hist(values, bins=bins, histtype="step", linewidth=1.6, label=f"{name} ({len(values)})",
                    weights=np.full(len(values), 1 / max(1, len(values))))
        ax.axvline(AUTOMATION_BELOW, color="grey", linestyle=":")
        ax.axvline(HUMAN_FROM, color="grey", linestyle=":")
        ax.set_title(f"{version} on the corpus's HOLDOUT")
        ax.set_xlabel("human-likeness score")
    axes[0].set_ylabel("share of the group's sessions")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = folder / f"{stem}-scores.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    for version in versions:
        by = scores[version]
        people = np.array([by[l["reference"]]["humanScorePercent"] for l, _ in samples if l["class"] == "human"])
        bots = np.array([by[l["reference"]]["humanScorePercent"] for l, _ in samples if l["class"] == "bot"])
        thresholds = np.unique(np.concatenate([people, bots, [101.0]]))
        fpr = [np.mean(people < t) for t in thresholds]
        tpr = [np.mean(bots < t) for t in thresholds]
        ax.plot(fpr, tpr, label=f"{version} (AUC {auc(list(people), list(bots)):.3f})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
    ax.set_xlabel("people scored below the threshold")
    ax.set_ylabel("automation scored below the threshold")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = folder / f"{stem}-roc.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def stem_of(versions: list[str]) -> str:
    """The report's file names: `corpus-holdout` for the first read (telltale-v4 and v5 side by
    side), the versions' names after it for each later one, so no read overwrites another's."""
    return "corpus-holdout" if versions == ["telltale-v4", "telltale-v5"] else "corpus-holdout-" + "-".join(versions)


def write(result: dict, folder: Path, stem: str = "corpus-holdout") -> Path:
    path = folder / f"{stem}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path
