"""Splitting a named site that mixes two appearances (a folder of two scanners) into two parts.

A site the clinician loaded is one unit (``_units``). A folder can still hold two sites' images
(two scanners, two stains); one operating point and one review ladder for both can then be right
on average and wrong for one of them. So at each fit of a named site, until it has split once,
its uniform sample's class-removed appearance vectors (the coordinates ``_groups`` groups by) are
tested for two appearances. The site splits only on strong evidence, every condition at once:

1. **share**: 2-means (the best of :data:`STARTS` seeded k-means++ starts) leaves each cluster at
   least ``max(min_images, split_share × n)`` of the ``n`` sampled images: both parts can be
   fitted, and neither is a tail of outliers;
2. **separation**: the two centres lie more than ``split_separation`` source radii apart (the
   radius that holds 99 % of the source images, the unit ``join`` and ``merge`` are given in).
   The default, 2.5, is more than twice the default ``join``: no image lies within joining
   distance of both centres, so the free-form grouper would keep them as two groups, and would
   never merge them (``merge`` 0.5);
3. **stability**: 2-means on each of two random halves of the sample assigns the whole sample as
   the full fit does on at least ``split_stability`` of its images: the two parts are a property
   of the site, not of which images happened to be drawn.

Once split, each part is a unit of its own (its own number, sample, operating point and
candidates); its sample is the parent's sample by assignment, and later images join the part
whose centre (the running mean of its images' appearance) is nearer. The parent keeps the images
decided before the split. Each test is another chance of a false split (a folder cut into ever
smaller parts, none with enough images for an operating point or a certificate), and a split
sends the images that come after it to new units with review ladders of their own, which should
happen once per folder, not whenever the sample wobbles. So the test runs at the site's first fit
and then only at the first fit after its image count has doubled (past 2, 4, 8 ... times
``min_images``: :func:`split_due`), a handful of times over a folder of any size instead of at
each of its fits; once the site has split, never again, and a part never splits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.methods.idipt_plus._units import Unit

STARTS = 3  # k-means++ starts of each 2-means (the one of least within-cluster spread is kept)
ITERATIONS = 50  # Lloyd iterations at most


@dataclass(frozen=True)
class SplitSettings:
    """The split test's settings (``IDiPTPlusConfig``'s ``split_*``; ``min_images`` its own)."""

    share: float
    separation: float
    stability: float
    min_images: int


@dataclass(frozen=True)
class SplitTest:
    """One test of a site's sample.

    Attributes:
        split: every condition held.
        reason: ``split`` or the first condition that failed.
        labels: ``(n,)`` part (0 or 1) of each sampled image (empty when no clusters were fitted).
        separation: the centres' distance in source radii (nan when not computed).
        share: the smaller cluster's share of the sample (nan when not computed).
        agreement: the halves' smaller agreement with the full fit (nan when not computed).
    """

    split: bool
    reason: str
    labels: np.ndarray
    separation: float = math.nan
    share: float = math.nan
    agreement: float = math.nan


def two_means(x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(centres (2, R), labels (n,))`` of the best of :data:`STARTS` seeded k-means++ starts."""
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    n = x.shape[0]
    for _ in range(STARTS):
        first = x[int(rng.integers(0, n))]
        d2 = ((x - first) ** 2).sum(axis=1)
        total = float(d2.sum())
        second = x[int(rng.choice(n, p=d2 / total))] if total > 0 else first
        centres = np.stack([first, second])
        labels = np.zeros(n, dtype=np.int64)
        for _ in range(ITERATIONS):
            dist = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
            new = np.argmin(dist, axis=1)
            if (new == 0).all() or (new == 1).all():
                break
            centres = np.stack([x[new == 0].mean(axis=0), x[new == 1].mean(axis=0)])
            if np.array_equal(new, labels):
                break
            labels = new
        inertia = float(((x - centres[labels]) ** 2).sum())
        if best is None or inertia < best[0]:
            best = (inertia, centres, labels.copy())
    assert best is not None
    return best[1], best[2]


