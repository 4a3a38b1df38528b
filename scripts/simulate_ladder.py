"""The site ladder's certificates on simulated sites: validity in adversarial arrival orders, power, e-BH.

Every number in ``docs/review-certificates.md`` ("The ladder, measured") comes from this script,
seeded, through the engine's own code (:func:`lab.reviewer.review_stream`):

    .venv/bin/python scripts/simulate_ladder.py                  # about a minute, 2 cores
    .venv/bin/python scripts/simulate_ladder.py --streams 300    # quicker

1. **Adversarial orders.** A site of 400 images where the ``fit`` candidate (threshold 1 on the
   margin, the rule in use the source's 0) is, over all its 120 changed decisions, harmful (mean
   ``z`` = -0.1), but the images it gets right arrive first: help then harm, a drifting class mix,
   a slide read in scan order with its tumour region last (:mod:`lab.bench.adversarial`). The
   share of streams in which it is promoted, reviewed by the ladder (a uniform random order
   without replacement) and, for comparison, by the earlier queue (the first disagreements in
   arrival order, the same sequence read as if they were a random sample).
1b. **The reviewer mid-run.** The same sites with Q pressed after 25 % or 50 % of the folder: the
   share of streams in which the folder ends worse than the source model (what reports decide:
   each image by a rule only where a certificate covers it) and in which what was shown while it
   arrived (later images provisional) was worse, with the images left provisional.
1c. **A reviewer who re-rolls the queue** (undo the mark that decided the comparison before,
   let the folder grow, redo) until the harmful candidate's first queued images look right
   (:func:`lab.bench.adversarial.reroll_attack`), against an honest reviewer.
2. **Neutral candidates** (mean ``z`` exactly 0): promoted in how many streams.
3. **Power**: a candidate better on a share ``p`` of its ``N`` changed decisions (worse on the
   rest): promoted within K = 5, 10, 20 reviews.
4. **Many folders**: 20 sites whose candidates are all neutral (error control is per folder):
   reports in which any site's candidate was promoted.
5. **Ordinary sites, the reviewer at 50 %**: a candidate right on 80 % of its changed decisions
   in no particular order; the gain over the source model shown while the folder arrived
   (online) against the gain in the report written afterwards (retroactive).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.review.ladder import PROMOTED, LadderRule
from engine.review.sampling import SamplingSequence
from lab.bench.adversarial import ORDERS, adversarial_site, reroll_attack, review_site

RULE = LadderRule(candidates=("fit",))


def site(
    order: str, right: int, rng: np.random.Generator, n: int = 400, d: int = 120
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(margin, labels, disagreements)`` of a site whose candidate is right on ``right`` of its ``d``."""
    return adversarial_site(order, rng, n, d, right)


def ladder_promotes(margin: np.ndarray, labels: np.ndarray, budget: int, seed: int) -> bool:
    out = review_site(margin, labels, budget, seed)
    return any(c.verdict == PROMOTED for c in out.ladders[0].comparisons)


