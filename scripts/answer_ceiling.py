"""Where a site's answers are lost: the candidates or the tests? Development data only (issue 39).

Three measurements on a suite's replayed known-sites streams (the ``.npz`` cache that
``scripts/replay_answers.py --cache`` writes; never a suite that has not run), each printed as the
pre-registered endpoints of ``scripts/replay_ladder.py``, reviewer after the folder
(``docs/review-certificates.md``, "Where the answers are lost"):

``ceiling``: the ladder's first candidate replaced by each site's *oracle* threshold on the source
margin (the one with fewest errors, chosen with every label): what the tests can certify with K
answers when the candidate is as good as one threshold can be. Also a line per label-free candidate:
its last threshold applied to the whole site, errors removed pooled, and the best of them chosen
per site with the labels.

``probe R``: an estimate of a uniform first sample. At each site R images are drawn uniformly and
answered; the threshold with fewest errors on them (ties: the nearest to 0, the source model's) is
tested first by the ladder with the other K - R answers; a line before each also gives what that
threshold removes on its own, uncertified. An estimate, not the procedure: the probed
answers are not counted exactly in the test (conservative), and a test may draw a probed image again
(its answer then counts as a fresh draw). Each estimate's row is followed by the procedure itself
(``LadderRule(probe=R)``: the sample is the ladder's first block, its answers count within the K and
exactly in the test of the threshold fitted on them, ``docs/review-certificates.md``).

    PYTHONPATH=. .venv/bin/python scripts/answer_ceiling.py S6.npz benchmarks/suites/site-adaptation-6.json ceiling
    PYTHONPATH=. .venv/bin/python scripts/answer_ceiling.py S6.npz benchmarks/suites/site-adaptation-6.json \\
        probe --specs 10/3,10/4,10/5,5/2,20/5,20/8

``orders``: the default ladder with its label-free candidates tried in other orders (``ORDERS``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_answers import load, spread
from replay_ladder import Stream, endpoints

from engine.review.ladder import DEFAULT_CANDIDATES, GUARDED, PROMPTED, LadderRule
from engine.vocabulary import Rule
from lab.bench.recipe import Recipe

#: the ladder with the (replaced) site threshold tried first, the others in their default order
FIRST = LadderRule(candidates=(Rule.FIT, *(c for c in DEFAULT_CANDIDATES if c != Rule.FIT)))
_A, _F, _S, _P = Rule.ANSWERS, Rule.FIT, Rule.SHIFT, Rule.PRIOR
#: other orders of the label-free candidates (the fitted threshold first, as by default)
ORDERS = {
    "guarded first": (_A, GUARDED, _F, _S, _P, PROMPTED),
    "shift first": (_A, _S, _F, _P, GUARDED, PROMPTED),
    "prior first": (_A, _P, _F, _S, GUARDED, PROMPTED),
    "without shift and prior": (_A, _F, GUARDED, PROMPTED),
}


def fewest_errors(margin: np.ndarray, labels: np.ndarray) -> float:
    """The threshold on ``margin`` (call 1 above it) with fewest errors on ``labels``; ties go to the
    threshold nearest 0, the source model's own."""
    cuts = np.unique(margin)
    points = np.concatenate([[cuts[0] - 1e-3], (cuts[1:] + cuts[:-1]) / 2.0, [cuts[-1] + 1e-3], [0.0]])
    errors = np.array([np.count_nonzero((margin > t) != labels) for t in points], dtype=np.float64)
    return float(points[int(np.argmin(errors + 1e-9 * np.abs(points)))])


def with_first(st: Stream, threshold_of: dict[int, float]) -> Stream:
    """``st`` with its site threshold candidate replaced by one threshold per site."""
    t = np.full(st.margin.shape, np.nan)
    for site, value in threshold_of.items():
        t[st.site_of == site] = value
    rest = {k: v for k, v in st.candidates.items() if k != str(Rule.FIT)}
    return dataclasses.replace(st, candidates={str(Rule.FIT): t, **rest})


