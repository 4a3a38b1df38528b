"""A site's certificates as one typed record: what ``OUT.certificates.json``, the app and the reports show.

:func:`site_certificates` reads a site's review (:class:`engine.run.review.SiteReview`) once into
:class:`SiteCertificates`: the rule that decides each part now, how many images are shown
provisionally, and one :class:`Certificate` per comparison that had something to test (its
candidate, scope, reviews, bounds, verdict, blocks, whether its rule is in use, and its sentence
for people with the statistics apart in ``details``). ``f2tta run`` writes its JSON
(:meth:`SiteCertificates.to_json`); the app's Certificates tab, banners and reports read the same
objects, so nothing is built as a dictionary and parsed back.

The JSON keeps the field names it always had (``site``, ``images``, ``rule_in_use``,
``provisional_images``, ``error_control``, ``comparisons`` with ``candidate``, ``verdict``,
``says``, ...). ``rule_in_use`` is a rule's identifier (``source``, ``fit``, ...) or, for a folder
the method split in parts whose rules differ, ``by part``; ``parts`` gives each part's, and
``decides`` says it in words (``docs/review-certificates.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.io.sources import source_hash
from engine.review.ladder import Comparison
from engine.run.review import SiteReview
from engine.run.review_parts import PartRule, decides_words
from engine.vocabulary import BlockEnd, Rule, Verdict

#: The error rule, stated where the certificates are (one folder, or one part of it, at 5 %).
CONTROL = (
    "per folder: the certificates of one folder (of one part, where the method split it) are wrong "
    "together with probability at most 5 %; a project of many folders can hold a wrong one"
)
BY_PART = "by part"  # rule_in_use of a split folder whose parts are decided by different rules


@dataclass(frozen=True)
class BlockLine:
    """One block of a comparison: the images it was frozen on, its disagreements, reviews and state."""

    start: int
    end: int
    disagreements: int
    reviews: int
    state: Verdict | BlockEnd

    def to_json(self) -> dict[str, Any]:
        return {
            "images": [self.start, self.end],
            "disagreements": self.disagreements,
            "reviews": self.reviews,
            "state": str(self.state),
        }


@dataclass(frozen=True)
class Certificate:
    """One comparison of a site's ladder, as people and files are given it.

    Attributes:
        number: its index in the site's ladder (1-based, never reused).
        candidate: the rule tested.
        against: the rule it was tested against (the rule in use when it started).
        threshold: the candidate's frozen threshold on the source margin (nan: not a threshold rule).
        population: the images its first block was frozen on (the first ``population``).
        covers: the images its verdict speaks for (a promoted rule's coverage, else ``population``).
        disagreements: the images of its first block the two rules decide differently.
        reviews: reviews used, every block together.
        earlier: answers given to earlier comparisons that it counts exactly (a threshold fitted to
            them: ``docs/review-certificates.md``, "Answers that fit"); not in ``reviews``.
        level: the confidence level it is tested at.
        lower, upper: bounds on the mean gain per changed decision (nan: nothing measured).
        e_value: the evidence that the candidate is better on its first block.
        verdict: where it stands.
        blocks: its first block, then its later ones.
        extending: False once a later block stopped (it decides nothing beyond its coverage).
        part: the part of a split folder it is about ("part 2 of 3 (114 images)"; empty: one part).
        in_use: its rule is the one its part's reviews put in use now (promoted, and not replaced).
        says: one sentence for people (clinical names, no statistics).
        details: the statistics behind it (level, bounds, evidence, threshold).
    """

    number: int
    candidate: Rule
    against: Rule
    threshold: float
    population: int
    covers: int
    disagreements: int
    reviews: int
    level: float
    lower: float
    upper: float
    e_value: float
    verdict: Verdict
    blocks: tuple[BlockLine, ...]
    extending: bool
    part: str
    in_use: bool
    says: str
    details: str
    earlier: int = 0

    @property
    def bounds(self) -> str:
        """The bounds for a details column ("not measured" before any review)."""
        if not self.reviews or not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            return "not measured"
        return f"{self.lower:+.2f} … {self.upper:+.2f}"

    @property
    def verdict_words(self) -> str:
        """The verdict for people; a promoted rule a later promotion replaced says so."""
        if self.verdict == Verdict.PROMOTED and not self.in_use:
            return "better, replaced"
        return self.verdict.words

    def to_json(self) -> dict[str, Any]:
        return {
            **(
                {"part": self.part} if self.part else {}
            ),  # a site split in parts: each comparison is about one
            "number": self.number,
            "candidate": str(self.candidate),
            "tested_against": str(self.against),
            "threshold": _number(self.threshold),
            "population": self.population,
            "covers_images": self.covers,
            "disagreements": self.disagreements,
            "reviews": self.reviews,
            **({"earlier_answers": self.earlier} if self.earlier else {}),
            "level": self.level,
            "lower": _number(self.lower),
            "upper": _number(self.upper),
            "e_value": _number(self.e_value),
            "verdict": str(self.verdict),
            "in_use": self.in_use,
            "blocks": [b.to_json() for b in self.blocks],
            "covers_later_images": self.extending,
            "says": self.says,
            "details": self.details,
        }


@dataclass(frozen=True)
class SiteCertificates:
    """A site's certificates and the rules they leave in use (module docstring)."""

    site: str
    images: int
    parts: tuple[PartRule, ...]
    provisional: int
    certificates: tuple[Certificate, ...]

    @property
    def rule_in_use(self) -> Rule | None:
        """The one rule that decides every part now (None: a split folder's parts differ)."""
        rules = {p.rule for p in self.parts}
        return self.parts[0].rule if len(rules) == 1 else None

    @property
    def decides(self) -> str:
        """Who decides the site now, in words ("the best-fit threshold decides this folder")."""
        return decides_words(self.parts)

    def to_json(self) -> dict[str, Any]:
        rule = self.rule_in_use
        return {
            "site": self.site,
            "images": self.images,
            "rule_in_use": BY_PART if rule is None else str(rule),
            "decides": self.decides,
            "parts": [p.to_json() for p in self.parts] if len(self.parts) > 1 else [],
            "provisional_images": self.provisional,
            "error_control": CONTROL,
            "comparisons": [c.to_json() for c in self.certificates],
        }


def site_certificates(review: SiteReview) -> SiteCertificates:
    """The site's certificates, read from its review once (the comparisons with something to test)."""
    in_use = {id(p.ladder.chain()[-1]) for p in review.parts if p.ladder.chain()}
    certificates = tuple(_certificate(review, c, id(c) in in_use) for c in review.comparisons())
    return SiteCertificates(
        site=source_hash(review.source_id),
        images=len(review.rows),
        parts=review.in_use(),
        provisional=int(review.provisional().sum()),
        certificates=certificates,
    )


def _certificate(review: SiteReview, c: Comparison, in_use: bool) -> Certificate:
    part = next(p for p in review.parts if any(m is c for m in p.ladder.comparisons))
    against = c.below[0]
    if against == Rule.LABEL_FREE and not part.label_free(review.rows):
        against = Rule.SOURCE  # the label-free rule reported nothing of its own here
    return Certificate(
        number=c.index,
        candidate=c.candidate,
        against=against,
        threshold=c.threshold,
        population=c.population,
        covers=c.covered,
        disagreements=c.disagreements,
        reviews=len(c.reviewed),
        level=1.0 - c.alpha,
        lower=c.sequence.lower(c.alpha),
        upper=c.sequence.upper(c.alpha),
        e_value=c.e_value(),
        verdict=c.verdict,
        blocks=tuple(BlockLine(b.start, b.end, len(b.order), len(b.reviewed), b.state) for b in c.blocks),
        extending=c.extending,
        part=review.part_of(c)[0],
        in_use=in_use and c.verdict == Verdict.PROMOTED,
        says=review.describe(c),
        details=c.details(),
        earlier=len(c.blocks[0].known) if c.blocks else 0,
    )


def _number(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None
