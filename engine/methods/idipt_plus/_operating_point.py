"""I-DiPT+'s operating point: per site group, a threshold on the source margin, moved only on evidence.

The source model still ranks a new site's images well; what moves is where the site's classes
fall against its decision threshold (``docs/method.md``, "Measured: why I-DiPT stays at
SourceOnly"). :class:`OperatingPoint` takes one image at a time (:class:`Observation`: its
source margin, feature coordinates and class-removed appearance) and returns a
:class:`Decision` that says what was decided and why:

* ``source-like``: the image looks like the source domain (within the radius that holds 99 % of
  the source training images): the source threshold applies.
* ``accepted``: the image's site group (:mod:`._groups`) has an accepted operating point; the
  image is decided by the source margin against the group's threshold.
* ``not-accepted``: the group has none (too few images, or a guard failed); the source model's
  decision is reported.
* ``awaiting-review``: the group has an accepted operating point, held back by the method's
  default (review first, :meth:`Decision.held_for_review`): the source model's decision is
  reported and the operating point is the ``guarded`` candidate of the site's review ladder.

A group's operating point is refitted as the group grows (every ``refit`` of its size, at least
every 10 images); each fit and its guards are :mod:`._fit`'s. The unit's threshold moves only
when two accepted fits agree (:func:`._fit.agreed_threshold`). Every fit's bootstrap is seeded
by the session seed, the group and the fit's number, so a replay from cached source passes
decides exactly as the live run did.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from engine.methods.idipt_plus._fit import Fit, OperatingPointSettings, agreed_threshold, fit_operating_point
from engine.methods.idipt_plus._groups import SiteGroups
from engine.methods.idipt_plus._split import SplitSettings, make_parts, nearer_part, split_due, split_test
from engine.methods.idipt_plus._units import Unit
from engine.vocabulary import DecisionPath

SOURCE_LIKE = DecisionPath.SOURCE_LIKE
ACCEPTED = DecisionPath.ACCEPTED
NOT_ACCEPTED = DecisionPath.NOT_ACCEPTED
HELD = DecisionPath.HELD  # accepted, not reported until reviews certify it (review first)
PATHS = (SOURCE_LIKE, ACCEPTED, NOT_ACCEPTED, HELD)
AWAITING_REVIEW = (
    "it decides once your answers show it better"  # ends the reason of a decision held for review
)
KEPT_ESTIMATES = 4  # the last pessimistic estimates a unit keeps


@dataclass(frozen=True)
class Observation:
    """What the operating point sees of one image: functions of its source pass only.

    Attributes:
        margin: the source logit margin ``l_1 - l_0``.
        coords: ``(K,)`` whitened pre-logit feature coordinates.
        appearance: ``(R,)`` class-removed appearance coordinates.
    """

    margin: float
    coords: np.ndarray
    appearance: np.ndarray


@dataclass(frozen=True)
class Decision:
    """The operating point's verdict on one image.

    Attributes:
        path: :data:`SOURCE_LIKE`, :data:`ACCEPTED`, :data:`NOT_ACCEPTED` or :data:`HELD`.
        group: the unit the image joined (-1: none, e.g. waiting for a site group to form).
        threshold: the threshold on the source margin the image was decided by (0: the source's).
        reason: why (``source-like``, ``accepted``, ``too few images``, or the guard that failed).
        fit: the unit's last fit, or None.
        site: the site the caller named ("" when none was named).
        candidates: the unit's candidate thresholds when the image was decided
            (:mod:`._candidates`; empty without a unit).
    """

    path: str
    group: int
    threshold: float
    reason: str
    fit: Fit | None = None
    site: str = ""
    candidates: dict[str, float] = field(default_factory=dict)

    def positive(self, margin: float) -> bool:
        """The decision for an image of source margin ``margin``."""
        return margin > self.threshold

    def held_for_review(self) -> Decision:
        """This decision as reported while the operating point waits for a certificate.

        The source model decides (threshold 0); an accepted operating point stays a candidate of
        the site's ladder (``guarded`` in :attr:`candidates`) and says so in :attr:`reason`.
        """
        if self.path != ACCEPTED:
            return self
        reason = (
            f"the site threshold ({self.threshold:+.3g} on the original model's score) passed its safety "
            f"checks; {AWAITING_REVIEW}"
        )
        return replace(self, path=HELD, threshold=0.0, reason=reason)


class OperatingPoint:
    """Per-unit operating points of one stream (see the module docstring).

    Args:
        settings: the operating point's settings.
        radius: the appearance radius holding 99 % of the source training images.
        seed: seeds every bootstrap and every unit's sample.
        source_margin: the source model's margin at the mean source feature (``shift`` candidate).
        source_prior: the source training split's share of class 1 (``prior`` candidate).
    """

    def __init__(
        self,
        settings: OperatingPointSettings,
        radius: float,
        seed: int,
        source_margin: float = 0.0,
        source_prior: float = 0.5,
    ) -> None:
        self.settings = settings
        self.radius = radius
        self.seed = seed
        self.source_margin = source_margin
        self.source_prior = source_prior
        self.units_created = 0
        self.sites: dict[str, Unit] = {}  # units of named sites, by name
        self.parts: dict[str, list[Unit]] = {}  # the two parts of each named site that split (_split)
        self.groups = SiteGroups(settings, radius, seed, self._new_ident)
        self.seen = 0

    def _new_ident(self) -> int:
        self.units_created += 1
        return self.units_created - 1

    def units(self) -> list[Unit]:
        """Every unit kept: named sites first (in order of arrival), their parts, then groups."""
        parts = [p for pair in self.parts.values() for p in pair]
        return [*self.sites.values(), *parts, *self.groups.groups]

    def step(self, obs: Observation, source_gate: bool = False, site: str | None = None) -> Decision:
        """Decide one image, then let it join its unit (refitting the unit when due).

        Args:
            obs: the image's observation.
            source_gate: images within the source radius keep the source decision and join nothing.
            site: the site the image belongs to (the folder or slide it was loaded from); None
                when nobody says, and the image's site group is found by appearance.
        """
        index = self.seen
        self.seen += 1
        if source_gate and float(np.sqrt((obs.appearance**2).sum())) <= self.radius:
            return Decision(SOURCE_LIKE, -1, 0.0, SOURCE_LIKE, site=site or "")
        if site is not None:
            named = self._site_unit(site, obs.appearance, index)
            decision = self._decision(named)
            named.add(obs.margin, obs.coords, index, self.seed, obs.appearance)
            unit: Unit | None = named
        else:
            before = self.groups.nearest(obs.appearance)
            near = before[0] if before[0] is not None and before[1] <= self.settings.join else None
            decision = (
                self._decision(near)
                if near is not None
                else Decision(NOT_ACCEPTED, -1, 0.0, "no site group yet")
            )
            unit = self.groups.group_for(obs.appearance, obs.margin, obs.coords, index)
        if unit is not None:
            cfg = self.settings
            due = max(10, int(np.ceil(cfg.refit * unit.count)))
            if unit.count >= cfg.min_images and unit.count - unit.fitted_at >= due:
                due_split = unit.splittable and split_due(unit.count, unit.fitted_at, cfg.min_images)
                parts = self._split(unit) if due_split else []
                for part in parts or [unit]:
                    self._refit(part)
        return decision

    def _site_unit(self, site: str, appearance: np.ndarray, index: int) -> Unit:
        """The unit of an image of the named ``site``: the site's, or the nearer of its parts."""
        parts = self.parts.get(site)
        if parts:
            return nearer_part(parts, appearance)
        unit = self.sites.get(site)
        if unit is None:
            cfg = self.settings
            unit = self.sites[site] = Unit.empty(
                self._new_ident(), site, cfg.capacity, cfg.feature_dims, index
            )
            unit.splittable = True
        return unit

    def _split(self, unit: Unit) -> list[Unit]:
        """The site's two parts when its sample mixes two appearances (``_split``), else none."""
        cfg = self.settings
        if unit.appearance.shape[0] != len(unit.margins):
            return []
        test = split_test(
            unit.appearance[: unit.size],
            self.radius,
            SplitSettings(cfg.split_share, cfg.split_separation, cfg.split_stability, cfg.min_images),
            np.random.default_rng([self.seed, unit.ident, unit.fits, 17]),
        )
        if not test.split:
            return []
        parts = make_parts(unit, test.labels, (self._new_ident(), self._new_ident()))
        self.parts[unit.site] = parts
        return parts

    def _decision(self, unit: Unit) -> Decision:
        fit = unit.fit if isinstance(unit.fit, Fit) else None
        candidates = unit.candidates(self.source_margin)
        if unit.threshold != 0.0:
            return Decision(ACCEPTED, unit.ident, unit.threshold, ACCEPTED, fit, unit.site, candidates)
        if fit is None:
            reason = f"too few images (a site needs {self.settings.min_images} before its operating point is fitted)"
            return Decision(NOT_ACCEPTED, unit.ident, 0.0, reason, None, unit.site, candidates)
        reason = fit.reason if not fit.accepted else "waiting for a second agreeing fit"
        return Decision(NOT_ACCEPTED, unit.ident, 0.0, reason, fit, unit.site, candidates)

    def _refit(self, unit: Unit) -> None:
        margins, coords = unit.sample()
        rng = np.random.default_rng([self.seed, unit.ident, unit.fits])
        fit = fit_operating_point(margins, coords, self.settings, rng)
        unit.fit = fit
        unit.fits += 1
        unit.fitted_at = unit.count
        unit.estimates = [*unit.estimates, fit.pessimistic][-KEPT_ESTIMATES:]
        unit.threshold = agreed_threshold(unit.estimates)
        unit.refit_prior(self.source_prior)

    def clear(self) -> None:
        self.sites = {}
        self.parts = {}
        self.groups.clear()
        self.units_created = 0
        self.seen = 0
