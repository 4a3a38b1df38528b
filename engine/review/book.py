"""The certificates of every site group of one site or profile, and the decisions they allow.

:class:`CertificateBook` is what a run, the app and the benchmark keep: it counts each processed
image per group (so each group's share of disagreements ``d`` is known without labels), takes
the reviews of disagreements, and turns a reverted group's decisions back to the source model's
(:meth:`CertificateBook.decide`). It saves as plain JSON (never pickle) and refuses a file that
is not exactly what it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from engine.review import _checks
from engine.review._checks import CertificateError
from engine.review.certificate import Certificate
from engine.review.rule import DEFAULT_RULE, REVERTED, UNDECIDED, ReviewRule

FORMAT = "f2tta-review-certificates"
VERSION = 1
MAX_JSON_BYTES = 16 << 20  # a book with 100 000 reviews in all is about 1 MB
MAX_BOOK_REVIEWS = 200_000  # reviews a saved book may hold in all (each is replayed when loaded)


class CertificateBook:
    """All site groups' certificates of one site (or profile).

    Args:
        rule: when a group is verified or reverted (the same for every group).
    """

    def __init__(self, rule: ReviewRule = DEFAULT_RULE) -> None:
        self.rule = rule
        self.certificates: dict[int | None, Certificate] = {}  # in order of first appearance

    @classmethod
    def from_marks(
        cls,
        images: Iterable[tuple[int | None, bool]],
        reviews: Iterable[tuple[int | None, int, int, int]],
        rule: ReviewRule = DEFAULT_RULE,
    ) -> CertificateBook:
        """A book from a finished run's rows and its review marks (``f2tta run --reviews``, undo).

        Every image is noted first, so each group is judged with its final ``d``; the marks are
        then added in their order. Undoing a mark is building the book again without it (a
        revert that rested on the undone mark goes with it: the mark was a mistake).

        Args:
            images: ``(group, disagreement)`` of every processed image.
            reviews: ``(group, prediction, source_prediction, label)`` of every review mark, in
                the order they were made; marks on images that are no disagreement are ignored.
        """
        book = cls(rule)
        for group, disagreement in images:
            book.note_image(group, disagreement)
        for group, prediction, source_prediction, label in reviews:
            book.add_reviewed_image(group, prediction, source_prediction, label)
        return book

    def certificate(self, group: int | None) -> Certificate:
        """The group's certificate (a new, undecided one for a group not seen yet)."""
        _check_group(group)
        cert = self.certificates.get(group)
        if cert is None:
            cert = self.certificates[group] = Certificate(group, self.rule)
        return cert

    def note_image(self, group: int | None, disagreement: bool) -> str:
        """Count one processed image of ``group``; returns the group's verdict."""
        return self.certificate(group).note_image(disagreement)

    def add_review(self, group: int | None, adapted_correct: bool, source_correct: bool) -> str:
        """Add the review of one *disagreement* of ``group``; returns the group's verdict."""
        return self.certificate(group).add_review(adapted_correct, source_correct)

    def add_reviewed_image(
        self, group: int | None, prediction: int, source_prediction: int, label: int
    ) -> str | None:
        """Add a reviewer's class for an image; None (and nothing added) when it is no disagreement.

        What the app's confirm/correct gives: ``label`` is the class the reviewer says is right.
        """
        if prediction == source_prediction:
            return None
        return self.add_review(group, prediction == label, source_prediction == label)

    def verdict(self, group: int | None) -> str:
        cert = self.certificates.get(group)
        return UNDECIDED if cert is None else cert.verdict

    def decide(self, prediction: int, source_prediction: int, group: int | None) -> int:
        """The decision to report: the source model's for a reverted group, else ``prediction``."""
        return source_prediction if self.verdict(group) == REVERTED else prediction

    def reviews_per_group(self) -> dict[int | None, int]:
        return {g: c.reviews for g, c in self.certificates.items()}

    def decided_groups(self) -> set[int | None]:
        """Groups verified or reverted (a review queue puts their items last)."""
        return {g for g, c in self.certificates.items() if c.verdict != UNDECIDED}

    def summaries(self) -> list[dict[str, Any]]:
        """One :meth:`Certificate.summary` per group, in order of first appearance."""
        return [c.summary() for c in self.certificates.values()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "rule": self.rule.to_dict(),
            "groups": [c.to_dict() for c in self.certificates.values()],
        }

    @classmethod
    def from_dict(cls, data: object) -> CertificateBook:
        """Inverse of :meth:`to_dict`.

        Raises:
            CertificateError: anything that :meth:`to_dict` would not have written (see
                :meth:`Certificate.from_dict`); the message says where.
        """
        d = _checks.fields(data, ("format", "version", "rule", "groups"), "certificates")
        if d["format"] != FORMAT:
            raise CertificateError(f"certificates: not a certificates file (format {d['format']!r})")
        _checks.integer(d["version"], "certificates.version", VERSION, VERSION)
        book = cls(ReviewRule.from_dict(d["rule"], "certificates.rule"))
        entries = _checks.listing(d["groups"], "certificates.groups")
        total = sum(
            len(e["outcomes"]) for e in entries if isinstance(e, dict) and isinstance(e.get("outcomes"), list)
        )
        if total > MAX_BOOK_REVIEWS:
            raise CertificateError(f"certificates: more than {MAX_BOOK_REVIEWS} reviews in all")
        for i, entry in enumerate(entries):
            cert = Certificate.from_dict(entry, book.rule, f"certificates.groups[{i}]")
            if cert.group in book.certificates:
                raise CertificateError(f"certificates.groups[{i}]: group {cert.group} appears twice")
            book.certificates[cert.group] = cert
        return book

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> CertificateBook:
        """A book from the text of :meth:`to_json`.

        Raises:
            CertificateError: not JSON (NaN and Infinity included), too large or too deep, or not
                a book.
        """
        if len(text) > MAX_JSON_BYTES:
            raise CertificateError(f"certificates: larger than {MAX_JSON_BYTES} bytes")
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError too
            raise CertificateError(f"certificates: not valid JSON ({exc})") from exc
        return cls.from_dict(data)


def _refuse_constant(name: str) -> Any:
    raise CertificateError(f"certificates: {name} is not a number JSON allows")


def _check_group(group: object) -> None:
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
        raise ValueError(f"a site group is a whole number >= 0 or None, not {group!r}")
