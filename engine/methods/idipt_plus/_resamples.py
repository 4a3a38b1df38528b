"""The bootstrap's mixtures fitted side by side: :func:`._mixture.fit_best_mixture` of many resamples at once.

A fit's stability guard (:mod:`._fit`) refits the mixture on ``bootstrap`` resamples of the group,
each from up to three EM starts: about ninety EM runs of a dozen iterations on a few hundred
points in four directions, where one run's every iteration is some forty numpy calls on arrays
too small to pay for the call (the default method's decisions spent most of their time beyond
the source pass there). Here every start of every resample iterates in one set of calls on
stacked arrays, each run stopping at the iteration it stopped at alone.

Every number is the one :func:`._mixture.fit_mixture` computes for that run by itself: the same
operations in the same order on the same values, stacked along a leading axis (elementwise
operations, reductions along each run's own axis and matrix products per run, as ``matmul``
computes a stack); ``tests/test_idipt_plus_resamples.py`` compares them bit for bit with the
resamples fitted one by one.
"""

from __future__ import annotations

import numpy as np

from engine.methods.idipt_plus._mixture import (
    VAR_FLOOR,
    Mixture,
    column_sums,
)


def _m_steps(
    x: np.ndarray, total: np.ndarray, sq_sum: np.ndarray, r1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`._mixture._m_step` of each run: ``x`` ``(M, N, K)``, ``total`` and ``sq_sum``
    ``(M, K)``, ``r1`` ``(M, N)``; means and squared means ``(M, 2, K)``, variances ``(M, K)``,
    shares ``(M, 2)``."""
    n = x.shape[1]
    mass1 = r1.sum(axis=1)
    sum1 = np.matmul(r1[:, None, :], x)[:, 0, :]
    mass = np.stack([n - mass1, mass1], axis=1)
    sums = np.stack([total - sum1, sum1], axis=1)
    means = sums / np.maximum(mass, 1e-12)[:, :, None]
    squares = means**2
    var = np.maximum((sq_sum - (mass[:, :, None] * squares).sum(axis=1)) / max(n, 1), VAR_FLOOR)
    return means, var, mass / max(n, 1), squares


def _responsibilities(
    x: np.ndarray, means: np.ndarray, var: np.ndarray, prior: np.ndarray, squares: np.ndarray
) -> np.ndarray:
    """Each run's E-step, P(component 1 | x) ``(M, N)`` (:func:`._mixture._log_odds` and ``_sigmoid``)."""
    w = (means[:, 1] - means[:, 0]) / var
    bias = np.log(np.maximum(prior[:, 1], 1e-12) / np.maximum(prior[:, 0], 1e-12)) - 0.5 * (
        (squares[:, 1] - squares[:, 0]) / var
    ).sum(axis=1)
    odds = np.matmul(x, w[:, :, None])[:, :, 0] + bias[:, None]
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * odds))
    return out


