"""Run a committed suite of models of two or more classes (issue 39, item 4).

The suite file (``benchmarks/suites/many-classes-7.json``) names the kinds of
:mod:`lab.synth.many_classes`, the training seeds, the target sites (a mechanism and a class mix
each), the answers K and the moments the reviewer comes. Per kind and training seed this script
draws the training site and the target sites, trains a source model with ``f2tta train-source``,
runs every target site with ``f2tta run`` (the default method, as shipped) and reviews it through
the product's :class:`engine.run.review.SiteReview` with a reviewer who knows the labels:

* after the folder (moment 1): every image processed, the run complete, K answers;
* mid-run (moment < 1): the reviewer comes once that share of the site's images is processed,
  answers K at once, and the rest of the folder arrives after (decided by the rules the answers
  put in use where their certificates cover them; shown provisionally elsewhere).

A unit is (kind, training seed, site). Per moment and K it prints every unit and then the pooled
endpoints: the source model's errors removed (fixed less broken over the source model's errors),
the median unit's share, the mean change in points, units harmed (broken > fixed), promotions and
false promotions (a promotion whose disagreements are not better decided), answers used; mid-run
also what was shown while the folder arrived (online). ``--out`` keeps them as JSON::

    PYTHONPATH=. .venv/bin/python scripts/many_classes_suite.py benchmarks/suites/many-classes-7.json \
        --work WORK --out RESULT.json

``WORK`` keeps the data, models and states: a second run reuses what is there. ``--also-before
a7fdd40`` reviews the same rows again with the best-fit threshold as it was before that commit (a
split of all the margins kept wherever it moved one image; the thresholds are fitted at review, so
no second run is needed) and prints its pooled lines after the others; ``--also-before 8e21b90``
does the same with the threshold fitted to the answers as it was at that commit (only ever between
two answered margins, never past the outermost: ``engine/review/fitted.py``).

A kind of two classes (the ninth suite's and later) is reviewed the same way: its site rules are
the label-free thresholds the run made and the thresholds fitted to the answers; the pooled lines
then also give the units of two classes and those of more apart.

A suite's ``lab_ladders`` (name: ``LadderRule`` settings) are the lab's ladders, such as a first
sample that only fits (``probe``), which the product's review does not take: each unit is reviewed
again after the folder by each of them, one ladder per site answered directly, under
``lab_seeds`` seeds of their random draws; their pooled lines come last and ``--out`` keeps their
cells under ``lab``. ``--lab-like SUITE`` takes them from another suite file.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.review import classes, fitted
from engine.review.ladder import LadderRule, SiteLadder
from engine.run.review import SiteReview
from engine.run.review_parts import site_images
from engine.run.rows import PredictionRow
from lab.reviewer import answer_ladder, answer_queue, false_promotions, review_counts
from lab.synth.many_classes import KINDS, site_classes, write_site

F2TTA = [sys.executable, "-m", "engine.cli"]


@dataclass(frozen=True)
class Unit:
    """One unit reviewed at one moment with K answers."""

    kind: str
    train_seed: int
    site: str
    moment: float
    budget: int
    images: int
    source_errors: int
    fixed: int
    broken: int
    online_fixed: int
    online_broken: int
    answers: int
    promoted: int
    false_promoted: int
    rules: str

    @property
    def removed(self) -> float:
        return (self.fixed - self.broken) / self.source_errors if self.source_errors else math.nan


def build(suite: dict[str, Any], kind: str, seed: int, work: Path) -> dict[str, list[PredictionRow]]:
    """Draw, train and run one kind at one training seed; each target site's rows (arrival order)."""
    out = work / f"{kind}-{seed}"
    data = out / "data"
    rng = np.random.default_rng([suite["data_seed"], seed])
    classes = KINDS[kind]
    if not data.exists():
        per_class = suite["train_per_class"]
        write_site(
            str(data / "site0"), rng, kind, np.repeat(np.arange(len(classes)), per_class), "none", "s0"
        )
        for site in suite["sites"]:
            labels = site_classes(
                rng, kind, suite["images_per_site"], site["reference"], site.get("dominant", False)
            )
            write_site(str(data / site["name"]), rng, kind, labels, site["mechanism"], site["name"])
    weights = out / "model.safetensors"
    if not weights.exists():
        t = suite["training"]
        train_source(data, weights, suite["size"], t, seed)
    rows: dict[str, list[PredictionRow]] = {}
    for site in suite["sites"]:
        state = out / f"state-{site['name']}"
        if not (out / f"{site['name']}.done").exists():
            run_site(weights, data / site["name"], state, out / f"{site['name']}.csv", suite["order_seed"])
            (out / f"{site['name']}.done").write_text("")
        rows[site["name"]] = state_rows(state)
    return rows


