"""Does the model apply to these images? Checks the app makes before and while a run goes (Qt-free).

* **Sub-folder names**: a folder's class sub-folders give ground truth only when they are named
  after the model's classes; a ``glaucoma/`` folder opened with a histology model is named in a
  warning instead of being silently treated as unlabelled.
* **One-class collapse**: when nearly every prediction falls in one class (and the ground truth,
  where there is any, does not say so), the model probably does not apply.
* **Image kind**: the engine's judge (``engine/model/kind.py``, re-exported here) tells fundus
  photographs from bright-field histology on previews; when the images look like the other kind
  than the model was trained on, the app offers the matching demo model.
* **Where flagged images run** (:func:`model_wide`): the engine's gate protects a project's
  adaptation state from images the model may not apply to, so they run in a project of their own;
  a warning that fires for every slide of the model protects nothing that way (each slide would
  fork a project, and the one made for it stay empty): they run where they are, with the warning
  recorded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app._engine import (
    KIND_NAMES,
    Kind,
    PredictionRow,
    dominant_kind,
    image_kind,
    model_kind,
    subfolder_warning,
)

COLLAPSE_SHARE = 0.95  # share of predictions in one class that counts as a collapse
COLLAPSE_MIN_IMAGES = 20  # predictions needed before the share means anything


@dataclass(frozen=True)
class Collapse:
    """Nearly every prediction fell in one class."""

    label: str
    count: int
    total: int
    mean_confidence: float

    def text(self) -> str:
        return (
            f"Nearly every prediction is '{self.label}' ({self.count} of {self.total} images, mean "
            f"confidence {self.mean_confidence:.2f}). The model may not apply to these images."
        )


def collapse_due(rows: int, checked: int) -> bool:
    """Time to look for a collapse again: enough rows, and enough new ones since the last look."""
    return rows >= checked + max(10, rows // 20, COLLAPSE_MIN_IMAGES)


def one_class_collapse(rows: Sequence[PredictionRow]) -> Collapse | None:
    """The collapse of ``rows`` onto one predicted class, or None.

    Rows whose ground truth (known for most of them) mostly is that class do not count as a
    collapse: a folder of tumours predicted as tumour is right, not collapsed.
    """
    if len(rows) < COLLAPSE_MIN_IMAGES:
        return None
    counts = Counter(r.prediction for r in rows)
    top, count = counts.most_common(1)[0]
    if count < COLLAPSE_SHARE * len(rows):
        return None
    truths = [r.ground_truth for r in rows if r.ground_truth is not None]
    if len(truths) >= 0.8 * len(rows) and sum(t == top for t in truths) >= 0.8 * len(truths):
        return None
    label = next(r.prediction_label for r in rows if r.prediction == top)
    confidence = float(np.mean([r.confidence for r in rows if r.prediction == top]))
    return Collapse(label, count, len(rows), confidence)


class CollapseWatch:
    """:func:`one_class_collapse` of the rows shown, kept up to date one row at a time.

    Looking at every row again at each check cost a pause of the window that grew with the rows
    shown (issue 30); this keeps the counts the rule reads, so each check is as cheap at 100 000
    rows as at 100.
    """

    def __init__(self) -> None:
        self._rows: dict[int, tuple[int, int | None, float]] = {}  # index: (prediction, truth, confidence)
        self._predicted: Counter[int] = Counter()
        self._confidence: dict[int, float] = {}  # summed, by predicted class
        self._truths: Counter[int] = Counter()
        self._labels: dict[int, str] = {}  # a predicted class's name, as the rows give it

    def set_row(self, index: int, row: PredictionRow) -> None:
        """The row at ``index`` is now ``row`` (what it counted before is taken away)."""
        old = self._rows.pop(index, None)
        if old is not None:
            self._count(*old, -1)
        entry = (row.prediction, row.ground_truth, row.confidence)
        self._rows[index] = entry
        self._labels.setdefault(row.prediction, row.prediction_label)
        self._count(*entry, 1)

    def _count(self, prediction: int, truth: int | None, confidence: float, sign: int) -> None:
        self._predicted[prediction] += sign
        self._confidence[prediction] = self._confidence.get(prediction, 0.0) + sign * confidence
        if truth is not None:
            self._truths[truth] += sign

    def collapse(self) -> Collapse | None:
        """The rows' collapse onto one predicted class, or None (the rule of :func:`one_class_collapse`)."""
        total = len(self._rows)
        if total < COLLAPSE_MIN_IMAGES:
            return None
        top, count = max(self._predicted.items(), key=lambda kv: (kv[1], -kv[0]))
        if count < COLLAPSE_SHARE * total:
            return None
        truths = sum(self._truths.values())
        if truths >= 0.8 * total and self._truths[top] >= 0.8 * truths:
            return None
        return Collapse(self._labels[top], count, total, self._confidence[top] / count)


__all__ = [
    "COLLAPSE_MIN_IMAGES",
    "COLLAPSE_SHARE",
    "KIND_NAMES",
    "Collapse",
    "CollapseWatch",
    "Kind",
    "collapse_due",
    "dominant_kind",
    "image_kind",
    "model_kind",
    "one_class_collapse",
    "subfolder_warning",
]


def model_wide(checks: Sequence[str], card_mpp: float | None) -> bool:
    """Every check that fired would fire for any slide read with this model: the resolution check
    of a model whose card records no training resolution (the shipped demo model's). Running a
    slide in a project of its own then protects nothing: every slide of the model would fork one.

    Args:
        checks: the names of the gate's checks that fired (``resolution``, ``image-kind``, ...).
        card_mpp: the training resolution the model card records (None: none).
    """
    return bool(checks) and card_mpp is None and set(checks) == {"resolution"}
