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

* **online**, what a reader was shown as each image arrived: the label-free decisions up to the
  review, after it the rules the reviews put in use (an image beyond what a certificate covers is
  shown with the promoted rule's call, provisionally: ``engine.review.ladder``);
* **retroactive**, the report written afterwards: every image of the site decided by the highest
  rule the reviews put in use *whose certificate covers it* (the operating point's latest
  threshold where no review moved the rule; a promoted candidate's frozen threshold where its
  certificate covers the image, the rule below it elsewhere; the source model's where the
  operating point was turned back). With ``budget`` 0 this is the label-free report: each site
  decided by its latest operating point.

A reviewer who comes back when the site is done (``budget_at_end``) answers the queue again with
every image processed: the coverage of the rules in use is extended to the images that arrived
after the first visit before the next candidate is tested, as in the app.

**A site decided in several units** (a folder that mixed two appearances and was split in two
parts, ``engine.methods.idipt_plus._split``): given each image's told ``site``, the site's K
answers are given as the app's queue gives a clinician's (``engine.run.review_parts.serving_order``):
each to the unit (a part, or the unit of the images decided before the split) with the fewest
answers relative to the images it had when the reviewer came, among those with something left to
test, so the answers fall on the parts in proportion while each has something to test and go to
the others once one has none. Each unit has its own ladder: every certificate is about one part,
from a uniform sample of that part. Without ``site`` (the free-form protocol) every unit has K
answers, as every site does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.review.comparison import PROMOTED, Comparison
from engine.review.ladder import LadderRule, SiteImages, SiteLadder
from engine.run.review import SiteReview


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


def answer_queue(
    review: SiteReview, labels: np.ndarray, budget: int | None = None, reviewer: str = "simulated reviewer"
) -> int:
    """Answer ``review``'s queue with ``labels`` (by row) as a reviewer who knows them would, up to
    ``budget`` answers (None: until it is empty); returns the answers given."""
    answered = 0
    while (budget is None or answered < budget) and (index := review.next_item()) is not None:
        review.set_mark(review.rows[index].key, int(labels[index]), reviewer)
        answered += 1
    return answered


def false_promotions(
    comparisons: list[Comparison], labels: np.ndarray, name: str | None = None
) -> tuple[int, int]:
    """``(promoted, false)`` among ``comparisons`` (of candidate ``name``; None: any): a promotion
    is false when its disagreements, answered ones included, are not better decided."""
    promoted = false = 0
    for c in comparisons:
        if c.verdict == PROMOTED and (name is None or c.candidate == name):
            promoted += 1
            at = np.flatnonzero(c.after[: c.population] != c.before[: c.population])
            false += int(np.sum(c.after[at] == labels[at]) - np.sum(c.before[at] == labels[at])) <= 0
    return promoted, false


def answer_ladder(ladder: SiteLadder, images: SiteImages, labels: np.ndarray, budget: int) -> dict[int, int]:
    """Answer one site's ladder directly (no run's review: a lab ladder, ``LadderRule.probe``) on
    ``images`` with ``labels``, up to ``budget`` answers; returns them by position."""
    answered: dict[int, int] = {}
    while len(answered) < budget and (c := ladder.active or ladder.open_next(images)) is not None:
        position = c.next_position
        assert position is not None, "an open comparison has an image to ask about"
        answered[position] = int(labels[position])
        ladder.review(answered)
    return answered


@dataclass(frozen=True)
class ReviewedStream:
    """What the simulated reviewer left behind (see the module docstring)."""

    budget: int
    review_at: float
    reviews_used: int
    reviewed: np.ndarray  # (N,) bool
    provisional: np.ndarray  # (N,) bool: shown with a promoted rule's call no certificate covers
    decisions: np.ndarray  # (N,) retroactive: what the certificates cover
    online_decisions: np.ndarray  # (N,) online
    ladders: dict[int, SiteLadder]  # by site (or site group) number
    images: dict[int, SiteImages]  # what each ladder decided on, by the same number
    counts: ReviewCounts
    online_counts: ReviewCounts
    adapted_counts: ReviewCounts  # the label-free decisions, no review applied


@dataclass
class _Unit:
    """One unit of a site under review: its images, what the reviewer saw of them, its ladder and
    the answers it was given (positions in its own arrival order)."""

    at: np.ndarray  # the unit's images, as positions in the stream
    moment: int  # its images processed when the reviewer came
    images: SiteImages
    ladder: SiteLadder
    marks: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.seen = self.images.head(self.moment)  # what every block is frozen on

    def next_position(self) -> int | None:
        """The image its ladder asks about next (opening the next block on the images seen when
        none is open, as the app's queue does); None: nothing left to test."""
        for _ in range(4 * len(self.ladder.rule.candidates) + 16):  # each pass opens a block or ends
            if not self.moment:
                return None
            self.ladder.review(self.marks)
            c = self.ladder.active
            if c is None:
                self.ladder.complete = self.moment == self.at.size  # the reviewer came after the last
                opened = self.ladder.open_next(self.seen)
                self.ladder.frozen.clear()
                if opened is None:
                    return None
                continue
            position = c.next_position
            if position is not None and position not in self.marks:
                return position
        return None


def _sites(
    unit: np.ndarray, site: np.ndarray | None, review_at: float
) -> list[list[tuple[int, np.ndarray, int]]]:
    """Per site, ``(unit, its images, images seen when the reviewer comes)`` for each of its units;
    without ``site`` every unit is a site."""
    if site is None:
        return [
            [(int(u), at, max(1, math.ceil(review_at * at.size)))]
            for u in np.unique(unit[unit >= 0])
            for at in [np.flatnonzero(unit == u)]
        ]
    out: list[list[tuple[int, np.ndarray, int]]] = []
    for s in dict.fromkeys(site[unit >= 0].tolist()):  # each site, in order of first arrival
        mine = np.flatnonzero(site == s)
        came = mine[max(1, math.ceil(review_at * mine.size)) - 1]  # the reviewer comes after this image
        units = list(dict.fromkeys(int(u) for u in unit[mine] if u >= 0))
        ats = [np.flatnonzero(unit == u) for u in units]
        out.append([(u, at, int(np.sum(at <= came))) for u, at in zip(units, ats, strict=True)])
    return out


def _serve(units: list[_Unit], budget: int, labels: np.ndarray, reviewed: np.ndarray) -> int:
    """Give a site's ``budget`` answers as the app's queue does (module docstring); the answers given."""
    total = sum(x.moment for x in units) or 1
    spent = 0
    while spent < budget:
        order = sorted(
            range(len(units)), key=lambda k: (len(units[k].marks) * total / max(1, units[k].moment), k)
        )
        for k in order:
            position = units[k].next_position()
            if position is not None:
                break
        else:
            return spent
        x = units[k]
        x.marks[position] = int(labels[x.at[position]])
        reviewed[x.at[position]] = True
        spent += 1
        x.ladder.review(x.marks)
    return spent


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
    budget_at_end: int = 0,
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
        budget_at_end: answers per site the reviewer gives on coming back when the site is done.

    Raises:
        ValueError: arrays of different lengths, a negative budget or ``review_at`` outside (0, 1].
    """
    n = int(reported.shape[0])
    arrays = [source, margin, unit, labels, *candidates.values()]
    arrays += [a for a in (threshold, prompted, site) if a is not None]
    if any(int(a.shape[0]) != n for a in arrays):
        raise ValueError("every array of review_stream needs the same length")
    for value in (budget, budget_at_end):
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"budget must be a whole number >= 0, not {value!r}")
    if not 0.0 < review_at <= 1.0:
        raise ValueError(f"review_at must lie in (0, 1], not {review_at!r}")
    rule = rule if rule is not None else LadderRule()
    decisions = reported.astype(np.int64).copy()
    online = decisions.copy()
    reviewed = np.zeros(n, dtype=bool)
    provisional = np.zeros(n, dtype=bool)
    ladders: dict[int, SiteLadder] = {}
    unit_images: dict[int, SiteImages] = {}
    used = 0
    for plan in _sites(unit, site, review_at):
        units = []
        for u, at, moment in plan:
            images = SiteImages(
                reported=reported[at].astype(np.int64),
                source=source[at].astype(np.int64),
                margin=margin[at].astype(np.float64),
                threshold=None if threshold is None else threshold[at].astype(np.float64),
                candidates={k: v[at].astype(np.float64) for k, v in candidates.items()},
                prompted=None if prompted is None else prompted[at].astype(np.int64),
            )
            units.append(_Unit(at, moment, images, ladders.setdefault(u, SiteLadder(str(u), rule, seed))))
            unit_images[u] = images
        used += _serve(units, budget, labels, reviewed)
        for x in units:  # shown as they arrived after the visit: the rules it put in use
            online[x.at[x.moment :]] = x.ladder.shown(x.images)[x.moment :]
        if budget_at_end:
            for x in units:
                x.moment, x.seen = int(x.at.size), x.images
            used += _serve(units, budget_at_end, labels, reviewed)
        for x in units:
            decisions[x.at] = x.ladder.certified(x.images)
            provisional[x.at] = x.ladder.shown(x.images) != decisions[x.at]
    return ReviewedStream(
        budget=int(budget),
        review_at=float(review_at),
        reviews_used=used,
        reviewed=reviewed,
        provisional=provisional,
        decisions=decisions,
        online_decisions=online,
        ladders=ladders,
        images=unit_images,
        counts=review_counts(decisions, source, labels),
        online_counts=review_counts(online, source, labels),
        adapted_counts=review_counts(reported, source, labels),
    )
