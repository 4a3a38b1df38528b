"""The figures a clinician reads where ground truth exists (Qt-free): per-class sensitivity and
specificity, the confusion matrix, confident errors and the review count.

The rows given carry the truth to measure against (:mod:`app.core.figures` makes two sets: the
dataset's labels, and the reviewers' marks over the reviewed images); rows without one are left
out of every figure here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.core.filters import CONFIDENT, PredictionRow

__all__ = ["CONFIDENT", "ClassMetrics", "ClinicalMetrics", "clinical_metrics", "confident_errors"]


@dataclass(frozen=True)
class ClassMetrics:
    """One class against the rest."""

    name: str
    support: int  # labelled images of this class
    predicted: int  # labelled images predicted as this class
    sensitivity: float  # true positives / images of the class (nan without any)
    specificity: float  # true negatives / images of other classes (nan without any)
    precision: float  # true positives / images predicted as the class (nan without any)


@dataclass(frozen=True)
class ClinicalMetrics:
    """Confusion matrices and per-class figures of the adapted and the source model."""

    classes: tuple[str, ...]
    confusion: np.ndarray  # (C, C) counts, rows = truth, columns = adapted prediction
    source_confusion: np.ndarray  # the same for the source model
    per_class: tuple[ClassMetrics, ...]
    source_per_class: tuple[ClassMetrics, ...]
    confident_errors: int  # wrong at confidence >= CONFIDENT
    reviewed: int  # images with a review mark
    review_agreed: int  # of those, marks that agree with the adapted model's current prediction

    @property
    def labelled(self) -> int:
        return int(self.confusion.sum())

    @property
    def accuracy(self) -> float:
        n = self.labelled
        return float(np.trace(self.confusion)) / n if n else math.nan

    @property
    def review_agreement(self) -> float:
        return self.review_agreed / self.reviewed if self.reviewed else math.nan


def confusion_matrix(truth: Sequence[int], pred: Sequence[int], n_classes: int) -> np.ndarray:
    """``(C, C)`` counts, rows = truth, columns = prediction (labels outside 0..C-1 are ignored)."""
    out = np.zeros((n_classes, n_classes), dtype=np.int64)
    for t, p in zip(truth, pred, strict=True):
        if 0 <= t < n_classes and 0 <= p < n_classes:
            out[t, p] += 1
    return out


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def per_class(confusion: np.ndarray, classes: Sequence[str]) -> tuple[ClassMetrics, ...]:
    total = int(confusion.sum())
    out = []
    for k, name in enumerate(classes):
        tp = int(confusion[k, k])
        support = int(confusion[k].sum())
        predicted = int(confusion[:, k].sum())
        negatives = total - support
        tn = negatives - (predicted - tp)
        out.append(
            ClassMetrics(
                name, support, predicted, _ratio(tp, support), _ratio(tn, negatives), _ratio(tp, predicted)
            )
        )
    return tuple(out)


def clinical_metrics(
    rows: Sequence[PredictionRow], classes: Sequence[str], reviewed_keys: set[str] | None = None
) -> ClinicalMetrics:
    """The figures of ``rows`` whose ``ground_truth`` is known (review marks already applied).

    Args:
        rows: rows with the effective ground truth.
        classes: the model's class names.
        reviewed_keys: keys of the rows whose ground truth is a review mark.
    """
    labelled = [r for r in rows if r.ground_truth is not None]
    truth = [int(r.ground_truth) for r in labelled if r.ground_truth is not None]
    n = len(classes)
    adapted = confusion_matrix(truth, [r.prediction for r in labelled], n)
    source = confusion_matrix(truth, [r.source_prediction for r in labelled], n)
    keys = reviewed_keys or set()
    reviewed = [r for r in labelled if r.key in keys]
    return ClinicalMetrics(
        classes=tuple(classes),
        confusion=adapted,
        source_confusion=source,
        per_class=per_class(adapted, classes),
        source_per_class=per_class(source, classes),
        confident_errors=sum(1 for r in labelled if is_confident_error(r)),
        reviewed=len(reviewed),
        review_agreed=sum(1 for r in reviewed if r.correct),
    )


def is_confident_error(row: PredictionRow, threshold: float = CONFIDENT) -> bool:
    """Wrong against the ground truth although the model was at least ``threshold`` sure."""
    return row.correct is False and row.confidence >= threshold


def confident_errors(rows: Sequence[PredictionRow], threshold: float = CONFIDENT) -> list[PredictionRow]:
    """The confident errors, most confident first."""
    return sorted((r for r in rows if is_confident_error(r, threshold)), key=lambda r: -r.confidence)
