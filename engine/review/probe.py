"""Uniform samples of a site's images whose answers only fit (issue 39; the lab's ladder only).

A *probe* is a block of the site's ladder that tests nothing: ``size`` images drawn uniformly from
those processed so far that nobody has answered, asked about so that the threshold fitted to the
answers (``engine.review.fitted``, the rule ``answers``) can move where no label-free candidate
points. Its answers weigh as a uniform sample's in the fit (each stands for ``frame / size``
images); the comparison that tests the fitted threshold counts them exactly where they lie among
its disagreements and samples the rest after it was frozen, so the certificate's level is kept
whatever the sample showed (``docs/review-certificates.md``, "A uniform first sample, built").

``LadderRule.probe`` asks one before any comparison (the answers it takes come out of the
comparisons' share). One asked only when nothing was left to test was measured and not kept
(its answers came too late to certify anything with 20 or fewer: the docs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from engine.review.comparison import SOURCE_RULE, Block, Comparison
from engine.review.sampling import SamplingSequence


def sample(
    in_use: np.ndarray, answers: Mapping[int, int], size: int, rng: np.random.Generator
) -> Comparison | None:
    """A probe of ``size`` images among the ``len(in_use)`` processed so far that no answer covers
    (None: every one is answered). ``in_use``: the decisions of the rule in use (both sides of it:
    it tests nothing); ``rng``: drawn from once, for the order."""
    n = int(in_use.shape[0])
    answered = sorted(p for p in answers if 0 <= p < n)
    left = np.setdiff1d(np.arange(n), np.asarray(answered, dtype=np.int64))
    if size <= 0 or left.size == 0:
        return None
    order = [int(p) for p in rng.permutation(left)[:size]]
    c = Comparison(0, SOURCE_RULE, math.nan, n, in_use, in_use.copy(), 0.0, probe=True)
    # ``known`` holds the images answered before it: left out of its draw (frame)
    c.blocks.append(Block(0, n, order, SamplingSequence(len(order)), known=answered))
    return c


def frame(c: Comparison) -> list[int]:
    """The images probe ``c`` drew from: those processed when it started that were not answered."""
    known = set(c.blocks[0].known) if c.blocks else set()
    return [p for p in range(c.population) if p not in known]
