"""One fit of a site's operating point and its guards (``_operating_point`` keeps the units).

A fit is a two-Gaussian mixture on the group's whitened feature coordinates
(:mod:`._mixture`, the most likely of three EM starts), named by the source margin, and translated into the threshold on the margin
that reproduces its split. It is accepted only if every guard passes:

1. **share**: each component holds at least ``min_share`` of the group;
2. **separation**: the components lie at least ``min_separation`` tied deviations apart;
3. **ranking**: the margin threshold reproduces the mixture's split with at most ``max_disagreement``
   of the images on the other side (the mixture must split the group the way the source ranks it);
4. **edge**: the threshold lies at the edge of a cluster along the source margin: at least
   ``min_edge`` standard deviations from the mean of the images on one side of it
   (:func:`._mixture.edge_distance`). A cut through one class's spread (a site that holds one
   class only, split by a nuisance) gives about 1.7; the edge of a pile of confident images gives
   far more;
5. **stability**: refitted on ``bootstrap`` resamples of the group, the threshold's central
   ``1 - 2 quantile`` interval excludes the source threshold 0, and at most ``quantile`` of the
   resamples fail a guard. A split of one class's spread (a nuisance, a tail) moves with the
   sample; a split between two classes does not. The resamples' mixtures are fitted side by side
   (:mod:`._resamples`: the same numbers as one by one, in a fraction of the time).

The move is pessimistic: the estimate is the interval's edge nearest the source threshold, and
the unit's threshold is the smaller of its last two accepted estimates when both move the same
way (else the source threshold): a move needs two accepted fits to agree, and a return to the
source threshold two failed fits in a row. Every fit's bootstrap is seeded
by the session seed, the group and the fit's number, so a replay from cached source passes
decides exactly as the live run did.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.methods.idipt_plus._mixture import (
    Mixture,
    edge_distance,
    fit_best_mixture,
    margin_threshold,
    named_by_margin,
)
from engine.methods.idipt_plus._resamples import fit_best_mixtures

EQUAL_SHARE_ITERATIONS = 3  # EM's first E-steps with equal shares (see fit_mixture)
RESAMPLED_VALUES = 2**21  # resampled feature coordinates fitted side by side at most (16 MiB of float64)
AGREEING_FITS = 2  # accepted fits, moving the same way, before a unit's threshold moves (and failed fits in a row before it returns)


@dataclass(frozen=True)
class OperatingPointSettings:
    """What the operating point needs of I-DiPT+'s config (see ``IDiPTPlusConfig`` for meanings)."""

    join: float
    merge: float
    seed_images: int
    capacity: int
    max_groups: int
    min_images: int
    refit: float
    feature_dims: int
    min_share: float
    min_separation: float
    max_disagreement: float
    min_edge: float
    bootstrap: int
    quantile: float
    iterations: int
    split_share: float = 0.2
    split_separation: float = 2.0
    split_stability: float = 0.99


@dataclass(frozen=True)
class Fit:
    """One fit of a unit's operating point.

    Attributes:
        images: images it was fitted to.
        accepted: every guard passed.
        reason: ``accepted`` or the first guard that failed.
        estimate: the mixture's threshold on the source margin (nan when no mixture was fitted).
        low, high: the bootstrap interval of that threshold (nan when not computed).
        separation, share, disagreement: the guards' statistics (nan when not computed).
        pessimistic: the edge of the interval nearest 0 when accepted, else 0.
    """

    images: int
    accepted: bool
    reason: str
    estimate: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")
    separation: float = float("nan")
    share: float = float("nan")
    disagreement: float = float("nan")
    pessimistic: float = 0.0


def agreed_threshold(estimates: list[float]) -> float:
    """The smallest move that the last :data:`AGREEING_FITS` *accepted* estimates agree on; 0 when
    they do not agree, when there are fewer, or when the last :data:`AGREEING_FITS` fits all failed.

    Hysteresis both ways: a threshold moves only when two accepted fits agree, and goes back to the
    source's only when two fits in a row fail (one unstable refit among accepted ones, as a site's
    sample grows, does not flip every decision of the site back and forth).
    """
    if len(estimates) < AGREEING_FITS or all(e == 0.0 for e in estimates[-AGREEING_FITS:]):
        return 0.0
    accepted = [e for e in estimates if e != 0.0][-AGREEING_FITS:]
    if len(accepted) < AGREEING_FITS:
        return 0.0
    recent = np.asarray(accepted)
    if bool(np.all(recent > 0)):
        return float(recent.min())
    if bool(np.all(recent < 0)):
        return float(recent.max())
    return 0.0