def train_source(
    data: Path, weights: Path, size: int, training: dict[str, Any], seed: int, *more: str
) -> None:
    """``f2tta train-source`` on ``data``'s site0 (``training``: model_kwargs, epochs, patience,
    batch_size; ``more``: further arguments)."""
    subprocess.run(
        [*F2TTA, "train-source", "--data", str(data), "--source", "site0", "--out", str(weights),
         "--img-size", str(size), "--model-kwargs", json.dumps(training["model_kwargs"]),
         "--epochs", str(training["epochs"]), "--patience", str(training["patience"]),
         "--batch-size", str(training["batch_size"]), "--seed", str(seed), *more],
        check=True,
    )  # fmt: skip


def run_site(weights: Path, folder: Path, state: Path, csv: Path, order_seed: int | None = None) -> None:
    """``f2tta run`` of the default method over ``folder`` in an interleaved order (``order_seed``:
    its seed; None: the command's)."""
    seeded = [] if order_seed is None else ["--order-seed", str(order_seed)]
    subprocess.run(
        [*F2TTA, "run", "--model", str(weights), "--input", str(folder), "--state", str(state),
         "--out", str(csv), "--no-progress", "--accept-warnings", "--order", "interleaved", *seeded,
         "--prompted", "behind"],  # the review below is not the CLI's: the prompted candidate made here
        check=True,
    )  # fmt: skip


def state_rows(state: Path) -> list[PredictionRow]:
    """The rows a run's journal in ``state`` holds, in arrival order."""
    read = [
        PredictionRow.from_json(json.loads(line))
        for name in sorted(glob.glob(str(state / "rows" / "*.jsonl")))
        for line in Path(name).read_text().splitlines()
    ]
    return sorted(read, key=lambda r: r.index)


def review(rows: list[PredictionRow], classes: int, moment: float, budget: int) -> dict[str, Any]:
    """Review one site's rows as the product does, the reviewer coming at ``moment``."""
    labels = np.array([r.ground_truth for r in rows], dtype=np.int64)
    source = np.array([r.source_prediction for r in rows], dtype=np.int64)
    reported = np.array([r.prediction for r in rows], dtype=np.int64)
    n = len(rows)
    seen = n if moment >= 1.0 else max(1, math.ceil(moment * n))
    site = SiteReview(None, "/data/site", classes)
    site.open(rows[:seen])
    site.complete = seen == n  # the run has decided every image (as the app and f2tta run say)
    answers = answer_queue(site, labels, budget)
    if seen < n:
        site.add_rows(rows[seen:])
        site.complete = True
    decisions, shown = site.decisions(), site.shown()
    online = np.concatenate([reported[:seen], shown[seen:]])
    counts, online_counts = review_counts(decisions, source, labels), review_counts(online, source, labels)
    promoted = false = 0
    for part in site.parts:
        comparisons = [c for c in part.ladder.comparisons if c.disagreements]
        p, f = false_promotions(comparisons, labels[part.positions])
        promoted, false = promoted + p, false + f
    return {
        "images": n,
        "source_errors": int(np.sum(source != labels)),
        "fixed": counts.fixed,
        "broken": counts.broken,
        "online_fixed": online_counts.fixed,
        "online_broken": online_counts.broken,
        "answers": answers,
        "promoted": promoted,
        "false_promoted": false,
        "rules": ", ".join(str(p.rule) for p in site.in_use()),
    }


