"""The benchmark's simulated reviewer: what a budget of reviews per site makes of each method.

``f2tta bench --review-budget 0,5,10,20,50`` and ``f2tta bench-suite --review-budgets ...``
replay the recorded decisions of each stream through :func:`lab.reviewer.review_stream`:
per site (or site group, when the method was not told the sites) a reviewer comes once
``--review-at`` of its images have been processed and answers up to K items of the site's
ladder, drawn uniformly at random, with the dataset's labels (``docs/review-certificates.md``).
The method never sees a review. Reported per budget, retroactive (the report written after the
reviews: every image of a site decided by the rule the reviews left in use) and online (what a
reader saw when) apart: the paired difference from the source model per site, fixed/broken,
reviews used and the comparisons' verdicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.errors import F2TTAError
from engine.methods.idipt_plus import THRESHOLD_CANDIDATES
from engine.review.comparison import Comparison
from engine.review.ladder import SiteLadder
from lab.bench.job import JobRecords
from lab.bench.plain_labels import PLAIN_USES, plain_uses
from lab.bench.report import paired_by_domain
from lab.reviewer import ReviewedStream, review_stream


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


def review_units(rec: JobRecords, known_sites: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The unit each image of ``rec`` is reviewed in, and (sites told) the site it was told.

    Free-form, a unit is the site group the method decided the image in (-1: none, never
    reviewed). With the sites told (``--known-sites``), each domain is one folder and is reviewed
    as the app reviews a folder (``engine/run/review.py``): its K answers are shared over the units
    it was decided in, images decided in none belong to the folder's first unit, and a folder the
    method decided in no unit at all (a model with more than two classes, a method without site
    units) is one unit of its own, where I-DiPT's prompted decision can still be reviewed.
    """
    group = rec.group.astype(np.int64)
    if not known_sites:
        return group, None
    unit = group.copy()
    spare = int(group.max(initial=-1)) + 1
    for s in np.unique(rec.domain):
        mine = rec.domain == s
        named = group[mine & (group >= 0)]
        unit[mine & (group < 0)] = int(named[0]) if named.size else spare + int(s)
    return unit, rec.domain.astype(np.int64)


def _ladder_inputs(rec: JobRecords) -> tuple[bool, dict[str, np.ndarray], np.ndarray | None]:
    """What a site's ladder is given from one stream's records: whether its images are two-class
    (a source margin each), each threshold candidate's thresholds (none when they are not) and
    I-DiPT's prompted classes (None when none was recorded)."""
    two_class = bool(np.isfinite(rec.margin).all()) and rec.margin.size > 0
    candidates: dict[str, np.ndarray] = (
        {name: rec.candidates[:, k].astype(np.float64) for k, name in enumerate(THRESHOLD_CANDIDATES)}
        if two_class
        else {}
    )
    return two_class, candidates, rec.prompted if bool((rec.prompted >= 0).any()) else None


def simulate(
    rec: JobRecords, budget: int, review_at: float = 1.0, seed: int = 0, known_sites: bool = False
) -> ReviewedStream:
    """One stream's records reviewed with ``budget`` answers per site (or site group, free-form)."""
    unit, site = review_units(rec, known_sites)
    two_class, candidates, prompted = _ladder_inputs(rec)
    return review_stream(
        rec.preds,
        rec.source_preds,
        rec.margin.astype(np.float64),
        rec.threshold.astype(np.float64) if two_class else None,
        candidates,
        unit,
        rec.labels,
        budget,
        review_at,
        seed=seed,
        prompted=prompted,
        site=site,
    )


