"""The benchmark's simulated reviewer: what a budget of reviews per site makes of each method.

``f2tta bench --review-budget 0,5,10,20,50`` and ``f2tta bench-suite --review-budgets ...``
replay the recorded decisions of each stream through :func:`engine.review.simulate_reviews`: a
reviewer answers up to K items of the review queue from each site, with the dataset's labels, as
the site's images come (the site only spreads the budget, as a person reviews each site's images;
the method never sees it). Site groups whose certificate turns *reverted* go back to the source
model's decisions; everything else keeps the label-free method's. Reported per budget: the
paired difference from the source model per site, fixed/broken, reviews used and the verdicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.bench.job import JobRecords
from engine.bench.report import paired_by_domain
from engine.errors import F2TTAError
from engine.review import REVERTED, UNDECIDED, VERIFIED, SimulatedReview, simulate_reviews


def parse_budgets(text: str) -> tuple[int, ...]:
    """``"0,5,20"`` -> ``(0, 5, 20)``: whole numbers >= 0, each once, in the order given.

    Raises:
        F2TTAError: anything else.
    """
    budgets: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise F2TTAError(f"review budget {part!r}: expected whole numbers >= 0, e.g. 0,5,10,20,50")
        if int(part) not in budgets:
            budgets.append(int(part))
    if not budgets:
        raise F2TTAError("no review budget given")
    return tuple(budgets)


def simulate(
    labels: np.ndarray,
    source_preds: np.ndarray,
    preds: np.ndarray,
    group: np.ndarray,
    site: np.ndarray,
    budget: int,
) -> SimulatedReview:
    """One stream reviewed with ``budget`` answers per site (``group`` -1: none)."""
    return simulate_reviews(preds, source_preds, group, labels, budget, site=site)


def verdict_counts(review: SimulatedReview, groups: np.ndarray, changed: np.ndarray) -> dict[str, int]:
    """How many of the groups with a disagreement (``changed``; -1: the images with no group)
    ended verified, reverted or undecided (a group adaptation never changed has nothing to review)."""
    counts = {VERIFIED: 0, REVERTED: 0, UNDECIDED: 0}
    for g in np.unique(groups[changed]):
        counts[review.book.verdict(None if g < 0 else int(g))] += 1
    return counts


def review_budgets(
    recs: Sequence[JobRecords], domains: Sequence[str], source_domain: str, budgets: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Per budget K: the reviewed decisions of every stream against the source model.

    Returns ``{"K": {"per_domain": paired_by_domain(...), "target_delta": mean over target
    domains, "worst_domain_delta": the lowest per-domain mean, "fixed", "broken", "reviews_per_site":
    mean over streams and sites, "verdicts": groups with a disagreement verified/reverted/undecided,
    summed over streams}}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for budget in budgets:
        reviewed: list[JobRecords] = []
        verdicts = {VERIFIED: 0, REVERTED: 0, UNDECIDED: 0}
        reviews: list[float] = []
        for rec in recs:
            sim = simulate(rec.labels, rec.source_preds, rec.preds, rec.group, rec.domain, budget)
            reviewed.append(dataclasses.replace(rec, preds=sim.decisions))
            for k, v in verdict_counts(sim, rec.group, rec.preds != rec.source_preds).items():
                verdicts[k] += v
            sites = max(len(np.unique(rec.domain)), 1)
            reviews.append(sim.reviews_used / sites)
        per_domain = paired_by_domain(reviewed, domains)
        targets = [v["delta"] for d, v in per_domain.items() if d != source_domain]
        out[str(budget)] = {
            "per_domain": per_domain,
            "target_delta": float(np.mean(targets)) if targets else float("nan"),
            "worst_domain_delta": min((v["delta"] for v in per_domain.values()), default=float("nan")),
            "fixed": sum(v["fixed"] for v in per_domain.values()),
            "broken": sum(v["broken"] for v in per_domain.values()),
            "reviews_per_site": float(np.mean(reviews)) if reviews else 0.0,
            "verdicts": verdicts,
        }
    return out


#: The figures :func:`review_series` draws against the budget, and the unit of those not in points.
SERIES = ("target mean gain", "worst cell", "cells below the source by > 1 point")
SERIES_UNITS = {"cells below the source by > 1 point": "cells (of all sites, streams and models)"}


def review_series(
    suite_summary: Mapping[str, Any], methods: Sequence[str], budgets: Sequence[int]
) -> dict[str, dict[str, list[float]]]:
    """Per method, :data:`SERIES` against the budgets, from ``f2tta bench-suite``'s summary."""

    def at(method: str, budget: int) -> Mapping[str, Any]:
        entry: Mapping[str, Any] = suite_summary[f"{method} K={budget}"]
        return entry

    return {
        m: {
            SERIES[0]: [float(at(m, k)["target_mean_gain"]) for k in budgets],
            SERIES[1]: [float(at(m, k)["worst_cell"]["difference"]) for k in budgets],
            SERIES[2]: [float(at(m, k)["cells_below_source_by_1"]) for k in budgets],
        }
        for m in methods
    }
