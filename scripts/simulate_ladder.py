"""The site ladder's certificates on simulated sites: validity in adversarial arrival orders, power, e-BH.

Every number in ``docs/review-certificates.md`` ("The ladder, measured") comes from this script,
seeded, through the engine's own code (:func:`engine.review.reviewer.review_stream`):

    .venv/bin/python scripts/simulate_ladder.py                  # about a minute, 2 cores
    .venv/bin/python scripts/simulate_ladder.py --streams 300    # quicker

1. **Adversarial orders.** A site of 400 images where the ``fit`` candidate (threshold 1 on the
   margin, the rule in use the source's 0) is, over all its 120 changed decisions, harmful (mean
   ``z`` = -0.1), but the images it gets right arrive first: help then harm, a drifting class mix,
   a slide read in scan order with its tumour region last. The share of streams in which it is
   promoted, reviewed by the ladder (a uniform random order without replacement) and, for
   comparison, by the earlier queue (the first disagreements in arrival order, the same
   sequence read as if they were a random sample).
2. **Neutral candidates** (mean ``z`` exactly 0): promoted in how many streams.
3. **Power**: a candidate better on a share ``p`` of its ``N`` changed decisions (worse on the
   rest): promoted within K = 5, 10, 20 reviews.
4. **e-BH** over 20 sites whose candidates are all neutral: reports calling any verified.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.review.ladder import PROMOTED, LadderRule
from engine.review.multiple import e_bh
from engine.review.reviewer import review_stream
from engine.review.sampling import SamplingSequence

ORDERS = ("help-then-harm", "drift", "scan-region-last")
RULE = LadderRule(candidates=("fit",))


def site(
    order: str, right: int, rng: np.random.Generator, n: int = 400, d: int = 120
) -> tuple[np.ndarray, ...]:
    """``(margin, labels)`` of a site whose candidate is right on ``right`` of its ``d`` disagreements."""
    margin = rng.uniform(-6, 6, n)
    margin[(margin > 0) & (margin <= 1.0)] += 1.0  # only the chosen images are changed decisions
    changed = np.sort(rng.choice(n, d, replace=False))
    margin[changed] = rng.uniform(0.01, 1.0, d)
    labels = (margin > 0).astype(np.int64)
    if order == "help-then-harm":
        is_right = np.r_[np.ones(right, bool), np.zeros(d - right, bool)]
    elif order == "drift":
        score = rng.random(d) / np.linspace(0.9, 0.1, d)
        is_right = np.zeros(d, bool)
        is_right[np.argsort(score)[:right]] = True
    elif order == "scan-region-last":  # normal tissue first, the tumour region last, its edges ragged
        is_right = np.r_[np.ones(right, bool), np.zeros(d - right, bool)]
        swaps = rng.choice(d, (d // 10, 2))
        for a, b in swaps:
            is_right[[a, b]] = is_right[[b, a]]
    else:  # uniform
        is_right = rng.permutation(np.r_[np.ones(right, bool), np.zeros(d - right, bool)])
    labels[changed] = np.where(is_right, 0, 1)
    return margin, labels, changed


def ladder_promotes(margin: np.ndarray, labels: np.ndarray, budget: int, seed: int) -> bool:
    n = margin.shape[0]
    reported = (margin > 0).astype(np.int64)
    out = review_stream(
        reported,
        reported,
        margin,
        np.zeros(n),
        {"fit": np.ones(n)},
        np.zeros(n, dtype=np.int64),
        labels,
        budget,
        rule=RULE,
        seed=seed,
    )
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
    print(f"\n## 4. e-BH over 20 sites with neutral candidates, 20 reviews each ({streams // 2} reports)\n")
    rng = np.random.default_rng(31)
    any_claim = 0
    for _ in range(streams // 2):
        values = []
        for _site in range(20):
            seq = SamplingSequence(60)
            for v in rng.permutation(np.r_[np.ones(30), -np.ones(30)])[:20]:
                seq.update(float(v))
            values.append(seq.e_value())
        any_claim += any(e_bh(values, 0.05))
    print(f"- reports calling any site verified: {any_claim / (streams // 2):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
