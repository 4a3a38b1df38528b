"""The figures a clinician reads where ground truth exists (Qt-free): per-class sensitivity and
specificity, the confusion matrix, confident errors and the review count.

The rows given carry the truth to measure against (:mod:`app.core.figures` makes two sets: the
dataset's labels, and the reviewers' marks over the reviewed images); rows without one are left
out of every figure here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.core.filters import CONFIDENT, PredictionRow

__all__ = [
    "ALL_CLASSES_UP_TO",
    "CONFIDENT",
    "MATRIX_UP_TO",
    "ClassMetrics",
    "ClinicalMetrics",
    "clinical_metrics",
    "confident_errors",
    "metrics_from_pairs",
    "top_confusions",
]


@dataclass(frozen=True)
class ClassMetrics:
    """One class against the rest."""

    name: str
    support: int  # labelled images of this class
    predicted: int  # labelled images predicted as this class
    sensitivity: float  # true positives / images of the class (nan without any)
    specificity: float  # true negatives / images of other classes (nan without any)
    precision: float  # true positives / images predicted as the class (nan without any)


#: Up to this many classes every class of the model is in the figures; beyond, only the classes
#: present (a truth or a decision of either model): a card of 10 000 classes made two dense
#: 10 000 x 10 000 matrices a figure set, and an export of 12 images took minutes and gigabytes.
ALL_CLASSES_UP_TO = 20


def present(pairs: Mapping[tuple[int, int], int], n_classes: int) -> tuple[int, ...]:
    """The class indices the figures show: every class up to :data:`ALL_CLASSES_UP_TO`, else those
    any counted pair names."""
    if n_classes <= ALL_CLASSES_UP_TO:
        return tuple(range(n_classes))
    return tuple(sorted({k for pair, count in pairs.items() if count for k in pair if 0 <= k < n_classes}))


def matrix(pairs: Mapping[tuple[int, int], int], shown: Sequence[int]) -> np.ndarray:
    """The ``(K, K)`` counts of ``pairs`` (truth, decision) over the ``shown`` class indices."""
    where = {k: i for i, k in enumerate(shown)}
    out = np.zeros((len(shown), len(shown)), dtype=np.int64)
    for (t, d), count in pairs.items():
        if t in where and d in where:
            out[where[t], where[d]] += count
    return out


@dataclass(frozen=True)
class ClinicalMetrics:
    """Confusion matrices and per-class figures of the adapted and the source model, over the
    classes shown (every class of a model with few, the classes present otherwise: ``classes``)."""

    classes: tuple[str, ...]
    confusion: np.ndarray  # (K, K) counts over ``classes``, rows = truth, columns = adapted prediction
    source_confusion: np.ndarray  # the same for the source model
    per_class: tuple[ClassMetrics, ...]
    source_per_class: tuple[ClassMetrics, ...]
    confident_errors: int  # wrong at confidence >= CONFIDENT

    @property
    def labelled(self) -> int:
        return int(self.confusion.sum())

    @property
    def accuracy(self) -> float:
        n = self.labelled
        return float(np.trace(self.confusion)) / n if n else math.nan


def pair_counts(truth: Sequence[int], pred: Sequence[int], n_classes: int) -> Counter[tuple[int, int]]:
    """How often each (truth, prediction) pair occurs (labels outside 0..C-1 are left out)."""
    return Counter(
        (t, p) for t, p in zip(truth, pred, strict=True) if 0 <= t < n_classes and 0 <= p < n_classes
    )


def metrics_from_pairs(
    classes: Sequence[str],
    adapted: Mapping[tuple[int, int], int],
    source: Mapping[tuple[int, int], int],
    confident_errors: int,
) -> ClinicalMetrics:
    """The figures from their counts (what :func:`clinical_metrics` and the row-by-row tally share)."""
    shown = present(Counter(adapted) + Counter(source), len(classes))
    names = tuple(classes[k] for k in shown)
    confusion, source_confusion = matrix(adapted, shown), matrix(source, shown)
    return ClinicalMetrics(
        classes=names,
        confusion=confusion,
        source_confusion=source_confusion,
        per_class=per_class(confusion, names),
        source_per_class=per_class(source_confusion, names),
        confident_errors=confident_errors,
    )


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


def clinical_metrics(rows: Sequence[PredictionRow], classes: Sequence[str]) -> ClinicalMetrics:
    """The figures of ``rows`` whose ``ground_truth`` is known (review marks already applied).

    The reviewer's work (confirmations, corrections, agreement) is counted apart, one way
    everywhere: :func:`app.core.review_record.review_tally`.

    Args:
        rows: rows with the effective ground truth.
        classes: the model's class names.
    """
    labelled = [r for r in rows if r.ground_truth is not None]
    truth = [int(r.ground_truth) for r in labelled if r.ground_truth is not None]
    n = len(classes)
    return metrics_from_pairs(
        classes,
        pair_counts(truth, [r.prediction for r in labelled], n),
        pair_counts(truth, [r.source_prediction for r in labelled], n),
        sum(1 for r in labelled if is_confident_error(r)),
    )


def is_confident_error(row: PredictionRow, threshold: float = CONFIDENT) -> bool:
    """Wrong against the ground truth although the model was at least ``threshold`` sure."""
    return row.correct is False and row.confidence >= threshold


def confident_errors(rows: Sequence[PredictionRow], threshold: float = CONFIDENT) -> list[PredictionRow]:
    """The confident errors, most confident first."""
    return sorted((r for r in rows if is_confident_error(r, threshold)), key=lambda r: -r.confidence)


#: A confusion matrix is drawn for at most this many classes; beyond, the most frequent confusions
#: are listed (a 400 x 400 matrix is neither readable nor cheap to lay out).
MATRIX_UP_TO = 12


def top_confusions(
    confusion: np.ndarray, classes: Sequence[str], count: int = 20
) -> list[tuple[str, str, int]]:
    """The ``count`` most frequent (truth, decision) pairs where the two differ, most frequent first."""
    off = confusion.copy()
    np.fill_diagonal(off, 0)
    flat = np.argsort(off, axis=None, kind="stable")[::-1][:count]
    rows, cols = np.unravel_index(flat, off.shape)
    return [
        (classes[t], classes[p], int(off[t, p])) for t, p in zip(rows, cols, strict=True) if off[t, p] > 0
    ]
