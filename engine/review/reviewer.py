"""A simulated reviewer for the benchmark: K reviews per site, drawn as the site's ladder asks.

:func:`review_stream` takes one stream's label-free record (the reported decisions, the source
model's, each image's source margin and its site's candidate thresholds, the site or site group
each image was decided in) and, per site, plays a reviewer who comes once ``review_at`` of the
site's images have been processed (1.0: when the folder is done, as a clinician reviews a
loaded folder; 0.5: half-way through). The site's ladder (:mod:`engine.review.ladder`) then
freezes its comparisons on the images processed by then and asks for reviews in its uniformly
random order; the reviewer answers with the dataset's label, up to ``budget`` answers. The
method never sees a review.

Two sets of decisions come back, reported apart:

* **online**, what a reader saw when: the label-free decisions up to the review, the rule the
  reviews left in use after it (only what comes after a review can change live);
* **retroactive**, the report written afterwards: every image of the site decided by the rule
  the reviews left in use (the operating point's latest threshold where no review moved it; a
  promoted candidate's frozen threshold; the source model's where the operating point was turned
  back). With ``budget`` 0 this is the label-free report: each site decided by its latest
  operating point.

**A site decided in several units** (a folder that mixed two appearances and was split in two
parts, ``engine.methods.idipt_plus._split``): given each image's told ``site``, the site's budget
of K answers is shared over its units (the parts, and the unit of the images decided before the
split) in proportion to the images each had when the reviewer came (:func:`stratified_budgets`),
and each unit has its own ladder: every certificate is about one part, from a uniform sample of
that part. Without ``site`` (the free-form protocol) every unit has K answers, as every site does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from engine.review.ladder import LadderRule, SiteImages, SiteLadder


@dataclass(frozen=True)
class ReviewCounts:
    """Accuracy of a set of decisions against the labels, and what changed from the source model."""

    images: int
    accuracy: float  # share of images whose decision equals the label (nan without images)
    source_accuracy: float  # the same for the source model's decisions
    fixed: int  # correct here, wrong for the source model
    broken: int  # wrong here, correct for the source model


def review_counts(decisions: np.ndarray, source: np.ndarray, labels: np.ndarray) -> ReviewCounts:
    """Accuracy, source accuracy, fixed and broken of ``decisions``."""
    correct = decisions == labels
    source_correct = source == labels
    n = int(labels.shape[0])
    return ReviewCounts(
        images=n,
        accuracy=float(correct.mean()) if n else float("nan"),
        source_accuracy=float(source_correct.mean()) if n else float("nan"),
        fixed=int(np.sum(correct & ~source_correct)),
        broken=int(np.sum(~correct & source_correct)),
    )


@dataclass(frozen=True)
class ReviewedStream:
    """What the simulated reviewer left behind (see the module docstring)."""

    budget: int
    review_at: float
    reviews_used: int
    reviewed: np.ndarray  # (N,) bool
    decisions: np.ndarray  # (N,) retroactive
    online_decisions: np.ndarray  # (N,) online
    ladders: dict[int, SiteLadder]  # by site (or site group) number
    counts: ReviewCounts
    online_counts: ReviewCounts
    adapted_counts: ReviewCounts  # the label-free decisions, no review applied


def stratified_budgets(sizes: list[int], budget: int) -> list[int]:
    """``budget`` answers shared over units of ``sizes`` images: in proportion to the sizes, by
    largest remainder (a tie goes to the earlier unit), then each unit with images at least one
    answer while the budget allows (taken from the unit given most). The shares sum to ``budget``
    whenever some unit has images."""
    total = sum(sizes)
    if total == 0:
        return [0] * len(sizes)
    quotas = [budget * size / total for size in sizes]
    out = [math.floor(q) for q in quotas]
    for k in sorted(range(len(sizes)), key=lambda k: (out[k] - quotas[k], k))[: budget - sum(out)]:
        out[k] += 1
    for k in sorted((k for k, size in enumerate(sizes) if size and not out[k]), key=lambda k: (-sizes[k], k)):
        donor = max(range(len(sizes)), key=lambda j: (out[j], -j))
        if out[donor] <= 1:
            break
        out[donor] -= 1
        out[k] += 1
    return out


def _plans(
    unit: np.ndarray, site: np.ndarray | None, budget: int, review_at: float
) -> list[tuple[int, np.ndarray, int, int]]:
    """``(unit, its images, images seen when the reviewer comes, answers)`` for every unit."""
    if site is None:
        return [
            (int(u), at, max(1, math.ceil(review_at * at.size)), budget)
            for u in np.unique(unit[unit >= 0])
            for at in [np.flatnonzero(unit == u)]
        ]
    plans: list[tuple[int, np.ndarray, int, int]] = []
    for s in dict.fromkeys(site[unit >= 0].tolist()):  # each site, in order of first arrival
        mine = np.flatnonzero(site == s)
        came = mine[max(1, math.ceil(review_at * mine.size)) - 1]  # the reviewer comes after this image
        units = list(dict.fromkeys(int(u) for u in unit[mine] if u >= 0))
        ats = [np.flatnonzero(unit == u) for u in units]
        seen = [int(np.sum(at <= came)) for at in ats]
        plans += zip(units, ats, seen, stratified_budgets(seen, budget), strict=True)
    return plans


def review_stream(
    reported: np.ndarray,
    source: np.ndarray,
    margin: np.ndarray,
    threshold: np.ndarray | None,
    candidates: Mapping[str, np.ndarray],
    unit: np.ndarray,
    labels: np.ndarray,
    budget: int,
    review_at: float = 1.0,
    rule: LadderRule | None = None,
    seed: int = 0,
    prompted: np.ndarray | None = None,
    site: np.ndarray | None = None,
) -> ReviewedStream:
    """Review every site of one stream with up to ``budget`` answers each (module docstring).

    Args:
        reported: ``(N,)`` the label-free decisions in arrival order.
        source: ``(N,)`` the source model's.
        margin: ``(N,)`` the source margins (nan: not a two-class decision).
        threshold: ``(N,)`` the label-free threshold each image was decided by (None: not thresholds).
        candidates: per candidate, ``(N,)`` its threshold when each image was decided.
        unit: ``(N,)`` the site (or site group) each image was decided in (-1: none; never reviewed).
        labels: ``(N,)`` the true classes (the reviewer's marks).
        budget: K, answers per site.
        review_at: the share of a site's images processed when the reviewer comes, in (0, 1].
        rule: the ladder's testing rule (:class:`LadderRule`'s defaults when None).
        seed: seeds the ladders' random orders.
        prompted: ``(N,)`` I-DiPT's prompted decisions (None: not computed).
        site: ``(N,)`` the site each image was told to be in (None: free-form, every unit a site):
            a site's K answers are shared over its units (module docstring).

    Raises:
        ValueError: arrays of different lengths, a negative budget or ``review_at`` outside (0, 1].
    """
    n = int(reported.shape[0])
    arrays = [source, margin, unit, labels, *candidates.values()]
    arrays += [a for a in (threshold, prompted, site) if a is not None]
    if any(int(a.shape[0]) != n for a in arrays):
        raise ValueError("every array of review_stream needs the same length")
    if isinstance(budget, bool) or int(budget) != budget or budget < 0:
        raise ValueError(f"budget must be a whole number >= 0, not {budget!r}")
    if not 0.0 < review_at <= 1.0:
        raise ValueError(f"review_at must lie in (0, 1], not {review_at!r}")
    rule = rule if rule is not None else LadderRule()
    decisions = reported.astype(np.int64).copy()
    online = decisions.copy()
    reviewed = np.zeros(n, dtype=bool)
    ladders: dict[int, SiteLadder] = {}
    used = 0
    for u, at, moment, answers in _plans(unit, site, budget, review_at):
        images = SiteImages(
            reported=reported[at].astype(np.int64),
            source=source[at].astype(np.int64),
            margin=margin[at].astype(np.float64),
            threshold=None if threshold is None else threshold[at].astype(np.float64),
            candidates={k: v[at].astype(np.float64) for k, v in candidates.items()},
            prompted=None if prompted is None else prompted[at].astype(np.int64),
        )
        seen = images.head(moment)
        ladder = ladders[u] = SiteLadder(str(u), rule, seed)
        marks: dict[int, int] = {}
        spent = 0
        while spent < answers and moment:
            comparison = ladder.active or ladder.start(seen)
            if comparison is None:
                break
            position = comparison.next_position
            if position is None:
                continue
            if position not in marks:
                marks[position] = int(labels[at[position]])
                reviewed[at[position]] = True
                spent += 1
            ladder.review(marks)
        used += spent
        final = ladder.decide(images)
        decisions[at] = final
        online[at[moment:]] = final[moment:]
    return ReviewedStream(
        budget=int(budget),
        review_at=float(review_at),
        reviews_used=used,
        reviewed=reviewed,
        decisions=decisions,
        online_decisions=online,
        ladders=ladders,
        counts=review_counts(decisions, source, labels),
        online_counts=review_counts(online, source, labels),
        adapted_counts=review_counts(reported, source, labels),
    )