def split_due(count: int, fitted_at: int, min_images: int) -> bool:
    """Whether a named site's split test runs at the fit it has reached with ``count`` images, its
    last fit having been at ``fitted_at`` (0: none): at the first fit, and then at the first fit
    after the count has doubled past a power of two times ``min_images`` (module docstring)."""
    m = max(1, min_images)
    return fitted_at == 0 or (count // m).bit_length() > (fitted_at // m).bit_length()


def _assign(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return np.asarray(np.argmin(((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2), axis=1))


def _agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Share of images two 2-part labellings put together (the parts' names do not matter)."""
    same = float(np.mean(a == b))
    return max(same, 1.0 - same)


def split_test(
    appearance: np.ndarray, radius: float, cfg: SplitSettings, rng: np.random.Generator
) -> SplitTest:
    """Test whether a site's sampled appearances ``(n, R)`` are two appearances (module docstring)."""
    n = appearance.shape[0]
    need = max(cfg.min_images, math.ceil(cfg.share * n))
    if n < 2 * need:
        return SplitTest(False, "too few images", np.zeros(0, dtype=np.int64))
    centres, labels = two_means(appearance, rng)
    share = float(min(np.mean(labels == 0), np.mean(labels == 1)))
    separation = float(np.sqrt(((centres[0] - centres[1]) ** 2).sum())) / radius
    stats = {"separation": separation, "share": share}
    if min(int(np.sum(labels == 0)), int(np.sum(labels == 1))) < need:
        return SplitTest(False, "share", labels, **stats)
    if not separation > cfg.separation:
        return SplitTest(False, "separation", labels, **stats)
    order = rng.permutation(n)
    agreement = 1.0
    for half in (order[: n // 2], order[n // 2 :]):
        half_centres, _ = two_means(appearance[half], rng)
        agreement = min(agreement, _agreement(_assign(appearance, half_centres), labels))
    if not agreement >= cfg.stability:
        return SplitTest(False, "stability", labels, agreement=agreement, **stats)
    # the part holding more of the sample is part 0 (the first sampled image breaks a tie)
    big = (
        0 if int(np.sum(labels == 0)) * 2 > n or (int(np.sum(labels == 0)) * 2 == n and labels[0] == 0) else 1
    )
    return SplitTest(True, "split", (labels != big).astype(np.int64), agreement=agreement, **stats)


def make_parts(unit: Unit, labels: np.ndarray, idents: tuple[int, int]) -> list[Unit]:
    """``unit``'s two parts (numbers ``idents``), each with the parent's sampled images it was assigned.

    A part stands for its share of the parent's images: its count is the parent's count times its
    share of the sample (all of them when the parent's sample held every image), and its margin sum
    its sampled margins' mean times that count.
    """
    margins, coords = unit.sample()
    appearance = unit.appearance[: unit.size]
    cap = len(unit.margins)
    parts: list[Unit] = []
    first = round(unit.count * float(np.mean(labels == 0)))
    for k, ident in enumerate(idents):
        at = np.flatnonzero(labels == k)
        part = Unit.empty(ident, unit.site, cap, coords.shape[1], unit.last_seen)
        part.appearance = np.zeros((cap, appearance.shape[1]))
        part.margins[: at.size] = margins[at]
        part.coords[: at.size] = coords[at]
        part.appearance[: at.size] = appearance[at]
        part.held = int(at.size)
        part.count = first if k == 0 else unit.count - first
        part.margin_sum = float(margins[at].mean()) * part.count
        part.centroid = appearance[at].mean(axis=0)
        part.parent = unit.ident
        part.splittable = False
        parts.append(part)
    unit.parts = [p.ident for p in parts]
    unit.splittable = False
    return parts


def nearer_part(parts: list[Unit], appearance: np.ndarray) -> Unit:
    """The part whose centre is nearer ``appearance`` (the first on a tie)."""
    dist = [float(((p.centroid - appearance) ** 2).sum()) for p in parts]
    return parts[int(np.argmin(dist))]
