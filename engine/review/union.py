"""Evidence over a folder that keeps arriving: one certificate over blocks sampled apart.

A comparison is frozen on the images processed when it starts (its first *block*); images keep
arriving after that, and the rule it promotes would decide them too. They are covered by
**blocks** added to the comparison later, each frozen once on the images that arrived since the
block before it and reviewed in its own uniformly random order (``engine.review.sampling``), and,
as far as the evidence reaches, by counting the disagreements nobody sampled yet at their worst
(the candidate wrong and the rule right on every one). ``docs/review-certificates.md``, "A
certificate that covers what it decides".

Why one error level covers every block, every prefix and every moment: write ``K_b(m)`` for block
``b``'s capital against its mean being ``m`` (the hedged betting capital of
:class:`~engine.review.sampling.SamplingSequence`). Evaluated at the block's *true* mean it is a
non-negative martingale from the moment the block is frozen, whenever that is; a review updates
exactly one block, chosen before its answer is seen. So the product ``M = prod_b K_b(mu_b)`` is a
non-negative martingale starting at 1, and by Ville's inequality ``P(M ever >= 1/alpha) <= alpha``.
A claim "the candidate is better on the union of these blocks and those unsampled disagreements"
is made when the smallest product over every set of block totals that the claim's null allows
(:func:`log_evidence`) is at least ``1/alpha``; when the claim is false, the true totals are among
those, so the product at the truth -- ``M`` -- is at least as large. Every claim made, about any
prefix, at any time, is therefore true except with probability ``alpha`` in all: coverage may grow
and be read whenever the queue likes, at the one level the comparison was given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from engine.review.sampling import SamplingSequence

#: Above this many pairs of totals, blocks are combined on a coarser grid of totals (never overstating).
EXACT_PAIRS = 4_000_000


def _min_plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``out[s] = min over i + j = s of a[i] + b[j]``."""
    if a.size < b.size:
        a, b = b, a
    out = np.full(a.size + b.size - 1, np.inf)
    for j, value in enumerate(b):
        if math.isfinite(value):
            window = out[j : j + a.size]
            np.minimum(window, a + value, out=window)
    return out


def _binned(g: np.ndarray, width: int) -> np.ndarray:
    """``g`` on bins of ``width`` totals: each bin's smallest evidence, placed at its lowest total
    (both choices make the minimum over the null smaller: never overstating the evidence)."""
    if width == 1:
        return g
    pad = (-g.size) % width
    padded = np.concatenate([g, np.full(pad, np.inf)]) if pad else g
    binned: np.ndarray = padded.reshape(-1, width).min(axis=1)
    return binned


def log_evidence(blocks: Sequence[SamplingSequence], slack: int = 0) -> float:
    """The log of the smallest product of the blocks' capitals over every set of block totals
    ``T_b`` with ``sum T_b <= slack``: with ``slack`` unsampled disagreements counted at their
    worst (each ``-1``), the evidence that the candidate is better on the blocks and those
    disagreements together (the union's total of ``z`` is above 0).

    Blocks nobody reviewed give no evidence: their totals are taken at their worst (``-size``).
    ``inf`` when no set of totals the null allows is possible.
    """
    slack = int(slack)
    arrays: list[np.ndarray] = []
    offset = 0  # sum of the populations of the arrays kept (index 0 of each is total -size)
    for seq in blocks:
        if seq.count == 0:
            slack += seq.population  # no evidence: its total at its worst frees the others
            continue
        arrays.append(seq.log_evidence_by_total())
        offset += seq.population
    if not arrays:  # nothing reviewed: certain only when even the worst totals leave the union above 0
        return math.inf if slack < 0 else 0.0
    largest = max(a.size for a in arrays)
    pairs = largest * max(1, sum(a.size for a in arrays) - largest)
    width = 1 if pairs <= EXACT_PAIRS else math.ceil(math.sqrt(pairs / EXACT_PAIRS))
    combined = _binned(arrays[0], width)
    for a in arrays[1:]:
        combined = _min_plus(combined, _binned(a, width))
    # index k of ``combined`` holds totals from k * width - offset upwards (each bin at its lowest)
    limit = math.floor((slack + offset) / width)
    if limit < 0:
        return math.inf
    return float(combined[: limit + 1].min(initial=math.inf))


def certified(blocks: Sequence[SamplingSequence], slack: int, alpha: float) -> bool:
    """Whether the union of ``blocks`` and ``slack`` unsampled disagreements is certified better at ``alpha``."""
    return log_evidence(blocks, slack) >= math.log(1.0 / alpha)


def coverage(
    blocks: Sequence[SamplingSequence],
    ends: Sequence[int],
    later: Sequence[int],
    images: int,
    alpha: float,
    known: int = 0,
) -> int:
    """How many of a comparison's images (in arrival order) its certificate covers.

    Args:
        blocks: its blocks' sequences, in arrival order (each frozen on a contiguous run of images).
        ends: each block's end (one past its last image).
        later: the positions of every disagreement after the first block's end, in arrival order
            (in later blocks, or in no block yet).
        images: the images processed so far.
        alpha: the comparison's level.
        known: the sum of ``z`` over the first block's disagreements answered before it was
            frozen and counted exactly (``engine.review.fitted``).

    Returns:
        the largest ``n <= images`` such that every disagreement among the first ``n`` images lies
        in a prefix of blocks certified together, or among the first disagreements after them,
        counted at their worst; 0 when not even the first block is certified. An image that is
        not a disagreement is decided alike by both rules: only disagreements bound the coverage.
    """
    best = 0
    after_first = np.asarray(later, dtype=np.int64)
    for c in range(len(blocks)):
        if not certified(blocks[: c + 1], -known, alpha):
            continue
        after = after_first[after_first >= ends[c]]
        low, high = 0, int(after.size)  # the most disagreements after block c covered at their worst
        while low < high:
            mid = (low + high + 1) // 2
            if certified(blocks[: c + 1], mid - known, alpha):
                low = mid
            else:
                high = mid - 1
        best = max(best, int(after[low]) if low < after.size else images)
    return min(best, images)
