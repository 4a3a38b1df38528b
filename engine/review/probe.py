"""Samples of a site's images whose answers only fit (issue 39; the lab's ladder only).

A *probe* is the first block of the site's ladder and tests nothing: ``size`` images drawn
uniformly from those processed so far (or, ``LadderRule.probe_strata``, one from each of ``size``
runs of equal count along the source margin), asked about so that the threshold fitted to the answers
(``engine.review.fitted``, the rule ``answers``) can move where no label-free candidate points. Its
answers weigh as a uniform sample's in the fit (each stands for ``population / size`` images); the comparison that tests the fitted threshold counts them exactly where they lie among
its disagreements and samples the rest after it was frozen, so the certificate's level is kept
whatever the sample showed (``docs/review-certificates.md``, "A uniform first sample, built").

``LadderRule.probe`` asks one before any comparison (the answers it takes come out of the
comparisons' share). One asked only when nothing was left to test was measured and not kept
(its answers came too late to certify anything with 20 or fewer: the docs).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from engine.review.comparison import SOURCE_RULE, Block, Comparison
from engine.review.sampling import SamplingSequence


def sample(
    in_use: np.ndarray, size: int, rng: np.random.Generator, margin: np.ndarray | None = None
) -> Comparison | None:
    """A probe of ``size`` of the ``len(in_use)`` images processed so far (None: none, or no size).
    ``in_use``: the decisions of the rule in use (both sides of it: it tests nothing); ``rng``:
    drawn from for the order. ``margin`` given: stratified, one image drawn from each of ``size``
    runs of (nearly) equal count along the margin, asked in a random order; each image's chance of
    being drawn is still about ``size / n``, so the answers weigh as a uniform sample's."""
    n = int(in_use.shape[0])
    if size <= 0 or n == 0:
        return None
    if margin is None or n <= size:
        order = [int(p) for p in rng.permutation(n)[:size]]
    else:
        ranked = np.argsort(margin, kind="stable")
        edges = np.linspace(0, n, size + 1).round().astype(np.int64)
        drawn = [int(ranked[rng.integers(a, b)]) for a, b in itertools.pairwise(edges)]
        order = [drawn[i] for i in rng.permutation(size)]
    c = Comparison(0, SOURCE_RULE, math.nan, n, in_use, in_use.copy(), 0.0, probe=True)
    c.blocks.append(Block(0, n, order, SamplingSequence(len(order))))
    return c
