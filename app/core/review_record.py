"""What the reviewer did, said one way wherever it is shown (Qt-free): the table, ``reviews.csv``,
the PDF and ``run_config.json`` all take their words and figures from here.

A review mark keeps the decision that was **on screen** when it was made
(:attr:`ReviewMark.prediction`) beside the class the reviewer gave: the reviewer *confirmed* the
decision when the two are the same and *corrected* it otherwise. That stays so whatever decides
the image later: a rule that the reviews put in use may now decide the image as the reviewer said,
which does not turn a correction into a confirmation (the table said "✓ confirmed" for
corrections, and ``reviews.csv`` "corrected" for confirmations, each comparing the mark with
another decision than the one the reviewer saw).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app._engine import PredictionRow, ReviewMark

CONFIRMED, CORRECTED = "confirmed", "corrected"


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
            )
        )
    return out