def candidate_lines(streams: Sequence[Stream]) -> list[str]:
    """Each label-free candidate's last threshold applied to its whole site, errors removed pooled;
    the best of them per site chosen with the labels (never below the source model); the oracle."""
    source_errors = 0
    removed: dict[str, int] = {}
    best = oracle = 0
    for st in streams:
        for s in range(len(st.domains)):
            at = st.site_of == s
            m, y = st.margin[at], st.labels[at]
            errors = int(np.count_nonzero((m > 0) != y))
            source_errors += errors
            gains = [0]
            for name, values in st.candidates.items():
                known = values[at][~np.isnan(values[at])]
                gain = errors - int(np.count_nonzero((m > known[-1]) != y)) if known.size else 0
                removed[name] = removed.get(name, 0) + gain
                gains.append(gain)
            best += max(gains)
            oracle += errors - int(np.count_nonzero((m > fewest_errors(m, y)) != y))
    pooled = {name: 100.0 * r / source_errors for name, r in removed.items()}
    lines = [f"source model's errors: {source_errors}"]
    lines += [
        f"{name}: its last threshold on the whole site removes {p:.1f} % pooled" for name, p in pooled.items()
    ]
    lines.append(
        f"the best label-free candidate per site, chosen with the labels: {100.0 * best / source_errors:.1f} %"
    )
    lines.append(f"the oracle threshold per site: {100.0 * oracle / source_errors:.1f} %")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cache", type=Path, help="replayed streams (scripts/replay_answers.py --cache)")
    p.add_argument("recipe", type=Path, help="the suite's recipe (its stream seed)")
    p.add_argument("what", choices=("ceiling", "probe", "orders"))
    p.add_argument("--budgets", default="10,5,20", help="ceiling, orders: K, answers per site")
    p.add_argument("--specs", default="10/3,10/4,10/5,5/2,20/5,20/8", help="probe: K/R pairs")
    p.add_argument(
        "--seeds", type=int, default=1, help="ceiling: a row of the spread over this many seeds too"
    )
    a = p.parse_args(argv)
    streams = load(a.cache)
    seed = Recipe.load(a.recipe).stream_seed
    print(
        "| K | ladder | median closed | harmed units | mean / median unit Δ | removed pooled / median unit "
        "| fixed / broken | answers per site | false promotions | provisional |"
    )
    if a.what == "ceiling":
        for line in candidate_lines(streams):
            print(line, flush=True)
        oracle = [
            with_first(
                st,
                {
                    s: fewest_errors(st.margin[st.site_of == s], st.labels[st.site_of == s])
                    for s in range(len(st.domains))
                },
            )
            for st in streams
        ]
        for budget in (int(x) for x in a.budgets.split(",")):
            for name, ss, rule in (("default", streams, LadderRule()), ("oracle first", oracle, FIRST)):
                print(
                    f"| {budget} | {name} | {endpoints(ss, rule, budget, 0.0, seed, 1.0)['ladder']} |",
                    flush=True,
                )
                if a.seeds > 1:
                    print(
                        f"| {budget} | {name} | {spread(ss, rule, budget, seed, 1.0, a.seeds)} |", flush=True
                    )
        return 0
    if a.what == "orders":
        for budget in (int(x) for x in a.budgets.split(",")):
            for name, order in ORDERS.items():
                row = endpoints(streams, LadderRule(candidates=order), budget, 0.0, seed, 1.0)["ladder"]
                print(f"| {budget} | {name} | {row} |", flush=True)
        return 0
    for spec in a.specs.split(","):
        budget, probed = (int(x) for x in spec.split("/"))
        rng = np.random.default_rng([seed, budget, probed])
        fitted = []
        errors = removed = 0
        for st in streams:
            threshold_of = {}
            for s in range(len(st.domains)):
                at = np.flatnonzero(st.site_of == s)
                drawn = rng.choice(at, probed, replace=False)
                threshold_of[s] = fewest_errors(st.margin[drawn], st.labels[drawn])
                source_errors = int(np.count_nonzero((st.margin[at] > 0) != st.labels[at]))
                errors += source_errors
                removed += source_errors - int(
                    np.count_nonzero((st.margin[at] > threshold_of[s]) != st.labels[at])
                )
            fitted.append(with_first(st, threshold_of))
        print(
            f"R = {probed}: the fitted threshold on every image, uncertified, removes {100.0 * removed / errors:.1f} % pooled"
        )
        row = endpoints(fitted, FIRST, budget - probed, 0.0, seed, 1.0)["ladder"]
        print(f"| {budget} | probe {probed}, then {budget - probed} (estimate) | {row} |", flush=True)
        row = endpoints(streams, LadderRule(probe=probed), budget, 0.0, seed, 1.0)["ladder"]
        print(f"| {budget} | probe {probed} (the ladder's own, LadderRule.probe) | {row} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
