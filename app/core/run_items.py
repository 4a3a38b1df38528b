"""What the run model hands its views (Qt-free): a signal without Qt, the selection, slide cells,
changed rows, and the texts the image view and the table show for a row."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from app._engine import PredictionRow, ReviewMark
from app.core.overlay import Overlay
from app.core.review_record import class_name, mark_detail, mark_text

T = TypeVar("T")


class Notifier(Generic[T]):
    """A Qt-free signal: ``connect`` callbacks, ``emit`` calls them in order."""

    def __init__(self) -> None:
        self._slots: list[Callable[[T], object]] = []

    def connect(self, slot: Callable[[T], object]) -> None:
        self._slots.append(slot)

    def emit(self, value: T) -> None:
        for slot in list(self._slots):
            slot(value)


@dataclass(frozen=True)
class Selection:
    """What the image view shows: a stream position, its preview (None: being loaded) and overlay."""

    position: int
    name: str
    row: PredictionRow | None
    preview: np.ndarray | None
    overlay: Overlay | None
    levels: tuple[float, float] | None
    keep_view: bool = False
    review: str = ""  # the review mark, as the table shows it


@dataclass(frozen=True)
class Cell:
    """One slide tile's value on the heat-map grid."""

    row: int
    col: int
    value: float  # the adapted model's probability of the positive class


@dataclass(frozen=True)
class ReviewNote:
    """A row's review mark as the table shows it (empty: no mark)."""

    text: str = ""  # the Review column: ``✎ normal → tumor`` (:func:`review_text`)
    detail: str = ""  # its tooltip: the mark in a sentence, who made it and when


@dataclass(frozen=True)
class RowChange:
    """A row whose ground truth changed (a review mark was set or cleared)."""

    index: int  # where it is in :attr:`RunModel.rows` (arrival order)
    row: PredictionRow  # the row with its effective ground truth
    review: ReviewNote  # what the table's review column shows


def review_text(mark: ReviewMark | None, classes: Sequence[str], dataset: str | None = None) -> str:
    """What the reviewer did to the decision on screen when the mark was made
    (:func:`app.core.review_record.mark_text`: ``✓ confirmed normal``, ``✎ normal → tumor``),
    empty without a mark; with the dataset's label beside it where the mark disagrees with it
    (``✎ tumor → normal · dataset: tumor``), so neither truth hides the other. Whatever decides
    the image now, a correction stays a correction.

    Args:
        mark: the row's mark.
        classes: the model's class names.
        dataset: the dataset's label of the row (folder or labels file), None without one.
    """
    if mark is None:
        return ""
    text = mark_text(mark, classes)
    if dataset is not None and dataset != class_name(mark.label, classes):
        text += f" · dataset: {dataset}"
    return text


def review_note(
    mark: ReviewMark | None, classes: Sequence[str], now: int | None = None, dataset: str | None = None
) -> ReviewNote:
    """:func:`review_text` with its tooltip (:func:`app.core.review_record.mark_detail`; ``now``:
    the decision the row shows now)."""
    if mark is None:
        return ReviewNote()
    detail = mark_detail(mark, classes, now)
    if dataset is not None and dataset != class_name(mark.label, classes):
        detail += f"; the dataset says {dataset}"
    return ReviewNote(review_text(mark, classes, dataset), detail)


NAME_CHARS = 60  # a name longer than this is cut in its middle in the image's title


def short_name(name: str, most: int = NAME_CHARS) -> str:
    """``name``, cut in the middle with "…" past ``most`` characters (a 205-character file name
    pushed the prediction out of the image's two-line title)."""
    if len(name) <= most:
        return name
    keep = most - 1
    return f"{name[: keep - keep // 2]}…{name[-(keep // 2) :]}"


#: The caption's word on an image whose uncertainty map has not come (maps behind the decisions).
MAP_TITLES = {
    "pending": " · uncertainty map: not made yet (the maps follow the decisions)",
    "unreadable": " · no uncertainty map (the image could not be read again for it)",
}


def image_title(row: PredictionRow | None, has_overlay: bool = True, review: str = "") -> str:
    """The image view's caption for a row (plain text: it holds the file and class names as they
    are, never markup); ``#`` counts from 1 within the source."""
    if row is None:
        return ""
    text = f"#{row.position + 1} {short_name(row.name)} — {row.prediction_label} ({row.confidence:.2f})"
    text += f", source: {row.source_label} ({row.source_confidence:.2f})"
    if row.truth_label:
        text += f", truth: {row.truth_label}"
    if review:
        text += f" · review: {review}"
    if math.isfinite(row.uncertainty):
        text += f", mean uncertainty {row.uncertainty:.4f}"
    elif row.map_status in MAP_TITLES:
        text += MAP_TITLES[row.map_status]
    if row.restored and not has_overlay and not row.map_status:
        text += " (earlier session: no overlay kept)"
    return text
