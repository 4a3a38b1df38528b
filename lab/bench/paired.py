"""Paired comparison of an adapted model with its source model on the same images.

Accuracy differences of a few points on a site of a few hundred images are a handful of images;
what they are worth depends on how many images adaptation changed. Per site we count the images
adaptation *fixed* (source wrong, adapted right) and *broke* (source right, adapted wrong) and
give the exact (McNemar) 95 % interval of the paired accuracy difference: conditional on the
``d = fixed + broken`` changed decisions, ``fixed ~ Binomial(d, p)``; the Clopper-Pearson
interval ``[p_lo, p_hi]`` of ``p`` gives the difference ``d / n · (2p - 1)`` in points. With no
changed decision the interval is ``[0, 0]``: the two models agree on every image.

Streams of the same images in other orders are not independent replicates, so intervals are
given per stream, never pooled over orders.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

CONFIDENCE = 0.95
NO_HARM_POINT = -1.0  # a site's paired difference must be at least this (points) ...
NO_HARM_LOW = -2.0  # ... and the lower end of its exact 95 % interval at least this


@dataclass(frozen=True)
class Paired:
    """One site (or cell) of one stream: the source model against the adapted model.

    Attributes:
        images: n.
        source_acc, adapted_acc: accuracies in percent.
        fixed, broken: images adaptation fixed / broke.
        low, high: the exact 95 % interval of ``adapted_acc - source_acc`` in points.
    """

    images: int
    source_acc: float
    adapted_acc: float
    fixed: int
    broken: int
    low: float
    high: float

    @property
    def delta(self) -> float:
        return self.adapted_acc - self.source_acc

    @property
    def harmful(self) -> bool:
        """Adaptation lowered these images: difference below :data:`NO_HARM_POINT` or interval below :data:`NO_HARM_LOW`."""
        return self.delta < NO_HARM_POINT or self.low < NO_HARM_LOW

    def to_json(self) -> dict[str, float | int]:
        return {
            "images": self.images,
            "source_acc": self.source_acc,
            "adapted_acc": self.adapted_acc,
            "delta": self.delta,
            "fixed": self.fixed,
            "broken": self.broken,
            "low": self.low,
            "high": self.high,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Paired:
        """The result :meth:`to_json` wrote (its ``delta`` is derived, not read)."""
        return cls(**{f.name: data[f.name] for f in fields(cls)})


def _log_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    if p <= 0.0:
        return np.where(k == 0, 0.0, -np.inf)
    if p >= 1.0:
        return np.where(k == n, 0.0, -np.inf)
    lg = np.vectorize(math.lgamma)
    out: np.ndarray = lg(n + 1.0) - lg(k + 1.0) - lg(n - k + 1.0) + k * math.log(p) + (n - k) * math.log1p(-p)
    return out


def _tail(k: int, n: int, p: float, upper: bool) -> float:
    """P(X >= k) (upper) or P(X <= k) for X ~ Binomial(n, p)."""
    ks = np.arange(k, n + 1) if upper else np.arange(0, k + 1)
    return float(np.exp(_log_pmf(ks, n, p)).sum())


def _solve(f: Callable[[float], float], target: float) -> float:
    """p in [0, 1] with the monotone ``f(p) = target`` (bisection to 1e-10)."""
    lo, hi = 0.0, 1.0
    increasing = f(1.0) > f(0.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided interval of a binomial proportion with ``k`` successes in ``n`` trials."""
    if n <= 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if k == 0 else _solve(lambda p: _tail(k, n, p, upper=True), alpha / 2)
    high = 1.0 if k == n else _solve(lambda p: _tail(k, n, p, upper=False), alpha / 2)
    return low, high


def mcnemar_interval(
    fixed: int, broken: int, images: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The exact interval of the paired accuracy difference in points (see the module docstring)."""
    changed = fixed + broken
    if changed == 0 or images <= 0:
        return 0.0, 0.0
    p_lo, p_hi = clopper_pearson(fixed, changed, confidence)
    scale = 100.0 * changed / images
    return scale * (2.0 * p_lo - 1.0), scale * (2.0 * p_hi - 1.0)


def paired(labels: np.ndarray, source_preds: np.ndarray, preds: np.ndarray) -> Paired:
    """The paired comparison over these images."""
    labels, source_preds, preds = np.asarray(labels), np.asarray(source_preds), np.asarray(preds)
    n = int(labels.size)
    src_ok, ok = source_preds == labels, preds == labels
    fixed, broken = int(np.sum(ok & ~src_ok)), int(np.sum(src_ok & ~ok))
    low, high = mcnemar_interval(fixed, broken, n)
    pct = 100.0 / n if n else math.nan
    return Paired(n, float(src_ok.sum()) * pct, float(ok.sum()) * pct, fixed, broken, low, high)