def pooled(units: list[Unit]) -> str:
    errors = sum(u.source_errors for u in units)
    removed = sum(u.fixed - u.broken for u in units)
    online = sum(u.online_fixed - u.online_broken for u in units)
    shares = [u.removed for u in units if u.source_errors]
    points = [100 * (u.fixed - u.broken) / u.images for u in units]
    return (
        f"{removed} of {errors} errors removed ({removed / max(errors, 1):.1%}; online "
        f"{online / max(errors, 1):.1%}), median unit {float(np.median(shares)):.1%}, mean "
        f"{float(np.mean(points)):+.2f} points, harmed {sum(u.broken > u.fixed for u in units)} of "
        f"{len(units)} (online {sum(u.online_broken > u.online_fixed for u in units)}), promotions "
        f"{sum(u.promoted for u in units)} (false {sum(u.false_promoted for u in units)}), answers "
        f"{sum(u.answers for u in units)}, fixed / broken {sum(u.fixed for u in units)} / "
        f"{sum(u.broken for u in units)}"
    )


def reviewed_units(
    suite: dict[str, Any], built: dict[tuple[str, int, str], list[PredictionRow]]
) -> list[Unit]:
    """Every unit at every moment and K, printed as it is reviewed."""
    units: list[Unit] = []
    for (kind, seed, site), rows in built.items():
        for moment in suite["review_moments"]:
            for budget in suite["review_budgets"]:
                u = Unit(kind, seed, site, moment, budget, **review(rows, len(KINDS[kind]), moment, budget))
                units.append(u)
                print(
                    f"{kind} seed {seed} {site}, at {moment:g}, K = {budget}: source accuracy "
                    f"{1 - u.source_errors / u.images:.3f}, fixed {u.fixed} / broken {u.broken} "
                    f"({u.removed:.1%} of errors), answers {u.answers}, rule {u.rules}",
                    flush=True,
                )
    return units


def print_pooled(suite: dict[str, Any], units: list[Unit], label: str = "") -> None:
    for moment in suite["review_moments"]:
        for budget in suite["review_budgets"]:
            mine = [u for u in units if u.moment == moment and u.budget == budget]
            print(f"pooled{label}, at {moment:g}, K = {budget}: {pooled(mine)}")
            two = [u for u in mine if len(KINDS[u.kind]) == 2]
            if two and len(two) < len(mine):  # the targets differ: two classes, and more
                print(f"  two classes: {pooled(two)}")
                print(f"  more than two classes: {pooled([u for u in mine if len(KINDS[u.kind]) > 2])}")
            for kind in KINDS:
                of_kind = [u for u in mine if u.kind == kind]
                if of_kind:
                    print(f"  {kind}: {pooled(of_kind)}")


