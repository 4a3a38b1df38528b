"""A certificate per site group: its reviews, its bounds, its verdict, saved as plain JSON.

The rule that turns reviews into a verdict, and why, is :mod:`engine.review.rule`. A certificate
counts the group's images and disagreements (``d``, known without labels), takes the ``z`` of
each reviewed disagreement, keeps the two betting confidence sequences the rule reads, and
records when its verdict was reached. Saved certificates are checked by replaying their reviews:
a file whose bounds or verdict its reviews do not give is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.review import _checks
from engine.review._checks import CertificateError
from engine.review.rule import (
    DEFAULT_RULE,
    REVERTED,
    UNDECIDED,
    VERDICTS,
    VERIFIED,
    ReviewRule,
    disagreement_share,
    outcome,
    revert_condition,
)
from engine.review.sequence import BettingSequences

PROJECTION_STREAMS = 64  # simulated futures behind reviews_to_decide
PROJECTION_EVERY = 5  # grid points kept by a projection (every 5th: 200 of 1 000)
PROJECTION_MAX = 200  # reviews looked ahead at most
MAX_REVIEWS = 100_000  # reviews a saved certificate may hold (replaying them takes seconds)


class Certificate:
    """One site group's certificate (see the module docstring).

    Args:
        group: the site group (None: images judged in no group).
        rule: when to verify or revert.
    """

    def __init__(self, group: int | None, rule: ReviewRule = DEFAULT_RULE) -> None:
        self.group = group
        self.rule = rule
        self.images = 0  # images of the group noted so far
        self.disagreements = 0  # of which adapted != source
        self.outcomes: list[int] = []  # z of each review, in review order
        self.verdict = UNDECIDED
        self.decided_at: int | None = None  # reviews used when the verdict was reached
        self.decided_images: int | None = None  # images and disagreements noted at that time
        self.decided_disagreements: int | None = None
        # Each side of a two-sided sequence at 2 alpha with theta 1/2 is a one-sided 1 - alpha bound.
        self._bounds = BettingSequences(1, alpha=2 * rule.alpha, grid_size=rule.grid_size, theta=0.5)
        self._revert = BettingSequences(1, alpha=rule.revert_alpha, grid_size=rule.grid_size, theta=0.0)

    @property
    def reviews(self) -> int:
        return len(self.outcomes)

    @property
    def mean(self) -> float:
        """Observed mean of ``z`` (nan before any review)."""
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else math.nan

    @property
    def lower(self) -> float:
        """One-sided ``1 - alpha`` lower bound on ``mu`` (-1 before any review; never decreases)."""
        return 2.0 * float(self._bounds.lower[0]) - 1.0

    @property
    def upper(self) -> float:
        """One-sided ``1 - alpha`` upper bound on ``mu`` (+1 before any review; never increases)."""
        return 2.0 * float(self._bounds.upper[0]) - 1.0

    @property
    def revert_upper(self) -> float:
        """Upper bound on ``mu`` at the revert level ``1 - revert_alpha``."""
        return 2.0 * float(self._revert.upper[0]) - 1.0

    @property
    def share(self) -> float:
        """``d``: share of the group's images that are disagreements.

        Reviews count as disagreements even when fewer images were noted (reviews loaded before
        the rows), so ``d`` is never below what the reviews themselves show.
        """
        return disagreement_share(self.images, self.disagreements, self.reviews)

    @property
    def harm_bound(self) -> float:
        """Upper bound (``1 - alpha``) on the harm of adapting, as a share of the group's images."""
        return self.share * max(0.0, -self.lower)

    def note_image(self, disagreement: bool) -> str:
        """Count one processed image of the group (its ``d``); returns the verdict."""
        self.images += 1
        self.disagreements += int(bool(disagreement))
        self._judge()
        return self.verdict

    def add_review(self, adapted_correct: bool, source_correct: bool) -> str:
        """Add one reviewed disagreement; returns the verdict (reviews after a revert still count)."""
        return self.add_outcome(outcome(adapted_correct, source_correct))

    def add_outcome(self, z: int) -> str:
        """Add one review's ``z`` in {-1, 0, +1}; returns the verdict."""
        if isinstance(z, bool) or z not in (-1, 0, 1):
            raise ValueError(f"a review's outcome is -1, 0 or +1, not {z!r}")
        self._observe(z)
        self._judge()
        return self.verdict

    def _observe(self, z: int) -> None:
        self.outcomes.append(int(z))
        x = np.array([(z + 1) / 2.0])
        self._bounds.update(x)
        self._revert.update(x)

    def _reverts(self, share: float) -> bool:
        return bool(revert_condition(self.rule, self.reviews, self.upper, self.revert_upper, share))

    def _judge(self) -> None:
        if self.verdict == REVERTED:
            return
        if self._reverts(self.share):
            self._decide(REVERTED)
        elif self.verdict == UNDECIDED and self.lower > 0.0:
            self._decide(VERIFIED)

    def _decide(self, verdict: str) -> None:
        self.verdict = verdict
        self.decided_at = self.reviews
        self.decided_images = self.images
        self.decided_disagreements = self.disagreements

    def reviews_to_decide(self, max_reviews: int = PROJECTION_MAX, seed: int = 0) -> int | None:
        """How many more reviews would likely decide this group (None: more than ``max_reviews``).

        Futures are drawn from the outcomes so far, each of -1, 0, +1 counted with half a review
        more (so an unseen outcome stays possible), with ``d`` as it is now; the answer is the
        median over :data:`PROJECTION_STREAMS` futures, on a grid of every
        :data:`PROJECTION_EVERY`-th candidate mean. 0 for a decided group. Deterministic.
        """
        if self.verdict != UNDECIDED:
            return 0
        counts = np.array([self.outcomes.count(v) for v in (-1, 0, 1)], dtype=np.float64) + 0.5
        rng = np.random.default_rng([seed, *(int(c) for c in counts * 2)])
        draws = rng.choice(
            np.array([-1, 0, 1]), p=counts / counts.sum(), size=(max_reviews, PROJECTION_STREAMS)
        )
        bounds = self._bounds.replicate(PROJECTION_STREAMS, PROJECTION_EVERY)
        revert = self._revert.replicate(PROJECTION_STREAMS, PROJECTION_EVERY)
        decided_after = np.full(PROJECTION_STREAMS, max_reviews + 1)
        share = self.share
        for step in range(max_reviews):
            x = (draws[step] + 1) / 2.0
            bounds.update(x)
            revert.update(x)
            reviews = self.reviews + step + 1
            done = revert_condition(self.rule, reviews, 2 * bounds.upper - 1, 2 * revert.upper - 1, share) | (
                2 * bounds.lower - 1 > 0
            )
            decided_after = np.where(done & (decided_after > max_reviews), step + 1, decided_after)
            if np.sum(decided_after <= max_reviews) > PROJECTION_STREAMS // 2:
                break
        median = int(np.median(decided_after))
        return median if median <= max_reviews else None

    def summary(self) -> dict[str, Any]:
        """What a report shows about the group (plain JSON values)."""
        return {
            "group": self.group,
            "verdict": self.verdict,
            "reviews": self.reviews,
            "images": self.images,
            "disagreements": self.disagreements,
            "disagreement_share": self.share,
            "mean": None if not self.outcomes else self.mean,
            "lower": self.lower,
            "upper": self.upper,
            "harm_bound": self.harm_bound,
            "confidence": 1.0 - self.rule.alpha,
            "decided_at": self.decided_at,
            "reviews_to_decide": self.reviews_to_decide(),
        }

    def describe(self) -> str:
        """One honest sentence for people: what was certified, on how many reviews, how sure."""
        name = "images in no site group" if self.group is None else f"site group {self.group}"
        level = f"{100 * (1 - self.rule.alpha):.0f} %"
        n = self.reviews
        if self.verdict == VERIFIED:
            return (
                f"{name}: adapting verified to help at {level} confidence on {self.decided_at} reviewed "
                f"disagreements (mean gain per changed decision at least {self.lower:+.2f}; "
                f"{n} reviews in all)."
            )
        if self.verdict == REVERTED:
            return (
                f"{name}: reverted to the source model's decisions after {self.decided_at} reviewed "
                f"disagreements (adapting harmed here; harm up to {100 * self.harm_bound:.1f} points "
                f"of the group's images at {level} confidence)."
            )
        more = self.reviews_to_decide()
        likely = f"about {more} more reviews would likely decide it" if more else "it may stay undecided"
        return (
            f"{name}: unverified: the adapted decisions stand but are not certified ({n} reviews; {likely})."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state (the rule is saved by the book that holds the certificate)."""
        return {
            "group": self.group,
            "images": self.images,
            "disagreements": self.disagreements,
            "outcomes": list(self.outcomes),
            "verdict": self.verdict,
            "decided_at": self.decided_at,
            "decided_images": self.decided_images,
            "decided_disagreements": self.decided_disagreements,
            "lower": self.lower,
            "upper": self.upper,
        }

    @classmethod
    def from_dict(
        cls, data: object, rule: ReviewRule = DEFAULT_RULE, where: str = "certificate"
    ) -> Certificate:
        """Inverse of :meth:`to_dict`: the reviews are replayed and must give the saved verdict.

        Raises:
            CertificateError: wrong keys, types or ranges, or bounds and verdict that the saved
                reviews do not give (the file was edited).
        """
        d = _checks.fields(data, CERTIFICATE_KEYS, where)
        group = d["group"]
        if group is not None:
            _checks.integer(group, f"{where}.group")
        cert = cls(group, rule)
        images = _checks.integer(d["images"], f"{where}.images")
        disagreements = _checks.integer(d["disagreements"], f"{where}.disagreements", 0, images)
        outcomes = _checks.listing(d["outcomes"], f"{where}.outcomes")
        if len(outcomes) > MAX_REVIEWS:
            raise CertificateError(f"{where}: more than {MAX_REVIEWS} reviews")
        values = [_checks.integer(z, f"{where}.outcomes[{i}]", -1, 1) for i, z in enumerate(outcomes)]
        verdict = _checks.text(d["verdict"], f"{where}.verdict", VERDICTS)
        decided = [
            _checks.optional_integer(d[k], f"{where}.{k}")
            for k in ("decided_at", "decided_images", "decided_disagreements")
        ]
        lower = _checks.number(d["lower"], f"{where}.lower", -1.0, 1.0)
        upper = _checks.number(d["upper"], f"{where}.upper", -1.0, 1.0)
        if any((v is None) != (verdict == UNDECIDED) for v in decided):
            raise CertificateError(f"{where}: decided_* are set exactly when the verdict is not undecided")
        lower_then = -1.0
        for number, z in enumerate(values, start=1):
            cert._observe(z)
            if number == decided[0]:
                lower_then = cert.lower
        cert.images, cert.disagreements = images, disagreements
        if abs(cert.lower - lower) > 1e-9 or abs(cert.upper - upper) > 1e-9:
            raise CertificateError(f"{where}: its bounds are not those of its reviews (edited?)")
        _check_verdict(cert, verdict, decided, lower_then, where)
        cert.verdict = verdict
        cert.decided_at, cert.decided_images, cert.decided_disagreements = decided
        return cert


CERTIFICATE_KEYS = (
    "group",
    "images",
    "disagreements",
    "outcomes",
    "verdict",
    "decided_at",
    "decided_images",
    "decided_disagreements",
    "lower",
    "upper",
)


def _check_verdict(
    cert: Certificate, verdict: str, decided: list[int | None], lower_then: float, where: str
) -> None:
    """Refuse a saved verdict that the replayed reviews do not support."""
    if verdict == UNDECIDED:
        if cert.lower > 0.0 or cert._reverts(cert.share):
            raise CertificateError(f"{where}: 'undecided', but its reviews decide it (edited?)")
        return
    at, images, disagreements = decided
    assert at is not None and images is not None and disagreements is not None
    if at > cert.reviews or images > cert.images or disagreements > min(images, cert.disagreements):
        raise CertificateError(f"{where}: decided_* lie beyond what the certificate holds")
    if verdict == VERIFIED and not lower_then > 0.0:
        raise CertificateError(f"{where}: 'verified', but its reviews do not verify it (edited?)")
    if verdict == VERIFIED and cert._reverts(cert.share):
        raise CertificateError(f"{where}: 'verified', but its reviews revert it (edited?)")
    if verdict == REVERTED:
        replay = Certificate(cert.group, cert.rule)
        for z in cert.outcomes[:at]:
            replay._observe(z)
        if not replay._reverts(disagreement_share(images, disagreements, at)):
            raise CertificateError(f"{where}: 'reverted', but its reviews did not revert it (edited?)")
