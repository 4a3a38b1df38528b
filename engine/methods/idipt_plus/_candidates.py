"""Stronger candidates for a site's operating point: computed from the stream, never reported uncertified.

Every candidate of a two-class model is a *threshold on the source margin* ``l_1 - l_0`` of one
site (or site group): an image is called positive when its margin exceeds it. The label-free
operating point (``_operating_point``) moves its threshold only when five guards pass and then
pessimistically; the candidates below move it on weaker evidence, so they are computed beside it
and reported only where a reviewer's uniformly sampled marks certify them better than the rule in
use (``engine/review``, ``docs/review-certificates.md``). Each is a fixed number once its
certification starts, so what a certificate tests is one fixed set of decisions.

* ``fit``: the mixture's own estimate of where the site's two classes divide, without the
  stability guard's pessimistic move (nan when no fit reached an estimate).
* ``shift``: FOA's back-to-source feature shift for the whole site (Niu et al. ICML 2024), frozen:
  the features move by the source mean minus the site's mean, so the margin moves by
  ``Δw · (μ_site − μ_source)`` with ``Δw`` the head's class-1 minus class-0 weights.
* ``prior``: the site's class prior by EM on the source posteriors (Saerens et al. 2002), the
  decision moved by the log-odds of that prior against the source's.

* ``guarded``: the site's operating point once every guard accepted it (``_operating_point``),
  the pessimistic threshold the method reports only with ``report_operating_point`` on; by
  default it waits, like the others, for a certificate (``docs/method.md``, "Review first").

The paper's own decision (I-DiPT's prompted model) is the fifth candidate; it is not a
threshold and is recorded per image by the method.
"""

from __future__ import annotations

import math

import numpy as np

from engine.vocabulary import Rule

FIT, SHIFT, PRIOR, GUARDED, PROMPTED = Rule.FIT, Rule.SHIFT, Rule.PRIOR, Rule.GUARDED, Rule.PROMPTED
THRESHOLD_CANDIDATES = (FIT, SHIFT, PRIOR, GUARDED)
CANDIDATES = (*THRESHOLD_CANDIDATES, PROMPTED)
EM_ITERATIONS = 100
PRIOR_CLIP = (1e-3, 1.0 - 1e-3)  # a prior estimate never reaches 0 or 1 (its log-odds stay finite)


def prior_threshold(margins: np.ndarray, source_prior: float = 0.5) -> float:
    """The margin threshold of the EM prior correction of a site's source posteriors.

    The source posterior of class 1 is ``sigmoid(margin)``; EM re-weights it by the ratio of the
    site's prior to the source's until the mean adjusted posterior is the prior itself. The
    decision ``posterior' > 1/2`` is ``margin > logit(source_prior) − logit(prior)``.

    Args:
        margins: ``(n,)`` the site's source margins.
        source_prior: the source training split's share of class 1.
    """
    if margins.size == 0:
        return math.nan
    p = 1.0 / (1.0 + np.exp(-np.clip(margins, -50.0, 50.0)))
    prior = float(np.clip(p.mean(), *PRIOR_CLIP))
    for _ in range(EM_ITERATIONS):
        a = prior / source_prior * p
        b = (1.0 - prior) / (1.0 - source_prior) * (1.0 - p)
        new = float(np.clip(np.mean(a / (a + b)), *PRIOR_CLIP))
        if abs(new - prior) < 1e-7:
            prior = new
            break
        prior = new
    return _logit(source_prior) - _logit(prior)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))