def lab_units(
    suite: dict[str, Any], built: dict[tuple[str, int, str], list[PredictionRow]]
) -> dict[str, list[dict[str, Any]]]:
    """Every unit reviewed after the folder by each of the suite's ``lab_ladders`` (a lab ladder,
    one per site, answered directly: ``lab.reviewer.answer_ladder``), under ``lab_seeds`` seeds of
    the ladders' random draws; per ladder, one dict per (unit, K, seed)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, settings in suite.get("lab_ladders", {}).items():
        rule = LadderRule(**settings)
        for (kind, seed, site), rows in built.items():
            labels = np.array([r.ground_truth for r in rows], dtype=np.int64)
            images = site_images(rows, len(KINDS[kind]))
            for budget in suite["review_budgets"]:
                for draw in range(suite.get("lab_seeds", 1)):
                    ladder = SiteLadder("/data/site", rule, seed=draw)
                    ladder.complete = True  # after the folder
                    answered = answer_ladder(ladder, images, labels, budget)
                    counts = review_counts(ladder.certified(images), images.source, labels)
                    made, false = false_promotions(ladder.comparisons, labels)
                    out.setdefault(name, []).append(
                        {"kind": kind, "train_seed": seed, "site": site, "budget": budget, "draw": draw,
                         "source_errors": int(np.sum(images.source != labels)), "fixed": counts.fixed,
                         "broken": counts.broken, "answers": len(answered), "promoted": made, "false_promoted": false}
                    )  # fmt: skip
    return out


def print_lab(suite: dict[str, Any], lab: dict[str, list[dict[str, Any]]]) -> None:
    """Per lab ladder and K, pooled over the units of two classes and over those of more: the
    source model's errors removed, mean over the draws (their spread), fixed / broken and harmed
    cells summed over the draws, promotions (false), answers per unit and draw."""
    for name, cells in lab.items():
        for budget in suite["review_budgets"]:
            for label, two in (("two classes", True), ("more than two classes", False)):
                mine = [c for c in cells if c["budget"] == budget and (len(KINDS[c["kind"]]) == 2) == two]
                if not mine:
                    continue
                draws = sorted({c["draw"] for c in mine})
                shares = []
                for d in draws:
                    of = [c for c in mine if c["draw"] == d]
                    errors = sum(c["source_errors"] for c in of)
                    shares.append(sum(c["fixed"] - c["broken"] for c in of) / max(errors, 1))
                print(
                    f"lab {name}, after the folder, K = {budget}, {label}: {float(np.mean(shares)):.1%} of the "
                    f"errors removed pooled (sd {float(np.std(shares)):.1%} over {len(draws)} draws), fixed / "
                    f"broken {sum(c['fixed'] for c in mine)} / {sum(c['broken'] for c in mine)}, harmed "
                    f"{sum(c['broken'] > c['fixed'] for c in mine)} of {len(mine)} cells, promotions "
                    f"{sum(c['promoted'] for c in mine)} (false {sum(c['false_promoted'] for c in mine)}), "
                    f"answers {sum(c['answers'] for c in mine) / len(mine):.1f} per cell",
                    flush=True,
                )


def _moves_before_a7fdd40(margin: np.ndarray, t: float) -> bool:
    """The best-fit threshold's test before a7fdd40: any image called otherwise than 0 does."""
    return bool(np.any((margin > t) != (margin > 0)))


def _cuts_at_8e21b90(margin: np.ndarray, answered: np.ndarray) -> np.ndarray:
    """The thresholds the fit tried at 8e21b90: between neighbouring answered margins only."""
    cuts = np.unique(answered)
    out: np.ndarray = (cuts[:-1] + cuts[1:]) / 2.0
    return out


#: what each ``--also-before`` puts back: (module, attribute, the function as it was)
BEFORE = {
    "a7fdd40": (classes, "_moves", _moves_before_a7fdd40),
    "8e21b90": (fitted, "_cuts", _cuts_at_8e21b90),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="the units as JSON")
    parser.add_argument("--also-before", choices=sorted(BEFORE), default=None, help="module docstring")
    parser.add_argument(
        "--lab-like",
        type=Path,
        default=None,
        help="take lab_ladders and lab_seeds from this suite file instead (a suite that has run, "
        "reviewed again with another suite's lab ladders: development data)",
    )
    a = parser.parse_args()
    suite = json.loads(a.suite.read_text())
    if a.lab_like is not None:
        other = json.loads(a.lab_like.read_text())
        suite |= {k: other[k] for k in ("lab_ladders", "lab_seeds") if k in other}
    built = {
        (spec["kind"], seed, site): rows
        for spec in suite["kinds"]
        for seed in spec["train_seeds"]
        for site, rows in build(suite, spec["kind"], seed, a.work).items()
    }
    units = reviewed_units(suite, built)
    print_pooled(suite, units)
    document: dict[str, Any] = {"suite": suite, "units": [asdict(u) for u in units]}
    if a.also_before:
        module, name, earlier = BEFORE[a.also_before]
        shipped = getattr(module, name)
        setattr(module, name, earlier)
        try:
            before = reviewed_units(suite, built)
        finally:
            setattr(module, name, shipped)
        label = {"a7fdd40": "best-fit threshold before a7fdd40", "8e21b90": "fitted threshold as at 8e21b90"}
        print_pooled(suite, before, f" ({label[a.also_before]})")
        document["units_before_" + a.also_before] = [asdict(u) for u in before]
    lab = lab_units(suite, built)
    print_lab(suite, lab)
    if lab:
        document["lab"] = lab
    if a.out is not None:
        a.out.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
