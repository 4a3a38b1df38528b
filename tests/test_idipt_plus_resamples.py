"""The bootstrap's mixtures fitted side by side (``engine.methods.idipt_plus._resamples``) give the
numbers of the resamples fitted one by one (``_mixture.fit_best_mixture``, kept as the reference),
bit for bit: each run's mixture and log-likelihood, each resample's guarded threshold, each fit,
and the decisions of a stream of named sites and of groups found by appearance."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.methods.idipt_plus import IDiPTPlusConfig, Observation, OperatingPoint, fit_operating_point
from engine.methods.idipt_plus import _fit as fit_module
from engine.methods.idipt_plus._fit import (
    EQUAL_SHARE_ITERATIONS,
    OperatingPointSettings,
    bootstrap_thresholds,
)
from engine.methods.idipt_plus._mixture import column_sums, fit_best_mixture, fit_mixture, log_likelihood
from engine.methods.idipt_plus._resamples import fit_best_mixtures, fit_mixtures

SETTINGS = IDiPTPlusConfig().operating_point_settings()


def _bits(a: object) -> bytes:
    return np.asarray(a, dtype=np.float64).tobytes()


def _group(rng: np.random.Generator, n: int, dims: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``(margins (n,), coords (n, dims))``: two clusters of random size and distance, the margin
    following the cluster with random noise (some groups pass every guard, some fail one)."""
    positive = (rng.random(n) < rng.uniform(0.05, 0.6)).astype(np.float64)
    coords = rng.normal(size=(n, dims)) * rng.uniform(0.3, 2.0, size=dims)
    coords += np.outer(positive, rng.normal(size=dims) * rng.uniform(0.0, 5.0))
    margins = (
        positive * rng.uniform(1.0, 8.0) + rng.normal(scale=rng.uniform(0.1, 1.5), size=n) - rng.uniform(0, 5)
    )
    return margins, coords


def _one_by_one(
    margins: np.ndarray, x: np.ndarray, cfg: OperatingPointSettings, rng: np.random.Generator
) -> np.ndarray:
    """The reference: each resample drawn and fitted in turn (the bootstrap as it was written first)."""
    n = len(margins)
    resampled = np.full(cfg.bootstrap, np.nan)
    for b in range(cfg.bootstrap):
        pick = rng.integers(0, n, n)
        _, resampled[b] = fit_module._threshold(margins[pick], x[pick], cfg)
    return resampled


@pytest.mark.parametrize("seed", range(6))
def test_runs_side_by_side_equal_runs_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs, n, dims = int(rng.integers(2, 40)), int(rng.integers(20, 400)), int(rng.integers(1, 6))
    x = rng.normal(size=(runs, n, dims)) + rng.uniform(0, 6) * (rng.random((runs, n, 1)) < 0.4)
    init = (rng.random((runs, n)) < rng.uniform(0.1, 0.9, size=(runs, 1))).astype(np.float64)
    init[:, 0], init[:, 1] = 0.0, 1.0
    iterations = int(rng.choice([1, 3, 5, 30]))
    sums = tuple(np.stack(s) for s in zip(*(column_sums(x[m]) for m in range(runs)), strict=True))
    mixtures, scores = fit_mixtures(x, (sums[0], sums[1]), init, iterations, EQUAL_SHARE_ITERATIONS)
    for m in range(runs):
        alone = fit_mixture(x[m], init[m], iterations, EQUAL_SHARE_ITERATIONS)
        side = mixtures[m]
        for a, b in ((alone.resp, side.resp), (alone.means, side.means), (alone.var, side.var)):
            assert _bits(a) == _bits(b)
        assert _bits(alone.shares) == _bits(side.shares)
        assert _bits(log_likelihood(x[m], alone)) == _bits(scores[m])


