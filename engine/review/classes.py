"""Site rules for a model with more than two classes (issue 39, item 3).

A two-class model's site rules are thresholds on its source margin ``l_1 - l_0``. With more
classes the ladder keeps the same kind of rule on a margin of the same kind: one class is the
*reference* (the class named normal, negative, benign, healthy or background, else class 0;
``engine.run.rows.reference_class``), and each image's margin is the log-probability of its most
likely other class less the reference's. A threshold ``t`` calls that other class where the
margin exceeds ``t`` and the reference elsewhere: ``t`` = 0 is the source model's own call,
``t`` < 0 calls the reference less often (a site where the model calls almost everything normal),
``t`` > 0 more often. Which of the other classes an image gets stays the source model's choice:
these rules move where the reference class ends, not the order of the others.

The same queue, comparisons, certificates and words then serve every model
(``docs/review-certificates.md``, "More than two classes"). Three candidates exist for such a
model: the threshold fitted to the answers (``engine.review.fitted``), the best-fit threshold
below, and the class-balance correction (``engine.review.balance``: per-class offsets from the EM
prior estimate, a rule that decides each image itself, not a threshold); the other label-free
candidates of a two-class model need its source reference's two class means and are not computed.

**Best-fit threshold** (:func:`best_fit_thresholds`): where the site's margins fall into two
groups (all of them; where that calls fewer than a twentieth of them otherwise than the model
does, those on the side of 0 that holds most images). Two Gaussians with one variance, fitted by EM to the margins of the images so far; the
threshold is where an image is equally likely to belong to either, kept only where the margins
do fall into two groups: each holds at least a twentieth of the images, the means are at least two
standard deviations apart, the fitted density has two modes (a dip between the means), and the
mixture is worth its two extra numbers against one Gaussian by the Bayesian information criterion
(a log-likelihood gain above ``log n``). Fixed before any evaluation; a certificate, not
these settings, decides whether it is ever used.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

#: Why a site of such a model has no site threshold to review (said where a two-class site names
#: the method's reason)
ONE_GROUP = "its images do not fall into two groups on the original model's score yet"
LEAST_IMAGES = 20  # images before a best-fit threshold is fitted
SEPARATION = 2.0  # means apart, in standard deviations, for two groups (below: one mode)
LEAST_SHARE = 0.05  # each group's share at least
GROWTH = 0.05  # refitted once the images grew by this share (and by at least REFIT_IMAGES)
REFIT_IMAGES = 10
ITERATIONS = 200


def two_groups(margin: np.ndarray) -> float:
    """The best-fit threshold of ``margin`` (module docstring; nan: no two groups)."""
    x = np.asarray(margin, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < LEAST_IMAGES or float(x.std()) <= 0.0:
        return math.nan
    best: tuple[float, float] | None = None
    for start in (0.0, float(np.median(x))):
        fit = _em(x, x > start)
        if fit is not None and (best is None or fit[0] > best[0]):
            best = fit
    return math.nan if best is None else best[1]


def _em(x: np.ndarray, upper: np.ndarray) -> tuple[float, float] | None:
    """``(log-likelihood, threshold)`` of the tied-variance mixture started from the split
    ``upper`` (None: the start does not split, or the fit does not give two groups)."""
    if not 0 < int(upper.sum()) < x.size:
        return None
    r = upper.astype(np.float64)  # P(upper group) per image
    var_floor = 1e-6 * float(x.var()) + 1e-12
    for _ in range(ITERATIONS):
        fitted = _m_step(x, r, var_floor)
        if fitted is None:
            return None
        share, mu0, mu1, var = fitted
        log_odds = math.log(share / (1 - share)) + ((x - mu0) ** 2 - (x - mu1) ** 2) / (2 * var)
        new = 0.5 * (1.0 + np.tanh(0.5 * log_odds))
        done = float(np.abs(new - r).max()) < 1e-6
        r = new
        if done:
            break
    fitted = _m_step(x, r, var_floor)
    if fitted is None or not LEAST_SHARE <= fitted[0] <= 1 - LEAST_SHARE:
        return None
    share, mu0, mu1, var = fitted
    lo, hi = (mu0, mu1) if mu0 < mu1 else (mu1, mu0)
    p_hi = share if mu1 > mu0 else 1 - share
    if hi - lo < SEPARATION * math.sqrt(var):
        return None
    mixed = _log_density(x, lo, hi, var, p_hi)
    one = -0.5 * x.size * (math.log(2 * math.pi * float(x.var())) + 1.0)
    if mixed.sum() - one <= math.log(x.size):  # BIC: two more numbers must pay for themselves
        return None
    grid = np.linspace(lo, hi, 201)
    density = _log_density(grid, lo, hi, var, p_hi)
    if not float(density.min()) < min(float(density[0]), float(density[-1])) - 1e-9:
        return None  # one mode: the smaller group is a shoulder of the larger, not a group
    # equal posteriors: (x - lo)^2 - (x - hi)^2 = 2 var log((1 - p_hi) / p_hi)
    threshold = (lo + hi) / 2 + var * math.log((1 - p_hi) / p_hi) / (hi - lo)
    return float(mixed.sum()), float(threshold)


def _m_step(x: np.ndarray, r: np.ndarray, var_floor: float) -> tuple[float, float, float, float] | None:
    """``(share, mean below, mean above, variance)`` given each image's P(upper group) ``r``
    (None: one group holds everything)."""
    share = float(r.mean())
    if not 0.0 < share < 1.0:
        return None
    mu1 = float((r * x).sum() / r.sum())
    mu0 = float(((1 - r) * x).sum() / (1 - r).sum())
    var = max(float((r * (x - mu1) ** 2 + (1 - r) * (x - mu0) ** 2).mean()), var_floor)
    return share, mu0, mu1, var


def _log_density(x: np.ndarray, lo: float, hi: float, var: float, p_hi: float) -> np.ndarray:
    """The mixture's log-density at each of ``x``."""
    joint = (
        -((x[:, None] - np.array([lo, hi])[None]) ** 2) / (2 * var) + np.log(np.array([1 - p_hi, p_hi]))[None]
    )
    top = joint.max(axis=1)
    out: np.ndarray = (
        top + np.log(np.exp(joint - top[:, None]).sum(axis=1)) - 0.5 * math.log(2 * math.pi * var)
    )
    return out


