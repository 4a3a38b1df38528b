"""The class-balance correction of a model with more than two classes (issue 39, item 3).

A two-class model's ``prior`` candidate is a threshold on its margin (``engine.methods.idipt_plus``).
With more classes a threshold against the reference class cannot call an image a third class, so
the correction is kept whole: the site's class priors ``pi`` are estimated by EM on the source
model's posteriors (Saerens, Latinne & Decaestecker 2002: each image's posterior re-weighted by
``pi / pi_source``, ``pi`` the mean re-weighted posterior, until it no longer moves), and an image
is decided by ``argmax_c (log p_c + b_c)`` with the offset vector ``b = log(pi / pi_source)``, the
source model's own call kept on a tie (``b = 0`` is the source model).

Like I-DiPT's prompted decision it is a rule that decides each image itself, not a threshold: each
image's decision is made with the offsets fitted on the images up to it at the last refit (the
schedule of the best-fit threshold, ``engine.review.classes``), so the decisions a comparison
freezes depend only on the images before them, and later images are decided with offsets that
kept being refitted: provisional until a block of their own covers them.

Settings, fixed before anything was measured (they are the two-class ``prior`` candidate's): the
source priors are taken as equal (a model file keeps none; ``f2tta train-source`` trains on what
the source folder holds), at most :data:`ITERATIONS` EM steps, stopped once no prior moves by
:data:`TOLERANCE`, every prior kept within :data:`CLIP` (the offsets stay finite); offered from
:data:`~engine.review.classes.LEAST_IMAGES` images on. A certificate, not these settings, decides
whether it is ever used.
"""

from __future__ import annotations

import numpy as np

from engine.review.classes import refits

ITERATIONS = 100
TOLERANCE = 1e-7
CLIP = (1e-3, 1.0 - 1e-3)


def site_priors(log_probs: np.ndarray) -> np.ndarray:
    """``(C,)`` the site's class priors by EM on the source posteriors ``exp(log_probs)``
    (``(n, C)``), the source's taken as equal (module docstring)."""
    logs = np.asarray(log_probs, dtype=np.float64)
    c = logs.shape[1]
    source = np.full(c, 1.0 / c)
    p = np.exp(logs - logs.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    prior = source.copy()
    for _ in range(ITERATIONS):
        weighted = p * (prior / source)[None]
        new = np.clip((weighted / weighted.sum(axis=1, keepdims=True)).mean(axis=0), *CLIP)
        new /= new.sum()
        done = float(np.abs(new - prior).max()) < TOLERANCE
        prior = new
        if done:
            break
    return prior


def offsets(log_probs: np.ndarray) -> np.ndarray:
    """``(C,)`` the per-class offsets ``log(pi / pi_source)`` of a site's images."""
    c = int(np.asarray(log_probs).shape[1])
    out: np.ndarray = np.log(site_priors(log_probs) * c)
    return out


def decide(log_probs: np.ndarray, source: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``(n,)`` ``argmax_c (log p_c + offset_c)``, the source call ``source`` where it ties."""
    score = np.asarray(log_probs, dtype=np.float64) + np.asarray(offset, dtype=np.float64)[None]
    best = score.argmax(axis=1)
    keep = score[np.arange(score.shape[0]), source] >= score[np.arange(score.shape[0]), best]
    out: np.ndarray = np.where(keep, source, best).astype(np.int64)
    return out


def balanced_decisions(
    log_probs: np.ndarray, source: np.ndarray, earlier: Balanced | None = None
) -> np.ndarray:
    """``(n,)`` each image's class-balance corrected decision when it was decided: the offsets
    fitted on the images up to it at the last refit (the best-fit threshold's schedule,
    :func:`engine.review.classes.refits`); before the first fit, the source model's call. With ``earlier`` (the decisions of a site whose images this one's
    begin with), only the refits beyond its images are fitted."""
    logs = np.asarray(log_probs, dtype=np.float64)
    src = np.asarray(source, dtype=np.int64)
    n = int(logs.shape[0])
    m, known = (0, np.zeros(0, dtype=np.int64)) if earlier is None else earlier.prefix_of(logs, src)
    out = src.copy()
    out[:m] = known
    for k, nxt in refits(n):
        lo, hi = max(k - 1, m), min(nxt - 1, n)
        if hi > lo:  # images this refit decides that the earlier decisions did not reach
            out[lo:hi] = decide(logs[lo:hi], src[lo:hi], offsets(logs[:k]))
    return out


class Balanced:
    """A site's class-balance corrected decisions kept between calls as its images arrive (as
    :class:`engine.review.classes.BestFits` keeps the best-fit thresholds): a site whose images
    begin with those of the last call fits only its later refits."""

    def __init__(self) -> None:
        self.log_probs = np.zeros((0, 0))
        self.source = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.int64)

    def prefix_of(self, log_probs: np.ndarray, source: np.ndarray) -> tuple[int, np.ndarray]:
        """How many of the first images the kept decisions are for, and the decisions."""
        m = int(self.values.shape[0])
        if (
            0 < m <= log_probs.shape[0]
            and self.log_probs.shape[1] == log_probs.shape[1]
            and np.array_equal(self.log_probs, log_probs[:m])
            and np.array_equal(self.source, source[:m])
        ):
            return m, self.values
        return 0, np.zeros(0, dtype=np.int64)

    def of(self, log_probs: np.ndarray, source: np.ndarray) -> np.ndarray:
        """The decisions of :func:`balanced_decisions`, kept for the next call."""
        self.values = balanced_decisions(log_probs, source, self)
        self.log_probs, self.source = np.array(log_probs, dtype=np.float64), np.array(source, dtype=np.int64)
        return self.values
