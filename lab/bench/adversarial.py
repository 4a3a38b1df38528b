"""Sites that try to fool a review: a candidate that helps first and harms later, in arrival order.

Used by ``scripts/simulate_ladder.py`` and the tests of the review ladder
(``docs/review-certificates.md``, "The ladder, measured"). A site of ``n`` images, the source
model deciding at margin 0, a ``fit`` candidate deciding at margin 1: the images with margins in
``(0, 1]`` are the candidate's ``d`` disagreements (the source calls them positive, the candidate
negative), and whether the candidate is right on each depends on its label, arranged in arrival
order:

* ``help-then-harm``: every disagreement the candidate gets right arrives before every one it
  gets wrong;
* ``drift``: the share of positives among the disagreements rises along the stream (early ones
  mostly negatives, where the candidate is right);
* ``scan-region-last``: a slide read in scan order whose tumour region (the positives among the
  disagreements) is read last, its edges ragged;
* ``uniform``: no order at all (the candidate's right and wrong disagreements shuffled).

With ``right`` below ``d / 2`` the candidate is harmful over the whole site while its first
disagreements make it look good: a review that samples only what has arrived, and then lets the
candidate decide what arrives later, is fooled.

:func:`reroll_attack` plays a reviewer who undoes and redoes marks to draw a comparison's queue
again until it looks good (``docs/review-certificates.md``, "Starts are kept").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.review.ladder import PROMOTED, LadderRule
from engine.run.review import SiteReview
from engine.run.rows import PredictionRow
from lab.reviewer import ReviewedStream, review_stream

ORDERS = ("help-then-harm", "drift", "scan-region-last")


def adversarial_site(
    order: str, rng: np.random.Generator, n: int = 400, d: int = 120, right: int = 54
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(margin, labels, disagreements)`` of one site (module docstring): the source margins, the
    true classes and the positions of the candidate's disagreements, in arrival order.

    Raises:
        ValueError: an unknown order, or ``right`` outside ``[0, d]``, or ``d`` above ``n``.
    """
    if not 0 <= right <= d <= n:
        raise ValueError(f"need 0 <= right <= d <= n, got {right}, {d}, {n}")
    margin = rng.uniform(-6, 6, n)
    margin[(margin > 0) & (margin <= 1.0)] += 1.0  # only the chosen images are disagreements
    changed = np.sort(rng.choice(n, d, replace=False))
    margin[changed] = rng.uniform(0.01, 1.0, d)
    labels = (margin > 0).astype(np.int64)
    if order == "help-then-harm":
        is_right = np.r_[np.ones(right, bool), np.zeros(d - right, bool)]
    elif order == "drift":
        score = rng.random(d) / np.linspace(0.9, 0.1, d)  # early: mostly negatives (candidate right)
        is_right = np.zeros(d, bool)
        is_right[np.argsort(score)[:right]] = True
    elif order == "scan-region-last":
        is_right = np.r_[np.ones(right, bool), np.zeros(d - right, bool)]
        for a, b in rng.choice(d, (d // 10, 2)):
            is_right[[a, b]] = is_right[[b, a]]
    elif order == "uniform":
        is_right = rng.permutation(np.r_[np.ones(right, bool), np.zeros(d - right, bool)])
    else:
        raise ValueError(f"unknown order {order!r}; expected one of {(*ORDERS, 'uniform')}")
    labels[changed] = np.where(is_right, 0, 1)
    return margin, labels, changed


def review_site(
    margin: np.ndarray, labels: np.ndarray, budget: int, seed: int, at: float = 1.0
) -> ReviewedStream:
    """One such site (its source margins and true classes) through the simulated reviewer: the
    source model decides, the ``fit`` candidate changes every positive decision, and a reviewer
    comes once ``at`` of the images have arrived with ``budget`` answers (queue drawn from ``seed``)."""
    n = margin.shape[0]
    reported = (margin > 0).astype(np.int64)
    return review_stream(
        reported,
        reported,
        margin,
        np.zeros(n),
        {"fit": np.ones(n)},
        np.zeros(n, dtype=np.int64),
        labels,
        budget,
        review_at=at,
        rule=LadderRule(candidates=("fit",)),
        seed=seed,
    )


def site_rows(
    margin: np.ndarray,
    candidates: dict[str, float],
    labels: tuple[str, ...] = ("0", "1"),
    name: str = "img{:04d}.png",
    others: np.ndarray | None = None,
    reference: int = 0,
    **fields: Any,
) -> list[PredictionRow]:
    """The rows a run of the default method makes for a site with these source margins (review
    first: every decision the source model's) and these candidate thresholds.

    ``labels`` name the classes, ``name`` formats an image's name (and key) from its position,
    ``others`` (a model with more than two classes) gives each image's most likely class other than
    ``reference``, the margin being against the reference (``engine.review.classes``), and ``fields``
    set the rows' other fields where a test's run decided otherwise (its ``decision_path``,
    ``decision_reason``, ``seconds``)."""
    rows = []
    for i, m in enumerate(margin.tolist()):
        above = 1 if others is None else int(others[i])
        src = above if m > 0 else (0 if others is None else reference)
        row = PredictionRow(
            index=i,
            position=i,
            key=name.format(i),
            name=name.format(i),
            prediction=src,
            prediction_label=labels[src],
            confidence=0.9,
            positive_prob=(0.9 if src else 0.1) if others is None else float("nan"),
            source_prediction=src,
            source_label=labels[src],
            source_confidence=0.9,
            uncertainty=float("nan"),
            ground_truth=None,
            truth_label=None,
            seconds=0.0,
            decision_path="awaiting-review",
            site_group=0,
            decision_threshold=0.0,
            source_margin=float(m),
            candidates=tuple(sorted(candidates.items())),
            source_classes=None if others is None else (reference, above),
        )
        rows.append(dataclasses.replace(row, **fields) if fields else row)
    return rows


@dataclass(frozen=True)
class Reroll:
    """How one stream of the re-rolling reviewer ended."""

    promoted: bool  # the harmful candidate was promoted
    worse: bool  # the folder's certified decisions ended worse than the source model's
    rerolls: int  # times the reviewer undid and redid the deciding mark to draw the queue again


def reroll_attack(
    order: str,
    seed: int,
    arrive_at: int = 100,
    step: int = 10,
    tries: int = 20,
    budget: int = 20,
    look: int = 5,
) -> Reroll:
    """A reviewer who re-rolls the queue until it looks good for a harmful candidate.

    The site (:func:`adversarial_site`, 400 images) has two candidates: ``shift`` (threshold
    -0.5, wrong on every image it would change, so four answers give it up) and ``fit`` (the
    harmful one). The reviewer comes when ``arrive_at`` images are processed and answers the
    queue truthfully; when ``fit``'s comparison opens and any of the first ``look`` images in its
    queue (the app shows the queue) is one ``fit`` gets wrong, the reviewer undoes the mark that
    decided ``shift``'s comparison, waits for ``step`` more images, redoes the mark and looks
    again, up to ``tries`` times (the audit's attack: before blocks were recorded, the redo drew
    ``fit``'s comparison again on more images with a new random order). Then up to ``budget``
    answers in all; the rest of the folder arrives and is decided by the certified rules.
    """
    margin, labels, _ = adversarial_site(order, np.random.default_rng([seed, 17]))
    shifted = (margin > -0.5) & (margin <= 0)
    labels[shifted] = 0  # shift (class 1 above -0.5) is wrong on every image it changes
    rows = site_rows(margin, {"shift": -0.5, "fit": 1.0})
    review = SiteReview(
        None, f"/attack/{order}/{seed}", 2, seed=seed, rule=LadderRule(candidates=("shift", "fit"))
    )
    review.open(rows[:arrive_at])
    shown, answered, rerolls, deciding = arrive_at, 0, 0, ""
    while answered < budget and (index := review.next_item()) is not None:
        active = review.ladder.active
        if active is not None and active.candidate == "fit" and not active.reviewed and deciding:
            while (
                rerolls < tries and (labels[review.queue()[:look]] == 1).any() and shown + step <= len(rows)
            ):
                review.undo()  # the mark that decided shift's comparison: shift is open again
                review.add_rows(rows[shown : shown + step])
                shown += step
                review.redo()  # decided again: fit's comparison opens (before: drawn again)
                rerolls += 1
                index = review.next_item()
                assert index is not None
            deciding = ""
        was_open = _shift_open(review)
        review.set_mark(review.rows[index].key, int(labels[index]), "attacker")
        answered += 1
        if was_open and not _shift_open(review):  # this mark decided shift's comparison
            deciding = review.rows[index].key
    review.add_rows(rows[shown:])
    promoted = any(c.candidate == "fit" and c.verdict == PROMOTED for c in review.comparisons())
    source = np.array([r.source_prediction for r in rows])
    final = review.decisions()
    return Reroll(promoted, bool(np.mean(final == labels) < np.mean(source == labels)), rerolls)


def _shift_open(review: SiteReview) -> bool:
    return any(c.candidate == "shift" and c.verdict == "open" for c in review.comparisons())