def site_fit(margin: np.ndarray) -> float:
    """The best-fit threshold of a site's margins so far: of all of them, or, where that calls
    fewer than a twentieth of the images otherwise than 0 does (:data:`LEAST_SHARE`: the split of
    all the margins is then the model's own, and the group it missed is smaller than any group the
    mixture keeps) or finds no two groups, of those on the side of 0 that holds most images (a
    site where the model calls almost everything one way hides its second group there; nan:
    neither)."""
    t = two_groups(margin)
    if math.isfinite(t) and _moves(margin, t):
        return t
    side = margin[margin <= 0] if np.sum(margin <= 0) * 2 >= margin.size else margin[margin > 0]
    t = two_groups(side)
    return t if math.isfinite(t) and _moves(margin, t) else math.nan


def _moves(margin: np.ndarray, t: float) -> bool:
    """Whether ``t`` calls at least a twentieth of the images (one at least) otherwise than 0 does."""
    moved = int(np.sum((margin > t) != (margin > 0)))
    return moved >= max(1.0, LEAST_SHARE * margin.size)


def best_fit_thresholds(margin: np.ndarray, earlier: BestFits | None = None) -> np.ndarray:
    """``(n,)`` each image's best-fit threshold when it was decided: fitted on the images up to it
    at the last refit (a refit once the images grew by :data:`GROWTH`, at least
    :data:`REFIT_IMAGES`, from :data:`LEAST_IMAGES` on), so the value a comparison freezes depends
    only on the images before it (nan: none yet, or no two groups). With ``earlier`` (the fits of a
    site whose images this one's begin with), only the refits beyond its images are fitted."""
    n = int(margin.shape[0])
    m, known = (0, np.zeros(0)) if earlier is None else earlier.prefix_of(margin)
    out = np.full(n, math.nan)
    out[:m] = known
    for k, nxt in refits(n):
        if nxt - 1 > m:  # images this refit decides that the earlier fits did not reach
            value = known[k - 1] if k <= m else site_fit(margin[:k])
            out[max(k - 1, m) : min(nxt, n + 1) - 1] = value
    return out


def refits(n: int) -> Iterator[tuple[int, int]]:
    """The refits of a site of ``n`` images, ``(k, next)``: fitted on the first ``k`` images, each
    decides the images from the ``k``-th up to the ``next``-th (from :data:`LEAST_IMAGES` on, a
    refit once the images grew by :data:`GROWTH` and at least :data:`REFIT_IMAGES`); shared by
    every candidate refitted as a site's images arrive (:mod:`engine.review.balance` too)."""
    k = LEAST_IMAGES
    while k <= n:
        nxt = max(k + REFIT_IMAGES, math.ceil(k * (1 + GROWTH)))
        yield k, nxt
        k = nxt


class BestFits:
    """A site's best-fit thresholds kept between calls as its images arrive: a site whose margins
    begin with those of the last call fits only its later refits (a 20 000-tile slide refitted every
    refit at each new batch took seconds a batch); any other site is fitted from the start."""

    def __init__(self) -> None:
        self.margin = np.zeros(0)
        self.values = np.zeros(0)

    def prefix_of(self, margin: np.ndarray) -> tuple[int, np.ndarray]:
        """How many of ``margin``'s first images the kept fits are for, and their values."""
        m = int(self.margin.shape[0])
        if m <= margin.shape[0] and np.array_equal(self.margin, margin[:m], equal_nan=True):
            return m, self.values
        return 0, np.zeros(0)

    def of(self, margin: np.ndarray) -> np.ndarray:
        """The best-fit thresholds of ``margin`` (:func:`best_fit_thresholds`), kept for the next call."""
        self.values = best_fit_thresholds(margin, self)
        self.margin = margin.copy()
        return self.values
