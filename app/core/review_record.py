"""What the reviewer did, said one way wherever it is shown (Qt-free): the table, ``reviews.csv``,
the PDF and ``run_config.json`` all take their words and figures from here.

A review mark keeps the decision that was **on screen** when it was made
(:attr:`ReviewMark.prediction`) beside the class the reviewer gave: the reviewer *confirmed* the
decision when the two are the same and *corrected* it otherwise. That stays so whatever decides
the image later: a rule that the reviews put in use may now decide the image as the reviewer said,
which does not turn a correction into a confirmation (the table said "✓ confirmed" for
corrections, and ``reviews.csv`` "corrected" for confirmations, each comparing the mark with
another decision than the one the reviewer saw).

Agreement is measured one way too (:func:`review_tally`): the marks against the decisions
reported **now** (after the reviews moved any rule), with the count of confirmations and
corrections beside it, so nobody reads one as the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app._engine import PredictionRow, ReviewMark

CONFIRMED, CORRECTED = "confirmed", "corrected"
#: What the agreement is measured against, in the reports' words.
AGREEMENT_AGAINST = "the decisions reported now (after the reviews)"


def class_name(label: int, classes: Sequence[str]) -> str:
    return classes[label] if 0 <= label < len(classes) else str(label)


def verdict(mark: ReviewMark) -> str:
    """:data:`CONFIRMED` or :data:`CORRECTED`: what the reviewer did to the decision on screen."""
    return CONFIRMED if mark.confirmed else CORRECTED


def mark_text(mark: ReviewMark, classes: Sequence[str]) -> str:
    """The mark in a few characters: ``✓ confirmed normal`` or ``✎ normal → tumor`` (on screen →
    the reviewer's class)."""
    if mark.confirmed:
        return f"✓ confirmed {class_name(mark.label, classes)}"
    return f"✎ {class_name(mark.prediction, classes)} → {class_name(mark.label, classes)}"


def who_and_when(mark: ReviewMark) -> str:
    """``by Dr Ada, 2026-05-01 14:03+02:00`` (``at …`` for a mark made before reviewers were recorded)."""
    try:
        when = mark.when.isoformat(sep=" ", timespec="minutes")
    except ValueError:
        when = mark.at
    return f"by {mark.reviewer}, {when}" if mark.reviewer else f"at {when} (reviewer not recorded)"


def mark_detail(mark: ReviewMark, classes: Sequence[str], now: int | None = None) -> str:
    """The mark in a sentence: what was on screen, what the reviewer did, who and when; and, where
    the decision reported now differs from the one on screen, that one too.

    Args:
        mark: the mark.
        classes: the model's class names.
        now: the decision reported now (None: not known).
    """
    shown = class_name(mark.prediction, classes)
    if mark.confirmed:
        text = f"Confirmed {who_and_when(mark)}: the screen showed {shown}"
    else:
        text = (
            f"Corrected {who_and_when(mark)}: the screen showed {shown}, "
            f"the reviewer said {class_name(mark.label, classes)}"
        )
    if now is not None and now != mark.prediction:
        text += f"; decided now: {class_name(now, classes)}"
    return text


@dataclass(frozen=True)
class ReviewTally:
    """The reviewer's work in counts.

    Attributes:
        reviewed: images with a mark.
        confirmed: marks that confirmed the decision on screen (the rest corrected it).
        agree_now: marks the decisions reported now agree with.
    """

    reviewed: int = 0
    confirmed: int = 0
    agree_now: int = 0

    @property
    def corrected(self) -> int:
        return self.reviewed - self.confirmed

    @property
    def agreement(self) -> float:
        """The share of the marks the decisions reported now agree with (nan: no mark)."""
        return self.agree_now / self.reviewed if self.reviewed else math.nan

    def sentence(self) -> str:
        """``6 images reviewed: 0 confirmed and 6 corrected the decision on screen; the decisions
        reported now agree with 6 of the 6 marks (100.0 %)``."""
        if not self.reviewed:
            return "no image reviewed"
        images = "image" if self.reviewed == 1 else "images"
        return (
            f"{self.reviewed} {images} reviewed: {self.confirmed} confirmed and {self.corrected} corrected "
            f"the decision on screen; the decisions reported now agree with {self.agree_now} of the "
            f"{self.reviewed} marks ({100 * self.agreement:.1f} %)"
        )

    def document(self) -> dict[str, object]:
        """The tally as ``run_config.json`` keeps it."""
        agreement = self.agreement
        return {
            "reviewed": self.reviewed,
            "confirmed": self.confirmed,
            "corrected": self.corrected,
            "agree_with_decisions_now": self.agree_now,
            "agreement": None if not math.isfinite(agreement) else round(agreement, 6),
            "agreement_measured_against": AGREEMENT_AGAINST,
        }


def review_tally(marks: Iterable[ReviewMark], decision_now: Callable[[str], int | None]) -> ReviewTally:
    """The tally of ``marks`` (the one way agreement is computed: the Metrics tab, the PDF and
    ``run_config.json`` all show this).

    Args:
        marks: the marks of the open folder or slide.
        decision_now: the decision reported now of an image, by its key (None: not among the rows,
            which leaves the mark out).
    """
    reviewed = confirmed = agree = 0
    for mark in marks:
        now = decision_now(mark.key)
        if now is None:
            continue
        reviewed += 1
        confirmed += mark.confirmed
        agree += mark.label == now
    return ReviewTally(reviewed, confirmed, agree)


@dataclass(frozen=True)
class MarkRecord:
    """One mark as ``reviews.csv``, ``run_config.json`` and the PDF state it (class names, not indices).

    Attributes:
        index, position: the image's CSV index and its place in the arrival order (from 0).
        item: its name.
        shown: the decision on screen when the mark was made.
        review: the class the reviewer gave.
        verdict: :data:`CONFIRMED` or :data:`CORRECTED` (what the reviewer did to ``shown``).
        now: the decision reported now; confidence: its confidence.
        dataset: the dataset's label of the image (None: the dataset labels nothing there).
        reviewer, at: who made the mark, and when (ISO time with its UTC offset).
        content: the fingerprint of the picture decided (``engine.io.content``; "" for a tile).
    """

    index: int
    position: int
    item: str
    shown: str
    review: str
    verdict: str
    now: str
    confidence: float
    dataset: str | None
    reviewer: str
    at: str
    content: str = ""


def mark_records(
    marks: Iterable[tuple[PredictionRow, ReviewMark]],
    rows_now: Iterable[PredictionRow],
    classes: Sequence[str],
) -> list[MarkRecord]:
    """Every mark, in the order given (the order they were made), as :class:`MarkRecord`.

    Args:
        marks: each mark with its image's row as it arrived (the dataset's label as its truth).
        rows_now: the rows as reported now (the decision of the rule in use); a mark whose image
            is not among them keeps the decision as it arrived.
        classes: the model's class names.
    """
    now = {r.key: r for r in rows_now}
    out = []
    for row, mark in marks:
        current = now.get(row.key, row)
        out.append(
            MarkRecord(
                index=row.index,
                position=row.position,
                item=row.name,
                shown=class_name(mark.prediction, classes),
                review=class_name(mark.label, classes),
                verdict=verdict(mark),
                now=current.prediction_label,
                confidence=current.confidence,
                dataset=(row.truth_label or str(row.ground_truth)) if row.ground_truth is not None else None,
                reviewer=mark.reviewer,
                at=mark.at,
                content=row.content,
            )
        )
    return out
