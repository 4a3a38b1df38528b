"""A site's running state: a uniform sample of its images, its operating point and its candidates.

A *unit* is what one operating point is fitted to: a site the clinician loaded (a folder or a
slide: the app and ``f2tta run`` say which site every image belongs to), or, when nobody says
(the paper's free-form protocol), a site group found by appearance (``_groups``). A unit keeps

* a **uniform sample** of its images (reservoir sampling, at most ``capacity``): their source
  margins and feature coordinates (and, for a named site, their class-removed appearance, which
  the split test reads: ``_split``), what its operating point and the ``prior`` candidate are
  fitted to. A uniform sample, not the most recent images: a site read in scan order, or whose
  class mix drifts, is judged on all of it;
* the sum of all its images' source margins (the ``shift`` candidate needs their mean);
* its operating point: the threshold in use, the last pessimistic estimates and the last fit.

Reservoir slots are drawn from a generator seeded by the session seed, the unit and the count,
so a replay from cached source passes keeps exactly the live run's sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from engine.methods.idipt_plus._candidates import FIT, GUARDED, PRIOR, SHIFT, prior_threshold


@dataclass(eq=False)  # units are compared by identity (they hold arrays)
class Unit:
    """One unit's running state (see the module docstring).

    Attributes:
        ident: the unit's number (0, 1, ... in order of creation; never reused).
        site: the site's key as the caller named it ("" for a group found by appearance).
        count: images that joined the unit.
        margins: ``(capacity,)`` the sampled images' source margins.
        coords: ``(capacity, K)`` their feature coordinates.
        margin_sum: the sum of every joined image's source margin.
        last_seen: stream index of the last image that joined.
        centroid: ``(R,)`` running mean appearance (groups found by appearance; empty otherwise).
        threshold: the operating point in use (0 is the source model's own threshold).
        estimates: the last pessimistic estimates (0 where a fit was not accepted), newest last.
        fitted_at: ``count`` at the last fit (0: never fitted).
        fits: number of fits so far (seeds the fit's bootstrap).
        fit: what the last fit found (:class:`engine.methods.idipt_plus.Fit`), or None.
        prior: the ``prior`` candidate computed at the last fit (nan before the first).
        held: sampled images held (the first ``held`` slots; ``min(count, capacity)`` except for a
            part, which starts with its share of its parent's sample).
        appearance: ``(capacity, R)`` the sampled images' appearance (named sites; empty otherwise).
        parent: the unit a part was split from (-1: not a part).
        parts: the numbers of the two parts a site was split into (empty: not split).
        splittable: the split test may still run (a named site that has not split, whose sample
            holds every sampled image's appearance).
    """

    ident: int
    site: str
    count: int
    margins: np.ndarray
    coords: np.ndarray
    margin_sum: float = 0.0
    last_seen: int = 0
    centroid: np.ndarray = field(default_factory=lambda: np.zeros(0))
    threshold: float = 0.0
    estimates: list[float] = field(default_factory=list)
    fitted_at: int = 0
    fits: int = 0
    fit: object | None = None
    prior: float = math.nan  # the ``prior`` candidate at the last fit
    held: int = 0
    appearance: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    parent: int = -1
    parts: list[int] = field(default_factory=list)
    splittable: bool = False

    @classmethod
    def empty(cls, ident: int, site: str, capacity: int, feature_dim: int, index: int) -> Unit:
        return cls(ident, site, 0, np.zeros(capacity), np.zeros((capacity, feature_dim)), last_seen=index)

    @property
    def size(self) -> int:
        """Images held in the sample."""
        return self.held

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """``(margins (n,), coords (n, K))`` of the sampled images."""
        n = self.size
        return self.margins[:n].copy(), self.coords[:n].copy()

    def add(
        self, margin: float, coords: np.ndarray, index: int, seed: int, appearance: np.ndarray | None = None
    ) -> None:
        """One image joins: it enters the sample with probability ``capacity / count`` (an empty slot
        while there is one: a part's slots not filled by its parent's sample fill first)."""
        cap = len(self.margins)
        if self.held < cap:
            slot = self.held
            self.held += 1
        else:
            slot = int(np.random.default_rng([seed, self.ident, self.count, 11]).integers(0, self.count + 1))
        if slot < cap:
            self.margins[slot] = margin
            self.coords[slot] = coords
            if appearance is not None:
                if self.appearance.shape != (cap, appearance.shape[0]):
                    self.appearance = np.zeros((cap, appearance.shape[0]))
                self.appearance[slot] = appearance
        self.count += 1
        self.margin_sum += margin
        self.last_seen = index
        if self.parent >= 0 and appearance is not None:  # a part's centre follows its images
            self.centroid = self.centroid + (appearance - self.centroid) / self.count

    def absorb(self, other: Unit, seed: int) -> None:
        """Take ``other``'s images in (two groups found to be one site): the samples are merged in
        proportion to the counts they stand for; the operating point starts again."""
        total = self.count + other.count
        cap = len(self.margins)
        mine, theirs = self.sample(), other.sample()
        if total <= cap:
            margins = np.concatenate([mine[0], theirs[0]])
            coords = np.concatenate([mine[1], theirs[1]])
        else:
            rng = np.random.default_rng([seed, self.ident, other.ident, total, 13])
            take = round(cap * self.count / total)
            take = min(take, mine[0].shape[0])
            rest = min(cap - take, theirs[0].shape[0])
            a = rng.choice(mine[0].shape[0], take, replace=False)
            b = rng.choice(theirs[0].shape[0], rest, replace=False)
            margins = np.concatenate([mine[0][a], theirs[0][b]])
            coords = np.concatenate([mine[1][a], theirs[1][b]])
        self.margins[: margins.shape[0]] = margins
        self.coords[: coords.shape[0]] = coords
        self.held = int(margins.shape[0])
        if self.centroid.size and other.centroid.size:
            self.centroid = (self.centroid * self.count + other.centroid * other.count) / total
        self.count = total
        self.margin_sum += other.margin_sum
        self.last_seen = max(self.last_seen, other.last_seen)
        self.threshold, self.estimates, self.fitted_at, self.fit = 0.0, [], 0, None
        self.prior = math.nan

    def refit_prior(self, source_prior: float) -> None:
        """Re-estimate the ``prior`` candidate on the sample (done with every operating-point fit)."""
        margins, _ = self.sample()
        self.prior = prior_threshold(margins, source_prior) if margins.size else math.nan

    def candidates(self, source_margin: float) -> dict[str, float]:
        """The unit's candidate thresholds now (nan where a candidate has no value yet).

        Args:
            source_margin: the source model's margin at the source training images' mean feature.
        """
        estimate = getattr(self.fit, "estimate", math.nan)
        return {
            FIT: float(estimate),
            SHIFT: self.margin_sum / self.count - source_margin if self.count else math.nan,
            PRIOR: self.prior,
            GUARDED: self.threshold if self.threshold != 0.0 else math.nan,
        }
