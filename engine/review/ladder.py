"""The ladder of one site: which rule decides its images, and the certificates that moved it.

Per site (a folder or slide the clinician loaded; a site group when nobody said) the rules form
a ladder (``docs/review-certificates.md``):

* **A0**, the source model's own decisions;
* **A1**, the label-free operating point reported without review — only where the method runs
  with ``report_operating_point`` on (off by default: *review first*, ``docs/review-certificates.md``);
  then a site's images are decided by its *latest* threshold (the report written after a folder
  is processed uses the operating point fitted on all of it, not the one in use when each image
  arrived); by default every reported threshold is 0 and A1 decides as A0;
* **candidates** (``engine.methods.idipt_plus``: ``fit``, ``shift``, ``prior``, ``guarded`` — the
  operating point once its guards accept it — each a threshold on the source margin, and
  ``prompted``, I-DiPT's own decision), computed beside the rule in use and **never reported
  until a certificate shows them better on this site**.

A :class:`Comparison` is one certificate: when it starts, the candidate's parameters are frozen
(a threshold is one number from then on) and so is its *population*: the site's images
processed so far. The images where the rule in use and the candidate disagree are put in a
random order, drawn once from a seeded generator, and are reviewed in that order: every review
is a uniform draw without replacement from them, whatever order the images arrived in
(:mod:`engine.review.sampling`). Marks a reviewer made elsewhere are used when the order reaches
them, never before (so where a reviewer chose to look does not bias the sample).

Each review gives ``z = 1[candidate right] - 1[rule right]``. The j-th comparison of a site is
tested at ``alpha / 2**j`` (so the whole ladder errs at most ``alpha``):

* **A1 against A0** (only where A1 changed a decision of the population): *verified* when the
  lower bound on the mean of ``z`` is above 0; *reverted* (the site goes back to the source
  model's decisions) when, with at least ``min_reviews`` reviews, the upper bound shows harm at
  ``1 - alpha_j``, or the upper bound at the revert level shows a harm above ``tolerance`` of the
  site's images (the rule of ``engine.review.rule``, now on a uniform sample).
* **a candidate against the rule in use**: *promoted* when the lower bound is above 0 (it decides
  the site's images from then on, the covered ones and, under the stated assumption that later
  images are like them, the ones after); *not better* when the upper bound is at or below 0, or
  after ``patience`` reviews without a verdict (the next candidate is tried).

A verdict covers the population it was drawn from (:attr:`Comparison.covered`); what it says of
later images rests on their being like those, and :meth:`Comparison.describe` says so.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.review.sampling import SamplingSequence

OPEN, VERIFIED, REVERTED, PROMOTED, NOT_BETTER = "open", "verified", "reverted", "promoted", "not better"
SOURCE_RULE, LABEL_FREE = "source", "operating point"
PROMPTED = "prompted"
GUARDED = "guarded"  # the label-free operating point as a candidate (the method's default: review first)
DEFAULT_CANDIDATES = ("fit", "shift", "prior", GUARDED, PROMPTED)


@dataclass(frozen=True)
class LadderRule:
    """How the ladder's comparisons are tested (frozen before any evaluation; see the module)."""

    alpha: float = 0.05  # the whole ladder of one site errs at most this
    revert_alpha: float = 0.25  # the revert level's error (75 %), as engine.review.rule
    tolerance: float = 0.01  # harm tolerated, share of the site's images
    min_reviews: int = 3  # reviews before A1 can be reverted
    patience: int = 4  # reviews after which a candidate that has not been right more often is given up
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES  # tried in this order

    def level(self, j: int) -> float:
        """The error of the j-th comparison (1-based): ``alpha / 2**j``."""
        return self.alpha / 2.0**j


@dataclass(frozen=True)
class SiteImages:
    """What is known of one site's images without labels, in arrival order.

    Attributes:
        reported: ``(n,)`` the label-free decision reported when each image arrived.
        source: ``(n,)`` the source model's decision (A0).
        threshold: ``(n,)`` the label-free threshold on the margin in use when each image arrived
            (A1; 0 is the source's own; None: the decisions are not thresholds, ``reported`` stands).
        margin: ``(n,)`` the source margin ``l_1 - l_0`` (nan: not a two-class decision).
        candidates: per candidate, ``(n,)`` its threshold when each image was decided (nan: none yet).
        prompted: ``(n,)`` I-DiPT's prompted decision (-1: not computed).
    """

    reported: np.ndarray
    source: np.ndarray
    margin: np.ndarray
    threshold: np.ndarray | None = None
    candidates: Mapping[str, np.ndarray] = field(default_factory=dict)
    prompted: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.reported.shape[0])

    def head(self, n: int) -> SiteImages:
        """The first ``n`` images."""
        return SiteImages(
            self.reported[:n],
            self.source[:n],
            self.margin[:n],
            None if self.threshold is None else self.threshold[:n],
            {k: v[:n] for k, v in self.candidates.items()},
            None if self.prompted is None else self.prompted[:n],
        )

    def latest_threshold(self, n: int) -> float:
        """A1's threshold after the first ``n`` images (nan when A1 is not a threshold)."""
        if self.threshold is None or n == 0 or not np.isfinite(self.margin[:n]).all():
            return math.nan
        return float(self.threshold[n - 1])


