"""Site groups by appearance, for streams whose images do not say which site they come from.

In the app and ``f2tta run`` every image belongs to the folder or slide it was loaded from: that
is its site (``_units``). The paper's free-form protocol gives no site, so sites have to be found
by how images look (stain, scanner, compression) once the class is taken out of the appearance
(:meth:`engine.model.source_reference.SourceReference.appearance`). The earlier grouping let a
single image start a group and fragmented every site (316 groups in a 3 750-image stream, median
size 1; one group per tile on a real slide), so here:

* **no one-image seeds**: an image that is near no group waits in a pool of recent unassigned
  images (its decision is the source model's); a group is founded only when at least
  ``seed_images`` pooled images lie within one join radius of one of them, and starts with all
  of them;
* an image **joins** the nearest group whose centroid lies within ``join`` × the source radius
  (the radius that holds 99 % of the source images around their own mean: a site as spread out as
  the source keeps 99 % of its images; the images of a site that spreads wider than the source
  partly stay unassigned, and keep the source model's decisions);
* groups whose centroids come within ``merge`` × the source radius of each other are **merged**
  (two seeds of one site);
* at most ``max_groups`` are kept (the one seen least recently gives way).

:attr:`SiteGroups.created` counts the groups ever founded; the benchmark reports it per stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.methods.idipt_plus._fit import OperatingPointSettings
from engine.methods.idipt_plus._units import Unit

POOL_SIZE = 256  # unassigned images remembered at most (the oldest leave first)


@dataclass(frozen=True)
class Pooled:
    """An image that joined no group yet, with what a group founded on it would need."""

    appearance: np.ndarray
    margin: float
    coords: np.ndarray
    index: int


class SiteGroups:
    """The groups of one stream (see the module docstring).

    Args:
        settings: the operating point's settings; the groups follow its ``join`` (largest distance
            to a centroid, in source radii, at which an image joins), ``merge`` (groups whose
            centroids are closer than this, in source radii, become one), ``seed_images`` (pooled
            images that found a group), ``capacity`` (images per group kept for fitting),
            ``feature_dims`` (K, the feature coordinates kept per image) and ``max_groups``
            (groups kept at most).
        radius: the source reference's radius.
        seed: seeds the groups' samples.
        new_ident: hands out unit numbers (shared with the sites that name themselves).
    """

    def __init__(
        self, settings: OperatingPointSettings, radius: float, seed: int, new_ident: Callable[[], int]
    ) -> None:
        self.settings = settings
        self.radius = radius
        self.seed = seed
        self.new_ident = new_ident
        self.groups: list[Unit] = []
        self.pool: list[Pooled] = []
        self.created = 0
        self.merged = 0

    def nearest(self, appearance: np.ndarray) -> tuple[Unit | None, float]:
        """The nearest group and its distance in source radii (None, inf when there is none)."""
        if not self.groups:
            return None, float("inf")
        centroids = np.stack([g.centroid for g in self.groups])
        dist = np.sqrt(((centroids - appearance) ** 2).sum(axis=1)) / self.radius
        k = int(np.argmin(dist))
        return self.groups[k], float(dist[k])

    def group_for(self, appearance: np.ndarray, margin: float, coords: np.ndarray, index: int) -> Unit | None:
        """The group the image joins (and is added to), or None: it waits in the pool.

        A group founded by this image's arrival is returned with the image already in it.
        """
        group, dist = self.nearest(appearance)
        if group is not None and dist <= self.settings.join:
            self._add(group, appearance, margin, coords, index)
            return self._merge_into(group)
        self.pool.append(Pooled(np.array(appearance, dtype=np.float64), margin, coords.copy(), index))
        if len(self.pool) > POOL_SIZE:
            self.pool.pop(0)
        return self._found(index)

    def _add(
        self, group: Unit, appearance: np.ndarray, margin: float, coords: np.ndarray, index: int
    ) -> None:
        group.add(margin, coords, index, self.seed)
        group.centroid = group.centroid + (appearance - group.centroid) / group.count

    def _found(self, index: int) -> Unit | None:
        """Found a group on the pool's densest neighbourhood when it holds ``seed_images``."""
        if len(self.pool) < self.settings.seed_images:
            return None
        points = np.stack([p.appearance for p in self.pool])
        sq = (points**2).sum(axis=1)
        dist2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * points @ points.T, 0.0)
        near = dist2 <= (self.settings.join * self.radius) ** 2
        counts = near.sum(axis=1)
        best = int(np.argmax(counts))
        if counts[best] < self.settings.seed_images:
            return None
        members = [p for p, keep in zip(self.pool, near[best], strict=True) if keep]
        self.pool = [p for p, keep in zip(self.pool, near[best], strict=True) if not keep]
        if len(self.groups) >= self.settings.max_groups:
            self.groups.remove(min(self.groups, key=lambda g: g.last_seen))
        group = Unit.empty(self.new_ident(), "", self.settings.capacity, self.settings.feature_dims, index)
        group.centroid = np.zeros_like(members[0].appearance)
        self.created += 1
        for p in members:
            self._add(group, p.appearance, p.margin, p.coords, p.index)
        group.last_seen = index
        self.groups.append(group)
        group = self._merge_into(group)
        # The image that arrived founds the group only if it is one of its members.
        return group if any(p.index == index for p in members) else None

    def _merge_into(self, group: Unit) -> Unit:
        """Merge every other group whose centroid lies within ``merge`` radii of ``group``'s;
        returns the group that holds ``group``'s images afterwards (the older one keeps its number)."""
        reach = self.settings.merge * self.radius
        for other in list(self.groups):
            if other is group or other not in self.groups:
                continue
            if float(np.sqrt(((other.centroid - group.centroid) ** 2).sum())) <= reach:
                keep, gone = (group, other) if group.ident < other.ident else (other, group)
                keep.absorb(gone, self.seed)
                self.groups.remove(gone)
                self.merged += 1
                group = keep
        return group

    def clear(self) -> None:
        self.groups = []
        self.pool = []
        self.created = 0
        self.merged = 0