def test_best_mixtures_equal_one_by_one_with_sets_that_have_no_start() -> None:
    rng = np.random.default_rng(7)
    margins, coords = _group(rng, 120)
    picks = rng.integers(0, 120, (12, 120))
    x, m = coords[:, :4][picks], margins[picks]
    x[3], m[3] = 1.0, 0.5  # one point repeated: no start splits it
    m[5] = np.abs(m[5]) + 1.0  # every margin positive: the source decisions' start is left out
    side = fit_best_mixtures(x, m, 30, EQUAL_SHARE_ITERATIONS)
    assert side[3] is None
    for b in range(12):
        alone = fit_best_mixture(x[b], m[b], 30, EQUAL_SHARE_ITERATIONS)
        got = side[b]
        assert (alone is None) == (got is None)
        if alone is not None and got is not None:
            assert _bits(alone.resp) == _bits(got.resp) and _bits(alone.means) == _bits(got.means)


@pytest.mark.parametrize("seed", range(8))
def test_bootstrap_thresholds_equal_the_resamples_fitted_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(100 + seed)
    margins, coords = _group(rng, int(rng.integers(40, 700)))
    cfg = dataclasses.replace(
        SETTINGS,
        feature_dims=int(rng.integers(1, 9)),
        bootstrap=int(rng.choice([1, 7, 30])),
        iterations=int(rng.choice([2, 30])),
    )
    x = coords[:, : cfg.feature_dims]
    alone = _one_by_one(margins, x, cfg, np.random.default_rng(seed))
    assert _bits(bootstrap_thresholds(margins, x, cfg, np.random.default_rng(seed))) == _bits(alone)
    # a few resamples at a time (a large group's bootstrap): the same draws, the same numbers
    monkeypatch.setattr(fit_module, "RESAMPLED_VALUES", x.size * (seed % 3 + 1))
    assert _bits(bootstrap_thresholds(margins, x, cfg, np.random.default_rng(seed))) == _bits(alone)


def _reference_fit(
    margins: np.ndarray, coords: np.ndarray, cfg: OperatingPointSettings, rng: np.random.Generator
) -> fit_module.Fit:
    """:func:`fit_operating_point` with its bootstrap fitted one by one."""
    original = fit_module.bootstrap_thresholds
    fit_module.bootstrap_thresholds = _one_by_one
    try:
        return fit_operating_point(margins, coords, cfg, rng)
    finally:
        fit_module.bootstrap_thresholds = original


def test_fits_equal_the_reference_and_some_pass_every_guard() -> None:
    rng = np.random.default_rng(11)
    reasons = set()
    for case in range(24):
        margins, coords = _group(rng, int(rng.integers(40, 500)))
        fit = fit_operating_point(margins, coords, SETTINGS, np.random.default_rng(case))
        assert repr(fit) == repr(_reference_fit(margins, coords, SETTINGS, np.random.default_rng(case)))
        reasons.add(fit.reason)
    # the comparison covered fits whose bootstrap ran (accepted, or found unstable)
    assert "accepted" in reasons and any(r.startswith("unstable") for r in reasons), reasons


@pytest.mark.parametrize("named", [False, True])
def test_a_stream_decides_as_with_the_bootstrap_fitted_one_by_one(
    named: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decisions of a stream of two sites (named, or grouped by appearance), with fits passing and
    failing their guards: the same records, threshold and fit statistics included."""

    def stream() -> list[tuple[Observation, str | None]]:
        rng = np.random.default_rng(5)
        out = []
        for i in range(700):
            site = i // 50 % 2
            positive = rng.random() < 0.4
            coords = rng.normal(0.0, 0.8, 4) + (3.0 if positive else -3.0) * np.eye(4)[0]
            appearance = rng.normal(0.0, 0.2, 6) + 3.0 * site * np.eye(6)[1]
            margin = 2.0 * (coords[0] - (3.5 if site else 0.5)) + rng.normal(0, 0.1)
            out.append((Observation(float(margin), coords, appearance), f"site{site}" if named else None))
        return out

    def decisions() -> list[str]:
        point = OperatingPoint(SETTINGS, radius=1.0, seed=3)
        return [repr(point.step(obs, site=site)) for obs, site in stream()]

    side = decisions()
    monkeypatch.setattr(fit_module, "bootstrap_thresholds", _one_by_one)
    alone = decisions()
    assert side == alone
    assert any("'accepted'" in d for d in side)  # an operating point passed every guard