def arrival_promotes(labels: np.ndarray, changed: np.ndarray, budget: int) -> bool:
    """The earlier queue: the first ``budget`` disagreements in arrival order, read as a sample."""
    seq = SamplingSequence(changed.size, alpha=RULE.level(1))
    for i in changed[:budget]:
        seq.update(float(labels[i] == 0) - float(labels[i] == 1))
        if seq.lower(RULE.level(1)) > 0:
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    args = parser.parse_args()
    streams = args.streams
    print(f"## 1. Adversarial orders: a harmful candidate (mean z -0.1) promoted, of {streams} streams\n")
    print("| arrival order | K | ladder (uniform, without replacement) | arrival-order queue |")
    print("|---|---|---|---|")
    for order in ORDERS:
        for budget in (20, 50):
            ladder = arrival = 0
            for s in range(streams):
                rng = np.random.default_rng([s, 17])
                margin, labels, changed = site(order, 54, rng)
                ladder += ladder_promotes(margin, labels, budget, s)
                arrival += arrival_promotes(labels, changed, budget)
            print(f"| {order} | {budget} | {ladder / streams:.3f} | {arrival / streams:.3f} |")
    print(
        f"\n## 1b. The reviewer mid-run (K = 20): folders worse than the source model, of {streams} streams\n"
    )
    print(
        "| arrival order | Q pressed after | reports (certified) worse | shown while arriving worse | provisional images per folder |"
    )
    print("|---|---|---|---|---|")
    for order in ORDERS:
        for at in (0.25, 0.5):
            worse = shown = provisional = 0
            for s in range(streams):
                margin, labels, _ = site(order, 54, np.random.default_rng([s, 17]))
                out = review_site(margin, labels, 20, s, at)
                worse += out.counts.accuracy < out.counts.source_accuracy
                shown += out.online_counts.accuracy < out.online_counts.source_accuracy
                provisional += int(out.provisional.sum())
            print(
                f"| {order} | {100 * at:g} % | {worse / streams:.3f} | {shown / streams:.3f} | {provisional / streams:.1f} |"
            )
    rerolls = max(streams // 5, 20)
    print(f"\n## 1c. A reviewer who re-rolls the harmful candidate's queue ({rerolls} streams)\n")
    print(
        "| arrival order | promoted, re-rolling | promoted, honest | folder worse, re-rolling | re-rolls tried per stream |"
    )
    print("|---|---|---|---|---|")
    for order in (*ORDERS, "uniform"):
        attacked = [reroll_attack(order, s) for s in range(rerolls)]
        honest = [reroll_attack(order, s, tries=0) for s in range(rerolls)]
        print(
            f"| {order} | {np.mean([r.promoted for r in attacked]):.3f} | {np.mean([r.promoted for r in honest]):.3f} "
            f"| {np.mean([r.worse for r in attacked]):.3f} | {np.mean([r.rerolls for r in attacked]):.1f} |"
        )
    print(f"\n## 2. A neutral candidate (mean z 0) promoted, of {streams} streams\n")
    for budget in (20, 50):
        hits = sum(
            ladder_promotes(*site("uniform", 60, np.random.default_rng([s, 23]))[:2], budget, s)
            for s in range(streams)
        )
        print(f"- K = {budget}: {hits / streams:.3f}")
    print(
        f"\n## 3. Power: a candidate right on a share p of its N changed decisions, promoted ({streams // 2} streams)\n"
    )
    print("| N | p (mean z) | K = 5 | K = 10 | K = 20 |")
    print("|---|---|---|---|---|")
    for d in (20, 60, 200):
        for p in (0.7, 0.8, 0.9):
            right = round(p * d)
            row = []
            for budget in (5, 10, 20):
                hits = 0
                for s in range(streams // 2):
                    margin, labels, _ = site(
                        "uniform", right, np.random.default_rng([s, 29, d]), n=max(400, 2 * d), d=d
                    )
                    hits += ladder_promotes(margin, labels, budget, s)
                row.append(f"{hits / (streams // 2):.2f}")
            print(f"| {d} | {p:.1f} ({2 * p - 1:+.1f}) | " + " | ".join(row) + " |")
    reports = streams // 2
    print(
        f"\n## 4. 20 folders with neutral candidates, 20 reviews each ({reports} reports; control is per folder)\n"
    )
    promoted_sites = any_site = 0
    for r in range(reports):
        hits = sum(
            ladder_promotes(*site("uniform", 60, np.random.default_rng([r, f, 37]))[:2], 20, r * 20 + f)
            for f in range(20)
        )
        promoted_sites += hits
        any_site += hits > 0
    print(f"- folders whose neutral candidate was promoted: {promoted_sites / (20 * reports):.3f}")
    print(f"- reports with at least one such folder: {any_site / reports:.3f}")
    print(
        f"\n## 5. Ordinary sites (candidate right on 80 %), the reviewer at 50 %, K = 20 ({streams} streams)\n"
    )
    online_gain, retro_gain, worse_online = [], [], 0
    for s in range(streams):
        margin, labels, _ = site("uniform", 96, np.random.default_rng([s, 43]))
        out = review_site(margin, labels, 20, s, 0.5)
        online_gain.append(out.online_counts.accuracy - out.online_counts.source_accuracy)
        retro_gain.append(out.counts.accuracy - out.counts.source_accuracy)
        worse_online += out.online_counts.accuracy < out.online_counts.source_accuracy
    print(
        f"- mean gain over the source model, points: shown while arriving {100 * np.mean(online_gain):+.2f}, "
        f"in the report {100 * np.mean(retro_gain):+.2f} (ratio {np.mean(online_gain) / max(np.mean(retro_gain), 1e-12):.2f}); "
        f"streams shown worse than the source model while arriving: {worse_online / streams:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