def log_likelihoods(x: np.ndarray, means: np.ndarray, var: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """:func:`._mixture.log_likelihood` of each run ``(M,)``: ``x`` ``(M, N, K)``, ``means``
    ``(M, 2, K)``, ``var`` ``(M, K)``, ``shares`` ``(M, 2)``."""
    inverse = var[:, None, :]
    per = (
        np.log(np.maximum(shares, 1e-12))[:, None, :]
        + np.matmul(x, (means / inverse).transpose(0, 2, 1))
        - 0.5 * ((means**2) / inverse).sum(axis=2)[:, None, :]
    )
    top = per.max(axis=2)
    mixed = top + np.log(np.exp(per - top[:, :, None]).sum(axis=2))
    out: np.ndarray = (
        mixed.sum(axis=1)
        - 0.5 * ((x**2) / inverse).sum(axis=(1, 2))
        - 0.5 * x.shape[1] * np.log(var).sum(axis=1)
    )
    return out


def fit_mixtures(
    x: np.ndarray,
    sums: tuple[np.ndarray, np.ndarray],
    init: np.ndarray,
    iterations: int,
    equal_share_iterations: int,
) -> tuple[list[Mixture], np.ndarray]:
    """:func:`._mixture.fit_mixture` of ``M`` runs at once, and each mixture's
    :func:`._mixture.log_likelihood` ``(M,)``.

    Args:
        x: ``(M, N, K)`` each run's points.
        sums: ``(M, K)`` each run's :func:`._mixture.column_sums`.
        init: ``(M, N)`` each run's 0/1 starting labels.
        iterations: EM iterations at most (a run stops once its responsibilities settle).
        equal_share_iterations: E-steps with equal shares at the start.
    """
    r1 = np.asarray(init, dtype=np.float64).copy()
    live = np.arange(x.shape[0])  # the runs still iterating, and their stacked state
    xs, total, sq_sum, r = x, sums[0], sums[1], r1
    half = np.full((x.shape[0], 2), 0.5)
    for it in range(iterations):
        if live.size == 0:
            break
        means, var, shares, squares = _m_steps(xs, total, sq_sum, r)
        prior = half[: live.size] if it < equal_share_iterations else shares
        new = _responsibilities(xs, means, var, prior, squares)
        if it < equal_share_iterations:
            r = new
            continue
        settled = np.abs(new - r).max(axis=1) < 1e-4
        r1[live[settled]] = new[settled]
        if bool(settled.any()):
            going = ~settled
            live, xs, total, sq_sum, r = live[going], xs[going], total[going], sq_sum[going], new[going]
        else:
            r = new
    r1[live] = r
    means, var, shares, _ = _m_steps(x, sums[0], sums[1], r1)
    mixtures = [
        Mixture(np.stack([1.0 - r1[m], r1[m]], axis=1), means[m], var[m], shares[m])
        for m in range(x.shape[0])
    ]
    return mixtures, log_likelihoods(x, means, var, shares)


def starts_of(x: np.ndarray, margins: np.ndarray) -> list[list[np.ndarray]]:
    """:func:`._mixture.starts` of each of ``B`` point sets ``x`` ``(B, N, K)`` with their ``margins``
    ``(B, N)`` (one singular value decomposition of the stack)."""
    centred = x - x.mean(axis=1, keepdims=True)
    direction = np.linalg.svd(centred, full_matrices=False)[2][:, 0]
    candidates = (
        (margins > 0).astype(np.float64),
        (np.matmul(centred, direction[:, :, None])[:, :, 0] > 0).astype(np.float64),
        (margins > np.median(margins, axis=1, keepdims=True)).astype(np.float64),
    )
    n = x.shape[1]
    return [[c[b] for c in candidates if 1 <= c[b].sum() <= n - 1] for b in range(x.shape[0])]


def fit_best_mixtures(
    x: np.ndarray, margins: np.ndarray, iterations: int, equal_share_iterations: int
) -> list[Mixture | None]:
    """:func:`._mixture.fit_best_mixture` of each of ``B`` point sets ``x`` ``(B, N, K)`` with their
    ``margins`` ``(B, N)``: every start of every set fitted at once (:func:`fit_mixtures`)."""
    sets = x.shape[0]
    owner: list[int] = []
    inits: list[np.ndarray] = []
    for b, own_starts in enumerate(starts_of(x, margins)):
        for init in own_starts:
            owner.append(b)
            inits.append(init)
    best: list[tuple[float, Mixture] | None] = [None] * sets
    if not inits:
        return [None] * sets
    sums = [column_sums(x[b]) for b in range(sets)]
    own = np.asarray(owner)
    stacked = (np.stack([sums[b][0] for b in owner]), np.stack([sums[b][1] for b in owner]))
    mixtures, scores = fit_mixtures(x[own], stacked, np.stack(inits), iterations, equal_share_iterations)
    for b, mix, score in zip(owner, mixtures, scores.tolist(), strict=True):
        kept = best[b]
        if kept is None or score > kept[0]:
            best[b] = (score, mix)
    return [None if kept is None else kept[1] for kept in best]