def site_seed(seed: int, site: str) -> int:
    """A stable integer for ``(seed, site)`` (the site's random orders do not depend on hashing)."""
    return (int(seed) * 1_000_003 + zlib.crc32(site.encode("utf-8", "surrogateescape"))) & 0x7FFFFFFF


@dataclass
class Comparison:
    """One certificate of a site's ladder (see the module docstring).

    Attributes:
        index: j, its place in the site's ladder (1-based); tested at ``rule.level(j)``.
        candidate: what is tested: :data:`LABEL_FREE` (A1 against A0) or a candidate's name.
        threshold: the candidate's frozen threshold (nan: not a threshold candidate).
        covered: the site's images it covers (the first ``covered`` in arrival order).
        before: ``(covered,)`` the decisions of the rule in use.
        after: ``(covered,)`` the candidate's decisions.
        order: the disagreements, as positions in the site's arrival order, in review order.
        sequence: the confidence sequence of the mean of ``z`` over the disagreements.
        reviewed: positions whose review was used, in order.
        verdict: :data:`OPEN`, :data:`VERIFIED`, :data:`REVERTED`, :data:`PROMOTED` or :data:`NOT_BETTER`.
    """

    index: int
    candidate: str
    threshold: float
    covered: int
    before: np.ndarray
    after: np.ndarray
    order: list[int]
    sequence: SamplingSequence
    alpha: float
    reviewed: list[int] = field(default_factory=list)
    verdict: str = OPEN

    @property
    def disagreements(self) -> int:
        return len(self.order)

    @property
    def next_position(self) -> int | None:
        """The next image to review (None: the comparison is decided or every disagreement was reviewed)."""
        if self.verdict != OPEN or len(self.reviewed) >= len(self.order):
            return None
        return self.order[len(self.reviewed)]

    def e_value(self) -> float:
        """Evidence that the candidate is better on the covered images (an e-value, for e-BH)."""
        return self.sequence.e_value(0.0)

    def describe(self, total: int, part: str = "") -> str:
        """One sentence: the verdict, its level and scope (``total``: the site's images now, or
        its part's, when ``part`` names the part of a split folder it is about: "part 2 of 3")."""
        level = f"{100 * (1 - self.alpha):.1f} %".replace(".0 %", " %")
        what = {LABEL_FREE: "the operating point", GUARDED: "the site's operating point"}.get(
            self.candidate, f"the {self.candidate} candidate"
        )
        n, d = self.covered, self.disagreements
        scope = f"the {d} changed decision{'s' if d != 1 else ''} of the first {n} images"
        scope += f" of {part}" if part else ""
        where = f"{part} of this folder" if part else "this site"
        later = f"; the {total - n} images after them are assumed alike" if total > n else ""
        counts = f" ({len(self.reviewed)} reviewed)"
        if self.sequence.exhausted:
            level, counts = "known exactly", " (every one reviewed)"
        if self.verdict == VERIFIED:
            return f"{what} is better on {scope}, {level}{counts}{later}"
        if self.verdict == PROMOTED:
            return f"{what} decides {where}: better on {scope}, {level}{counts}{later}"
        if self.verdict == REVERTED:
            return f"{what} was turned back: it does harm on {scope}{counts}; the source model decides"
        if self.verdict == NOT_BETTER:
            return f"{what} was not shown better on {scope}{counts}; it is not used"
        return f"{what} is under review on {scope}{counts}"