def _threshold(margins: np.ndarray, coords: np.ndarray, cfg: OperatingPointSettings) -> tuple[Fit, float]:
    """One mixture fit with the share, separation and ranking guards; ``(fit, threshold)``."""
    return _guarded(fit_best_mixture(coords, margins, cfg.iterations, EQUAL_SHARE_ITERATIONS), margins, cfg)


def _guarded(fitted: Mixture | None, margins: np.ndarray, cfg: OperatingPointSettings) -> tuple[Fit, float]:
    """The share, separation, ranking and edge guards of the mixture ``fitted`` to a group of source
    margins ``margins``; ``(fit, threshold)``, the threshold nan unless every guard passed."""
    n = len(margins)
    if fitted is None:
        return Fit(n, False, "no split to start from"), float("nan")
    mix = named_by_margin(fitted, margins)
    share, separation = float(mix.shares.min()), mix.separation
    if not share >= cfg.min_share:
        return Fit(n, False, "share", separation=separation, share=share), float("nan")
    if not separation >= cfg.min_separation:
        return Fit(n, False, "separation", separation=separation, share=share), float("nan")
    threshold, disagreement = margin_threshold(margins, mix.resp[:, 1] > 0.5)
    stats = {"separation": separation, "share": share, "disagreement": disagreement}
    if disagreement > cfg.max_disagreement:
        return Fit(n, False, "ranking", estimate=threshold, **stats), float("nan")
    if edge_distance(margins, threshold) < cfg.min_edge:
        return Fit(n, False, "edge", estimate=threshold, **stats), float("nan")
    return Fit(n, True, "accepted", estimate=threshold, **stats), threshold


def bootstrap_thresholds(
    margins: np.ndarray, x: np.ndarray, cfg: OperatingPointSettings, rng: np.random.Generator
) -> np.ndarray:
    """The guarded threshold of each of ``cfg.bootstrap`` resamples of a group (nan where a guard
    failed), the same numbers as :func:`_threshold` of each resample in turn: the resamples are
    drawn from ``rng`` one after another, and their mixtures fitted side by side
    (:mod:`._resamples`), at most :data:`RESAMPLED_VALUES` resampled coordinates at a time."""
    n = len(margins)
    out = np.full(cfg.bootstrap, np.nan)
    at = 0
    while at < cfg.bootstrap:
        take = min(cfg.bootstrap - at, max(1, RESAMPLED_VALUES // max(1, x.size)))
        picks = np.stack([rng.integers(0, n, n) for _ in range(take)])
        resampled_margins = margins[picks]
        mixtures = fit_best_mixtures(x[picks], resampled_margins, cfg.iterations, EQUAL_SHARE_ITERATIONS)
        for b, mix in enumerate(mixtures):
            out[at + b] = _guarded(mix, resampled_margins[b], cfg)[1]
        at += take
    return out


def fit_operating_point(
    margins: np.ndarray, coords: np.ndarray, cfg: OperatingPointSettings, rng: np.random.Generator
) -> Fit:
    """Fit a group's operating point with every guard (see the module docstring).

    Args:
        margins: ``(n,)`` the group's source margins.
        coords: ``(n, K')`` their feature coordinates (the first ``cfg.feature_dims`` are used).
        cfg: the settings.
        rng: the bootstrap's generator.
    """
    x = coords[:, : cfg.feature_dims]
    fit, estimate = _threshold(margins, x, cfg)
    if not fit.accepted:
        return fit
    n = len(margins)
    resampled = bootstrap_thresholds(margins, x, cfg, rng)
    failed = float(np.isnan(resampled).mean()) if cfg.bootstrap else 0.0
    kept = resampled[~np.isnan(resampled)]
    stats = {"separation": fit.separation, "share": fit.share, "disagreement": fit.disagreement}
    if cfg.bootstrap and (failed > cfg.quantile or kept.size == 0):
        return Fit(n, False, "unstable (resamples fail the guards)", estimate=estimate, **stats)
    low = float(np.quantile(kept, cfg.quantile)) if kept.size else estimate
    high = float(np.quantile(kept, 1.0 - cfg.quantile)) if kept.size else estimate
    if low <= 0.0 <= high:
        return Fit(n, False, "unstable (interval holds the source threshold)", estimate, low, high, **stats)
    pessimistic = low if low > 0 else high
    return Fit(n, True, "accepted", estimate, low, high, pessimistic=pessimistic, **stats)
