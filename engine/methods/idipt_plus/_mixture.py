"""Two-class mixtures and margin thresholds for I-DiPT+'s operating point (numpy, float64).

These are the statistical pieces of :mod:`._operating_point`: a weighted-EM mixture of one
Gaussian per class with a tied diagonal covariance, the naming of its components by the source
model's margin, and the threshold on the source margin that reproduces the mixture's split (with
how often it disagrees). They run on small arrays (a site group's last images × a few feature
directions) on the CPU, so a live run and a replay from cached source passes compute exactly the
same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VAR_FLOOR = 1e-4  # smallest variance per direction (whitened units: the source's is about 1)


@dataclass(frozen=True)
class Mixture:
    """A fitted two-component mixture.

    Attributes:
        resp: ``(N, 2)`` responsibilities; column 1 is the component with the higher mean margin
            once named (:func:`named_by_margin`).
        means: ``(2, K)`` component means.
        var: ``(K,)`` the tied diagonal variance.
        shares: ``(2,)`` component shares.
    """

    resp: np.ndarray
    means: np.ndarray
    var: np.ndarray
    shares: np.ndarray

    @property
    def separation(self) -> float:
        """Distance of the two means in tied standard deviations."""
        return float(np.sqrt((((self.means[0] - self.means[1]) ** 2) / self.var).sum()))


def _m_step(
    x: np.ndarray, total: np.ndarray, sq_sum: np.ndarray, r1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Means ``(2, K)``, tied variance ``(K,)``, shares ``(2,)`` and squared means ``(2, K)`` given
    P(component 1) per point; ``total`` and ``sq_sum`` are ``x``'s column sums of ``x`` and ``x**2``
    (the same for every step of a fit, so computed once: :func:`column_sums`)."""
    n = len(x)
    mass1 = r1.sum()
    sum1 = r1 @ x
    mass = np.array([n - mass1, mass1])
    sums = np.concatenate((total - sum1, sum1)).reshape(2, -1)
    means = sums / np.maximum(mass, 1e-12)[:, None]
    squares = means**2
    # sum_i r_ic (x_i - mu_c)^2 = sum_i r_ic x_i^2 - mass_c mu_c^2, summed over both components
    var = np.maximum((sq_sum - (mass[:, None] * squares).sum(axis=0)) / max(n, 1), VAR_FLOOR)
    return means, var, mass / max(n, 1), squares


def _log_odds(
    x: np.ndarray, means: np.ndarray, var: np.ndarray, prior: np.ndarray, squares: np.ndarray
) -> np.ndarray:
    """log P(component 1 | x) - log P(component 0 | x) for every point (the x^2 terms cancel);
    ``squares``: ``means**2``."""
    w = (means[1] - means[0]) / var
    bias = np.log(max(prior[1], 1e-12) / max(prior[0], 1e-12)) - 0.5 * float(
        ((squares[1] - squares[0]) / var).sum()
    )
    out: np.ndarray = x @ w + bias
    return out


def _sigmoid(a: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * a))
    return out


def fit_mixture(
    x: np.ndarray,
    init: np.ndarray,
    iterations: int,
    equal_share_iterations: int,
    sums: tuple[np.ndarray, np.ndarray] | None = None,
) -> Mixture:
    """EM for two Gaussians with a tied diagonal covariance, started from hard labels ``init``.

    The first ``equal_share_iterations`` E-steps weigh both components equally: started from
    the source model's decisions on a site whose threshold cuts deep into one class, the first
    M-step sees a small component and a wide one, and estimated shares would shrink the small one
    at every step until it held nothing; equal shares first let the components move to the
    clusters, then the shares are estimated freely (a genuine class imbalance is kept).

    Args:
        x: ``(N, K)`` points.
        init: ``(N,)`` 0/1 starting labels (both present).
        iterations: EM iterations at most (stops once responsibilities settle).
        equal_share_iterations: E-steps with equal shares at the start.
        sums: ``(x.sum(axis=0), (x**2).sum(axis=0))`` when known (:func:`fit_best_mixture`
            fits several starts to the same points); computed here when None.
    """
    total, sq_sum = sums if sums is not None else column_sums(x)
    r1 = np.asarray(init, dtype=np.float64)
    half = np.full(2, 0.5)
    for it in range(iterations):
        means, var, shares, squares = _m_step(x, total, sq_sum, r1)
        new = _sigmoid(_log_odds(x, means, var, half if it < equal_share_iterations else shares, squares))
        settled = it >= equal_share_iterations and float(np.abs(new - r1).max()) < 1e-4
        r1 = new
        if settled:
            break
    means, var, shares, _ = _m_step(x, total, sq_sum, r1)
    return Mixture(np.stack([1.0 - r1, r1], axis=1), means, var, shares)