class SiteLadder:
    """One site's ladder: the rule in use and every comparison so far (module docstring).

    Args:
        site: the site's key (its random orders are seeded by it).
        rule: the testing rule (:class:`LadderRule`'s defaults when None).
        seed: the run's seed.
    """

    def __init__(self, site: str, rule: LadderRule | None = None, seed: int = 0) -> None:
        self.site = site
        self.rule = rule if rule is not None else LadderRule()
        self.seed = seed
        self.comparisons: list[Comparison] = []
        self.current = LABEL_FREE  # the rule in use: LABEL_FREE, SOURCE_RULE or a candidate's name
        self.current_threshold = math.nan

    # -- decisions -----------------------------------------------------------------------------
    def decide(self, images: SiteImages, upto: int | None = None) -> np.ndarray:
        """The decisions of the rule in use for the site's first ``upto`` images (all: None)."""
        n = len(images) if upto is None else upto
        return self._decisions(images, self.current, self.current_threshold, n)

    def _decisions(self, images: SiteImages, rule: str, threshold: float, n: int) -> np.ndarray:
        if rule == LABEL_FREE:
            latest = images.latest_threshold(len(images))
            if math.isnan(latest):
                return images.reported[:n].copy()
            return (images.margin[:n] > latest).astype(np.int64)
        if rule == SOURCE_RULE:
            return images.source[:n].copy()
        if rule == PROMPTED:
            prompted = images.prompted[:n] if images.prompted is not None else np.full(n, -1)
            return np.where(prompted >= 0, prompted, images.reported[:n])
        return (images.margin[:n] > threshold).astype(np.int64)

    # -- the ladder ----------------------------------------------------------------------------
    @property
    def active(self) -> Comparison | None:
        last = self.comparisons[-1] if self.comparisons else None
        return last if last is not None and last.verdict == OPEN and last.next_position is not None else None

    def start(self, images: SiteImages) -> Comparison | None:
        """Freeze the next comparison on the images processed so far (None: nothing left to test)."""
        n = len(images)
        if n == 0 or self.active is not None:
            return self.active
        tried = {c.candidate for c in self.comparisons}
        steps: list[tuple[str, float]] = []
        if LABEL_FREE not in tried and self.current == LABEL_FREE:
            steps.append((LABEL_FREE, math.nan))
        for name in self.rule.candidates:
            if name in tried or name == self.current:
                continue
            if name == PROMPTED:
                if images.prompted is not None and bool((images.prompted[:n] >= 0).any()):
                    steps.append((name, math.nan))
            elif name in images.candidates:
                steps.append((name, float(images.candidates[name][n - 1])))
        before = self.decide(images, n)
        for name, threshold in steps:
            if name != PROMPTED and name != LABEL_FREE and not math.isfinite(threshold):
                continue
            after = (
                images.source[:n].copy()
                if name == LABEL_FREE
                else self._decisions(images, name, threshold, n)
            )
            if name == LABEL_FREE:
                before, after = after, before  # A1 is the candidate, A0 the rule it is tested against
            changed = np.flatnonzero(after != before)
            if changed.size == 0:
                self.comparisons.append(self._empty(name, threshold, n, before, after))
                before = self.decide(images, n)
                continue
            j = len([c for c in self.comparisons if c.disagreements]) + 1
            rng = np.random.default_rng([site_seed(self.seed, self.site), j, n])
            comparison = Comparison(
                index=j,
                candidate=name,
                threshold=threshold,
                covered=n,
                before=before,
                after=after,
                order=[int(i) for i in rng.permutation(changed)],
                sequence=SamplingSequence(int(changed.size), alpha=self.rule.level(j)),
                alpha=self.rule.level(j),
            )
            self.comparisons.append(comparison)
            return comparison
        return None

    def _empty(
        self, name: str, threshold: float, n: int, before: np.ndarray, after: np.ndarray
    ) -> Comparison:
        """A candidate that decides the covered images exactly as the rule in use: nothing to test."""
        return Comparison(
            0, name, threshold, n, before, after, [], SamplingSequence(1), 0.0, verdict=NOT_BETTER
        )

    def review(self, labels: Mapping[int, int]) -> list[Comparison]:
        """Use the labels known so far (position in arrival order -> class) in the active
        comparison's order, as far as they reach; returns the comparisons decided by them."""
        decided: list[Comparison] = []
        c = self.active
        while c is not None:
            position = c.next_position
            if position is None or position not in labels:
                break
            y = int(labels[position])
            z = int(c.after[position] == y) - int(c.before[position] == y)
            c.sequence.update(z)
            c.reviewed.append(position)
            if self._judge(c):
                decided.append(c)
                c = self.active
        return decided

    def _judge(self, c: Comparison) -> bool:
        """Settle ``c`` if its reviews allow; True when its verdict changed."""
        r = self.rule
        lower, upper = c.sequence.lower(c.alpha), c.sequence.upper(c.alpha)
        exhausted = c.sequence.exhausted
        if c.candidate == LABEL_FREE:
            d = c.disagreements / max(c.covered, 1)
            harm = d * -c.sequence.upper(r.revert_alpha)
            if lower > 0:
                c.verdict = VERIFIED
            elif len(c.reviewed) >= r.min_reviews and (upper < 0 or harm > r.tolerance):
                c.verdict = REVERTED
                self.current, self.current_threshold = SOURCE_RULE, math.nan
            elif exhausted:  # every disagreement reviewed: the effect is known exactly
                if c.sequence.mean < 0:
                    c.verdict = REVERTED
                    self.current, self.current_threshold = SOURCE_RULE, math.nan
                else:
                    c.verdict = VERIFIED if c.sequence.mean > 0 else NOT_BETTER
            return c.verdict != OPEN
        if lower > 0:
            c.verdict = PROMOTED
            self.current, self.current_threshold = c.candidate, c.threshold
        elif upper <= 0 or exhausted or (len(c.reviewed) >= r.patience and c.sequence.mean <= 0):
            c.verdict = NOT_BETTER
        return c.verdict != OPEN

    def reviews(self) -> int:
        return sum(len(c.reviewed) for c in self.comparisons)


def tested(ladders: Sequence[SiteLadder]) -> list[Comparison]:
    """Every comparison with at least one disagreement, across sites (what e-BH combines)."""
    return [c for ladder in ladders for c in ladder.comparisons if c.disagreements]
