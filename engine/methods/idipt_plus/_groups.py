"""Site groups: the stream's images gathered by appearance, each group with its own operating point.

A new hospital site shows itself by how its images look (stain, scanner, compression), once the
class is taken out of the appearance (:meth:`engine.model.source_reference.SourceReference.appearance`).
Every image joins the group whose centroid is nearest in that space, if it lies within
``join`` source bandwidths of it; otherwise it starts a new group. A group keeps a running
centroid, the count of images it has seen, and the source margin and feature coordinates of its
last ``capacity`` images: what its operating point is fitted to. Groups are formed online, so
their number follows the stream, not a setting; at most ``max_groups`` are kept (the one seen
least recently gives way).

Unlike a fixed-count neighbourhood of the remembered stream, a group's evidence grows with the
site: a long site is judged on more of its own images, and another site's images do not enter
it because they happen to be among the k nearest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CENTROID_MEMORY = 200  # the centroid is a running mean over at most this many recent images


@dataclass
class SiteGroup:
    """One group's running state.

    Attributes:
        ident: the group's number (0, 1, ... in order of creation; never reused).
        centroid: ``(R,)`` running mean appearance.
        count: images that joined the group.
        margins: ``(capacity,)`` ring buffer of source margins.
        coords: ``(capacity, K)`` ring buffer of feature coordinates.
        last_seen: stream index of the last image that joined.
        threshold: the operating point in use: the threshold on the source margin (0 is the
            source model's own).
        estimates: the last pessimistic estimates (0 where a fit was not accepted), newest last.
        fitted_at: ``count`` at the last fit (0: never fitted).
        fits: number of fits so far (seeds the fit's bootstrap).
        fit: what the last fit found (see :class:`engine.methods.idipt_plus.Fit`), or None.
    """

    ident: int
    centroid: np.ndarray
    count: int
    margins: np.ndarray
    coords: np.ndarray
    last_seen: int
    threshold: float = 0.0
    estimates: list[float] = field(default_factory=list)
    fitted_at: int = 0
    fits: int = 0
    fit: object | None = None

    @property
    def size(self) -> int:
        """Images held in the ring buffers."""
        return min(self.count, len(self.margins))

    def recent(self) -> tuple[np.ndarray, np.ndarray]:
        """``(margins (n,), coords (n, K))`` of the held images, oldest first."""
        n, cap = self.size, len(self.margins)
        if self.count <= cap:
            return self.margins[:n].copy(), self.coords[:n].copy()
        start = self.count % cap
        order = np.r_[start:cap, 0:start]
        return self.margins[order], self.coords[order]

    def add(self, appearance: np.ndarray, margin: float, coords: np.ndarray, index: int) -> None:
        slot = self.count % len(self.margins)
        self.margins[slot] = margin
        self.coords[slot] = coords
        self.count += 1
        self.centroid += (appearance - self.centroid) / min(self.count, CENTROID_MEMORY)
        self.last_seen = index


class SiteGroups:
    """The groups of one stream (see the module docstring).

    Args:
        join: largest distance to a centroid, in source bandwidths, at which an image joins.
        bandwidth: the source images' median pairwise appearance distance.
        capacity: images per group kept for fitting.
        feature_dim: K, the feature coordinates kept per image.
        max_groups: groups kept at most.
    """

    def __init__(
        self, join: float, bandwidth: float, capacity: int, feature_dim: int, max_groups: int
    ) -> None:
        self.join = join
        self.bandwidth = bandwidth
        self.capacity = capacity
        self.feature_dim = feature_dim
        self.max_groups = max_groups
        self.groups: list[SiteGroup] = []
        self.created = 0

    def nearest(self, appearance: np.ndarray) -> tuple[SiteGroup | None, float]:
        """The nearest group and its distance in bandwidths (None, inf when there is none)."""
        if not self.groups:
            return None, float("inf")
        centroids = np.stack([g.centroid for g in self.groups])
        dist = np.sqrt(((centroids - appearance) ** 2).sum(axis=1)) / self.bandwidth
        k = int(np.argmin(dist))
        return self.groups[k], float(dist[k])

    def group_for(self, appearance: np.ndarray, index: int) -> SiteGroup:
        """The group an image with this appearance joins (a new one when none is near enough)."""
        group, dist = self.nearest(appearance)
        if group is not None and dist <= self.join:
            return group
        if len(self.groups) >= self.max_groups:
            self.groups.remove(min(self.groups, key=lambda g: g.last_seen))
        group = SiteGroup(
            ident=self.created,
            centroid=np.array(appearance, dtype=np.float64),
            count=0,
            margins=np.zeros(self.capacity),
            coords=np.zeros((self.capacity, self.feature_dim)),
            last_seen=index,
        )
        self.created += 1
        self.groups.append(group)
        return group

    def clear(self) -> None:
        self.groups = []
        self.created = 0