def column_sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x``'s column sums and column sums of squares, ``((K,), (K,))``: what every M-step reads of
    ``x`` besides its responsibility-weighted sum."""
    return x.sum(axis=0), (x**2).sum(axis=0)


def log_likelihood(x: np.ndarray, mix: Mixture) -> float:
    """The mixture's log-likelihood of ``x`` (up to a constant)."""
    w = mix.means / mix.var  # (2, K)
    per = (
        np.log(np.maximum(mix.shares, 1e-12))[None]
        + x @ w.T
        - 0.5 * ((mix.means**2) / mix.var).sum(axis=1)[None]
    )
    top = per.max(axis=1)
    mixed = top + np.log(np.exp(per - top[:, None]).sum(axis=1))
    return float(mixed.sum() - 0.5 * ((x**2) / mix.var).sum() - 0.5 * len(x) * np.log(mix.var).sum())


def starts(x: np.ndarray, margins: np.ndarray) -> list[np.ndarray]:
    """EM's starting splits: the source decisions, the leading principal direction, the median margin.

    One start alone lands in different local optima on resamples of the same group (a bootstrap
    then reports an instability that is EM's, not the data's); the best of three is stable.
    """
    centred = x - x.mean(axis=0)
    direction = np.linalg.svd(centred, full_matrices=False)[2][0]
    out = [(margins > 0).astype(np.float64), (centred @ direction > 0).astype(np.float64)]
    out.append((margins > np.median(margins)).astype(np.float64))
    return [s for s in out if 1 <= s.sum() <= len(s) - 1]


def fit_best_mixture(
    x: np.ndarray, margins: np.ndarray, iterations: int, equal_share_iterations: int
) -> Mixture | None:
    """The most likely of the mixtures fitted from :func:`starts` (None when no start splits the data)."""
    best: tuple[float, Mixture] | None = None
    sums = column_sums(x)
    for init in starts(x, margins):
        mix = fit_mixture(x, init, iterations, equal_share_iterations, sums)
        score = log_likelihood(x, mix)
        if best is None or score > best[0]:
            best = (score, mix)
    return None if best is None else best[1]


def edge_distance(margins: np.ndarray, threshold: float) -> float:
    """How far ``threshold`` lies from the bulk on either side, in that side's standard deviations.

    The larger of ``(threshold - mean(below)) / sd(below)`` and ``(mean(above) - threshold) /
    sd(above)``. At the edge of a tight cluster it is large; a cut through one spread-out class
    gives about 1.7 (uniform) or less (Gaussian), whichever side is looked at.
    """
    below, above = margins[margins <= threshold], margins[margins > threshold]
    out = 0.0
    if len(below) > 2:
        out = max(out, float((threshold - below.mean()) / max(float(below.std()), 1e-9)))
    if len(above) > 2:
        out = max(out, float((above.mean() - threshold) / max(float(above.std()), 1e-9)))
    return out


def named_by_margin(mix: Mixture, margins: np.ndarray) -> Mixture:
    """The mixture with its components ordered so that column 1 has the higher mean source margin."""
    mass = np.maximum(mix.resp.sum(axis=0), 1e-12)
    mean_margin = (mix.resp * margins[:, None]).sum(axis=0) / mass
    if mean_margin[1] >= mean_margin[0]:
        return mix
    return Mixture(mix.resp[:, ::-1].copy(), mix.means[::-1].copy(), mix.var, mix.shares[::-1].copy())


def margin_threshold(margins: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """The threshold on ``margins`` whose split disagrees least with the 0/1 labels ``positive``.

    Returns:
        ``(threshold, disagreement)``: the threshold lies halfway between two neighbouring
        margins (one unit beyond the extremes when every point is on one side), and the
        disagreement is the share of points it puts on the other side than ``positive`` does.
    """
    order = np.argsort(margins, kind="stable")
    m = margins[order]
    pos = positive[order].astype(np.float64)
    # errors when the j lowest margins are called negative: positives among them + negatives above
    below = np.concatenate([[0.0], np.cumsum(pos)])
    above = np.concatenate([np.cumsum((1.0 - pos)[::-1])[::-1], [0.0]])
    errors = below + above
    j = int(np.argmin(errors))
    disagreement = float(errors[j]) / max(len(m), 1)
    if j == 0:
        return float(m[0]) - 1.0, disagreement
    if j == len(m):
        return float(m[-1]) + 1.0, disagreement
    return 0.5 * float(m[j - 1] + m[j]), disagreement
