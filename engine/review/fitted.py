"""A threshold fitted to the answers a site's reviews gave so far (issue 39, "answers that fit").

The label-free candidates are fitted without labels; the answers are only used to *test* them.
This candidate is fitted on the answers themselves: a threshold on the source margin chosen to
decide the answered images better than the rule in use, each answer weighted by how likely its
image was to be drawn (the blocks sample their disagreements uniformly, at different rates, so an
answer from a block of 40 disagreements with 4 reviewed stands for ten images; Horvitz-Thompson).

Validity (``docs/review-certificates.md``, "Answers that fit"): the comparison that tests it
counts the answered images among its disagreements **exactly** (the candidate was chosen to be
right on them, so they are no sample of anything) and samples the rest uniformly, in an order
drawn after the threshold was frozen: its certificate is a claim about the total over all its
disagreements, the answered part known and the unanswered part bounded by the sampling sequence.

The threshold is kept where every image it decides otherwise than the rule in use lies in a
region some block sampled (its disagreements have a drawing probability above 0): outside them
the answers say nothing. It may lie past the outermost answer (a sample whose every answer says
"move" moves past all of them), by as little as the images allow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from engine.review.images import calls


def inclusion(n: int, blocks: Iterable[tuple[Sequence[int], int]]) -> np.ndarray:
    """Each image's probability of having been drawn: ``1 - prod (1 - reviewed_b / size_b)`` over
    the blocks ``b`` whose disagreements hold it (``blocks``: ``(disagreements, reviewed)``)."""
    missed = np.ones(n, dtype=np.float64)
    for order, reviewed in blocks:
        if not order or reviewed <= 0:
            continue
        at = np.asarray([p for p in order if p < n], dtype=np.int64)
        missed[at] *= 1.0 - min(reviewed, len(order)) / len(order)
    out: np.ndarray = 1.0 - missed
    return out


def fitted_threshold(
    margin: np.ndarray,
    in_use: np.ndarray,
    answers: Mapping[int, int],
    drawn: np.ndarray,
    least: float = 0.0,
    classes: np.ndarray | None = None,
) -> float:
    """The threshold on ``margin`` that the answers show best against the rule in use (nan: none).

    Args:
        margin: ``(n,)`` the source margins (nan anywhere: not a two-class site, nan).
        in_use: ``(n,)`` the decisions of the rule in use.
        answers: position -> the reviewer's class, for answered images among the ``n``.
        drawn: ``(n,)`` each image's probability of having been drawn (:func:`inclusion`).
        least: the weighted gain a threshold must exceed to be returned.
        classes: ``(n, 2)`` with more than two classes, the two classes each image's threshold
            chooses between (:func:`engine.review.images.calls`; None: classes 0 and 1).

    Returns:
        the midpoint between two neighbouring answered margins (or, past the outermost answer,
        between it and the next image's margin) whose threshold has the largest weighted gain over
        the rule in use (ties: the one that decides fewest images otherwise), among thresholds
        whose every changed decision lies where some block sampled; nan when none gains more than
        ``least``.
    """
    return _best(margin, in_use, answers, drawn, least, classes, -1)[2]


def fitted_rule(
    margin: np.ndarray,
    in_use: np.ndarray,
    answers: Mapping[int, int],
    drawn: np.ndarray,
    classes: np.ndarray | None = None,
) -> tuple[float, int]:
    """:func:`fitted_threshold`, and with more than two classes the class the images it moves from
    their reference class are called: each image's own most likely other class (-1) wherever a
    threshold calling those gains on the answers; only where none does, one class for all of them,
    a class some answer gave (``engine.review.images.calls``), the one with the largest weighted
    gain (ties: the one changing fewest decisions, then the lowest class). ``(nan, -1)``: none
    gains."""
    best = _best(margin, in_use, answers, drawn, 0.0, classes, -1)
    other = -1
    if classes is not None and not math.isfinite(best[2]):  # the model's own classes first
        n = int(margin.shape[0])
        named = sorted({int(y) for p, y in answers.items() if 0 <= p < n})
        for c in named:
            fit = _best(margin, in_use, answers, drawn, 0.0, classes, c)
            if fit[0] > best[0] + 1e-12 or (abs(fit[0] - best[0]) <= 1e-12 and fit[1] < best[1]):
                best, other = fit, c
    return (best[2], other) if math.isfinite(best[2]) else (math.nan, -1)


def _best(
    margin: np.ndarray,
    in_use: np.ndarray,
    answers: Mapping[int, int],
    drawn: np.ndarray,
    least: float,
    classes: np.ndarray | None,
    other: int,
) -> tuple[float, int, float]:
    """``(gain, changed, threshold)`` of the best threshold calling ``other`` (:func:`fitted_threshold`)."""
    n = int(margin.shape[0])
    known = sorted((p, y) for p, y in answers.items() if 0 <= p < n and drawn[p] > 0)
    if len(known) < 2 or not np.isfinite(margin).all():
        return least, n + 1, math.nan
    at = np.asarray([p for p, _ in known], dtype=np.int64)
    y = np.asarray([v for _, v in known], dtype=np.int64)
    weight = 1.0 / drawn[at]
    rule_right = (in_use[at] == y).astype(np.float64)
    best, best_size, best_t = least, n + 1, math.nan
    unsampled = drawn <= 0
    for t in _cuts(margin, margin[at]):
        decided = calls(margin, classes, t, other)
        changed = decided != in_use
        if not changed.any() or bool((changed & unsampled).any()):
            continue
        mine = changed[at]
        right = (decided[at] == y).astype(np.float64)
        gain = float(np.sum(weight[mine] * (right[mine] - rule_right[mine])))
        size = int(changed.sum())
        if gain > best + 1e-12 or (abs(gain - best) <= 1e-12 and size < best_size and gain > least):
            best, best_size, best_t = gain, size, float(t)
    return best, best_size, best_t


def _cuts(margin: np.ndarray, answered: np.ndarray) -> np.ndarray:
    """The thresholds worth trying: one between each two neighbouring answered margins, and one
    beyond each end, halfway to the next image's margin (one past it where none is): a threshold
    past every answer moves the outermost answered images too, and among the thresholds that do,
    this one moves fewest images."""
    cuts = np.unique(answered)
    lower, upper = margin[margin < cuts[0]], margin[margin > cuts[-1]]
    low = (cuts[0] + float(lower.max())) / 2.0 if lower.size else float(cuts[0]) - 1.0
    high = (cuts[-1] + float(upper.min())) / 2.0 if upper.size else float(cuts[-1]) + 1.0
    out: np.ndarray = np.concatenate([[low], (cuts[:-1] + cuts[1:]) / 2.0, [high]])
    return out
