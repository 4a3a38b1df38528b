"""A simulated reviewer for the benchmark: up to K reviews per site, answered as the stream goes.

:func:`simulate_reviews` walks one site's stream in arrival order. After each image it notes the
image in its group's certificate (``d`` without labels) and, while the site's budget of ``K``
reviews lasts, answers the review queue's next item among the images seen so far, using the
dataset's label as the reviewer's mark: a person reviews each site's images as they come. The
method never sees a review: the label-free decisions are the inputs and only a revert changes
one.

Choices (documented in ``docs/review-certificates.md``):

* **Budget goes where a verdict is open.** Items of groups already verified or reverted are not
  answered (the queue puts them last; a reviewer with a budget stops before them). As every
  other disagreement is answered as soon as it arrives, the reviews are the first disagreements
  of undecided groups, in arrival order, until the budget is spent.
* **A revert turns back all of the group's images**, earlier ones included
  (:attr:`SimulatedReview.decisions`): the report is written after the reviews and states the
  source model's decision for every image of a reverted group. What a live reader saw, where
  only images from the revert on changed, is kept too (:attr:`SimulatedReview.online_decisions`).
* **Reviewed images keep their decision.** A review is not copied into the decision (that
  would score the reviewer, not the method); it only keeps or reverts the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.review.book import CertificateBook
from engine.review.queue import Group, ReviewQueue
from engine.review.rule import DEFAULT_RULE, REVERTED, ReviewRule


@dataclass(frozen=True)
class ReviewCounts:
    """Accuracy of a set of decisions against the labels, and what changed from the source model."""

    images: int
    accuracy: float  # share of images whose decision equals the label (nan without images)
    source_accuracy: float  # the same for the source model's decisions
    fixed: int  # correct here, wrong for the source model
    broken: int  # wrong here, correct for the source model

    def to_dict(self) -> dict[str, Any]:
        return {
            "images": self.images,
            "accuracy": self.accuracy,
            "source_accuracy": self.source_accuracy,
            "fixed": self.fixed,
            "broken": self.broken,
        }


@dataclass(frozen=True)
class SimulatedReview:
    """What the simulated reviewer left behind (see the module docstring)."""

    budget: int  # K
    reviews_used: int
    reviewed: np.ndarray  # (N,) bool: images that were reviewed
    decisions: np.ndarray  # (N,) final decisions: every image of a reverted group -> source
    online_decisions: np.ndarray  # (N,) only images from the revert on -> source
    reverted_at: dict[Group, int]  # reverted group -> first image whose live decision was the source's
    book: CertificateBook
    counts: ReviewCounts  # of ``decisions``
    online_counts: ReviewCounts  # of ``online_decisions``
    adapted_counts: ReviewCounts  # of the label-free decisions, no review applied


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


def simulate_reviews(
    prediction: Sequence[int] | np.ndarray,
    source_prediction: Sequence[int] | np.ndarray,
    group: Sequence[int | None] | np.ndarray,
    label: Sequence[int] | np.ndarray,
    budget: int,
    rule: ReviewRule = DEFAULT_RULE,
    site: Sequence[int] | np.ndarray | None = None,
) -> SimulatedReview:
    """Review one site's stream with up to ``budget`` answers, as a person would as it comes.

    With ``site``, the stream holds several sites (one profile, one adapting model, one book of
    certificates): each site has its own budget, and after an image of a site the reviewer
    answers that site's queue items (a person reviews each site's images as they come).

    Args:
        prediction: ``(N,)`` label-free (adapted) decisions in arrival order.
        source_prediction: ``(N,)`` the frozen source model's decisions.
        group: ``(N,)`` site group of each image (None or a negative number: no group).
        label: ``(N,)`` the true classes (the simulated reviewer's marks).
        budget: K, the most reviews for this site (0: none; the decisions come back unchanged).
        rule: when groups are verified or reverted.
        site: ``(N,)`` the site of each image (None: one site); the budget is per site.

    Raises:
        ValueError: arrays of different lengths, or a negative budget.
    """
    pred = np.asarray(prediction, dtype=np.int64).reshape(-1)
    src = np.asarray(source_prediction, dtype=np.int64).reshape(-1)
    labels = np.asarray(label, dtype=np.int64).reshape(-1)
    groups: list[Group] = [None if g is None or int(g) < 0 else int(g) for g in group]
    n = pred.shape[0]
    if not (src.shape[0] == labels.shape[0] == len(groups) == n):
        raise ValueError("prediction, source_prediction, group and label need the same length")
    if isinstance(budget, bool) or int(budget) != budget or budget < 0:
        raise ValueError(f"budget must be a whole number >= 0, not {budget!r}")
    sites = np.zeros(n, dtype=np.int64) if site is None else np.asarray(site, dtype=np.int64).reshape(-1)
    if sites.shape[0] != n:
        raise ValueError("site needs the same length as prediction")
    book = CertificateBook(rule)
    queues: dict[int, ReviewQueue] = {}
    spent: dict[int, int] = {}
    reviewed = np.zeros(n, dtype=bool)
    reverted_at: dict[Group, int] = {}
    for i in range(n):
        disagreement = bool(pred[i] != src[i])
        if book.note_image(groups[i], disagreement) == REVERTED:
            reverted_at.setdefault(groups[i], i)
        s = int(sites[i])
        queue = queues.setdefault(s, ReviewQueue())
        if disagreement:
            queue.add(i, groups[i])
        while spent.get(s, 0) < budget:
            item = queue.next(book.reviews_per_group(), book.decided_groups(), include_decided=False)
            if item is None:
                break
            queue.remove(item)
            reviewed[item] = True
            spent[s] = spent.get(s, 0) + 1
            g = groups[item]
            if (
                book.add_review(g, bool(pred[item] == labels[item]), bool(src[item] == labels[item]))
                == REVERTED
            ):
                reverted_at.setdefault(g, i + 1)  # image i was shown before its review came
    decisions = pred.copy()
    online = pred.copy()
    group_of = np.array([-1 if g is None else g for g in groups], dtype=np.int64)
    for g, at in reverted_at.items():
        members = group_of == (-1 if g is None else g)
        decisions[members] = src[members]
        later = members & (np.arange(n) >= at)
        online[later] = src[later]
    return SimulatedReview(
        budget=int(budget),
        reviews_used=sum(spent.values()),
        reviewed=reviewed,
        decisions=decisions,
        online_decisions=online,
        reverted_at=reverted_at,
        book=book,
        counts=review_counts(decisions, src, labels),
        online_counts=review_counts(online, src, labels),
        adapted_counts=review_counts(pred, src, labels),
    )