def plain_of(
    rec: JobRecords, budget: int, review_at: float, known_sites: bool
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """One stream's plain uses of ``budget`` labels per site (``lab.bench.plain_labels``)."""
    unit, site = review_units(rec, known_sites)
    _, candidates, prompted = _ladder_inputs(rec)
    return plain_uses(
        rec.source_preds,
        rec.margin.astype(np.float64),
        candidates,
        prompted,
        unit,
        rec.labels,
        budget,
        review_at,
        seed=rec.seed,
        site=site,
        reported=rec.preds,
    )


def verdict_counts(reviews: Sequence[ReviewedStream]) -> dict[str, int]:
    """How the comparisons of these streams ended, by verdict (error control is per site: each
    site's ladder errs at most alpha, ``docs/review-certificates.md``)."""
    counts: dict[str, int] = {}
    for review in reviews:
        for c in tested(list(review.ladders.values())):
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return counts


def candidate_verdicts(reviews: Sequence[ReviewedStream]) -> dict[str, dict[str, int]]:
    """Per candidate tested (``operating point``: A1 against the source model), how its comparisons
    ended, summed over these streams (comparisons with nothing to test left out)."""
    out: dict[str, dict[str, int]] = {}
    for review in reviews:
        for c in tested(list(review.ladders.values())):
            mine = out.setdefault(c.candidate, {})
            mine[c.verdict] = mine.get(c.verdict, 0) + 1
    return out


def review_budgets(
    recs: Sequence[JobRecords],
    domains: Sequence[str],
    source_domain: str,
    budgets: Sequence[int],
    review_at: float = 1.0,
    known_sites: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per budget K: the reviewed decisions of every stream against the source model (with
    ``known_sites``, each domain reviewed as one folder: :func:`review_units`).

    Returns ``{"K": {...}, "K online": {...}, "K best-of-K": {...}, "K threshold-on-K": {...}}``
    (the last two: the plain uses of the same K labels) with, each, ``per_domain`` (paired_by_domain),
    ``target_delta`` (mean over target domains), ``worst_domain_delta``, ``fixed``, ``broken``,
    ``reviews_per_site`` (mean over streams and sites) and ``verdicts`` (the comparisons' verdicts
    summed over streams).
    """
    out: dict[str, dict[str, Any]] = {}
    for budget in budgets:
        sims = [simulate(rec, budget, review_at, rec.seed, known_sites) for rec in recs]
        verdicts = verdict_counts(sims)
        by_candidate = candidate_verdicts(sims)
        reviews = [s.reviews_used / max(len(np.unique(r.domain)), 1) for s, r in zip(sims, recs, strict=True)]
        provisional = [
            int(s.provisional.sum()) / max(len(np.unique(r.domain)), 1)
            for s, r in zip(sims, recs, strict=True)
        ]
        variants = {
            str(budget): [s.decisions for s in sims],
            f"{budget} online": [s.online_decisions for s in sims],
        }
        if budget:  # the plain uses of the same K labels (lab.bench.plain_labels), retroactive
            plain = [plain_of(rec, budget, review_at, known_sites) for rec in recs]
            for use in PLAIN_USES:
                variants[f"{budget} {use}"] = [p[use][0] for p in plain]
        for key, decided in variants.items():
            reviewed = [dataclasses.replace(rec, preds=d) for rec, d in zip(recs, decided, strict=True)]
            per_domain = paired_by_domain(reviewed, domains)
            targets = [v["delta"] for d, v in per_domain.items() if d != source_domain]
            ladder = key.partition(" ")[2] in ("", "online")
            out[key] = {
                "per_domain": per_domain,
                "target_delta": float(np.mean(targets)) if targets else float("nan"),
                "worst_domain_delta": min((v["delta"] for v in per_domain.values()), default=float("nan")),
                "fixed": sum(v["fixed"] for v in per_domain.values()),
                "broken": sum(v["broken"] for v in per_domain.values()),
                "reviews_per_site": float(np.mean(reviews)) if ladder and reviews else float(budget),
                "provisional_per_site": float(np.mean(provisional)) if ladder and provisional else 0.0,
                "verdicts": verdicts if ladder else {},
                "verdicts_by_candidate": by_candidate if ladder else {},
                "review_at": review_at,
            }
    return out


#: The figures :func:`review_series` draws against the budget, and the unit of those not in points.
SERIES = ("target mean gain", "worst cell", "cells below the source by > 1 point")
SERIES_UNITS = {"cells below the source by > 1 point": "cells (of all sites, streams and models)"}


def review_series(
    suite_summary: Mapping[str, Any], methods: Sequence[str], budgets: Sequence[int]
) -> dict[str, dict[str, list[float]]]:
    """Per method, :data:`SERIES` against the budgets, from one protocol of ``f2tta bench-suite``'s
    summary (K = 0: the label-free decisions, retroactive; methods without review variants are left out)."""

    def at(method: str, budget: int) -> Mapping[str, Any]:
        entry: Mapping[str, Any] = suite_summary[f"{method} K={budget}" if budget else f"{method} final"]
        return entry

    return {
        m: {
            SERIES[0]: [float(at(m, k)["target_mean_gain"]) for k in budgets],
            SERIES[1]: [float(at(m, k)["worst_cell_difference"]) for k in budgets],
            SERIES[2]: [float(at(m, k)["cells_below_source_by_1"]) for k in budgets],
        }
        for m in methods
        if all((f"{m} K={k}" if k else f"{m} final") in suite_summary for k in budgets)
    }


def tested(ladders: Sequence[SiteLadder]) -> list[Comparison]:
    """Every comparison with at least one disagreement, across sites."""
    return [c for ladder in ladders for c in ladder.comparisons if c.disagreements]
