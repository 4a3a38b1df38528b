"""The paper's evaluation metrics, in percent, from the per-image records of one stream.

After the whole stream (each image predicted by the model as adapted on it, paper "Evaluation
Metric"): accuracy per domain, the mean of the target domains' accuracies, and accuracy,
precision, recall and AUC over all images; the accuracy of each of 8 equal stream segments
("running performance"); seconds per image. Across seeds, every figure is reported as mean ± std.

Conventions:

* Precision, recall and AUC are one-vs-rest for the *positive class* (Camelyon17: tumor).
* AUC is the Mann-Whitney statistic of the adapted model's probability of the positive class,
  ties counted as one half (average ranks), computed in numpy.
* Undefined figures are NaN, never a guess: precision when nothing is predicted positive, recall
  when no image is positive, AUC when the images hold a single class, an accuracy over no images
  (a domain or segment absent from a short ``--limit`` stream). :func:`undefined_notes` says why.
* Target mean: the mean over the non-source domains present in the stream of their accuracies
  (a macro average, not the accuracy over all target images).
* Mean ± std over seeds: the *population* standard deviation (``ddof=0``), defined for a single
  seed (0) like the paper's "± 0.00" rows. Seeds with a NaN figure are left out of that figure's
  mean and std; it is NaN only when every seed's is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SEGMENTS = 8  # stream segments of the running-performance table


def _pct(num: float, den: float) -> float:
    return 100.0 * num / den if den > 0 else math.nan


def accuracy(labels: np.ndarray, preds: np.ndarray) -> float:
    """Percent of ``preds`` equal to ``labels``; NaN for no images."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    return _pct(float(np.count_nonzero(labels == preds)), float(labels.size))


def precision(labels: np.ndarray, preds: np.ndarray, positive: int) -> float:
    """Percent of positive predictions that are positive; NaN when nothing is predicted positive."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    predicted = preds == positive
    return _pct(float(np.count_nonzero(predicted & (labels == positive))), float(np.count_nonzero(predicted)))


def recall(labels: np.ndarray, preds: np.ndarray, positive: int) -> float:
    """Percent of positive images predicted positive; NaN when no image is positive."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    actual = labels == positive
    return _pct(float(np.count_nonzero(actual & (preds == positive))), float(np.count_nonzero(actual)))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, tied values sharing the mean of their ranks."""
    values = np.asarray(values, dtype=np.float64)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct value's first occurrence
    return (first + (counts + 1) / 2.0)[inverse.reshape(-1)]


def _scored(positive: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(positive as bool, scores as float64)``, checked to be of one shape."""
    positive = np.asarray(positive, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if positive.shape != scores.shape:
        raise ValueError(f"positive {positive.shape} and scores {scores.shape} differ in shape")
    return positive, scores


def roc_auc(positive: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve in percent (ties count one half); NaN for a single class.

    Args:
        positive: ``(n,)`` bool, the image belongs to the positive class.
        scores: ``(n,)`` the model's score (probability) of the positive class.
    """
    positive, scores = _scored(positive, scores)
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    rank_sum = float(average_ranks(scores)[positive].sum())
    return 100.0 * (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def oracle_threshold_accuracy(positive: np.ndarray, scores: np.ndarray) -> float:
    """Best accuracy in percent of ``scores > t`` over all thresholds t, chosen *with* the labels.

    An analysis bound, never a method: what moving the decision threshold alone could reach on
    these images. Tied scores always fall on the same side. NaN for no images.

    Args:
        positive: ``(n,)`` bool, the image belongs to the positive class.
        scores: ``(n,)`` the model's score (probability) of the positive class.
    """
    positive, scores = _scored(positive, scores)
    n = positive.size
    if n == 0:
        return math.nan
    order = np.argsort(-scores, kind="stable")
    ranked, ranked_pos = scores[order], positive[order]
    # Calling the top k positive: true positives among them + negatives below them.
    tp = np.concatenate([[0], np.cumsum(ranked_pos)])
    k = np.arange(n + 1)
    correct = tp + (n - int(ranked_pos.sum())) - (k - tp)
    cut_ok = np.ones(n + 1, dtype=bool)
    cut_ok[1:n] = ranked[:-1] != ranked[1:]
    return 100.0 * float(correct[cut_ok].max()) / n


def segment_accuracy(correct: np.ndarray, segments: int = SEGMENTS) -> list[float]:
    """Accuracy of each of ``segments`` consecutive, equal (±1 image) parts of the stream."""
    parts = np.array_split(np.asarray(correct, dtype=bool), segments)
    return [_pct(float(np.count_nonzero(p)), float(p.size)) for p in parts]


def running_accuracy(correct: np.ndarray) -> np.ndarray:
    """``(n,)`` accuracy in percent over the first 1, 2, ..., n images."""
    c = np.asarray(correct, dtype=np.float64)
    return 100.0 * np.cumsum(c) / np.arange(1, c.size + 1)


def run_metrics(
    labels: np.ndarray,
    preds: np.ndarray,
    pos_scores: np.ndarray,
    domain_of: Sequence[str] | np.ndarray,
    domains: Sequence[str],
    source_domain: str,
    positive: int,
    seconds: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every figure of one stream (one method, one seed).

    Args:
        labels: ``(n,)`` true labels in stream order.
        preds: ``(n,)`` the adapted model's predictions.
        pos_scores: ``(n,)`` its probability of the positive class.
        domain_of: ``(n,)`` each image's domain name.
        domains: every domain of the dataset (keys of ``per_domain_acc``, in this order).
        source_domain: the model's training domain (left out of the target mean).
        positive: the positive class index.
        seconds: ``(n,)`` wall time per image, if measured.

    Returns:
        ``per_domain_acc`` {domain: float}, ``target_acc``, ``all_acc``, ``precision``,
        ``recall``, ``auc``, ``segment_acc`` [8 floats], ``seconds_per_image`` (percent except time).
    """
    labels, preds = np.asarray(labels), np.asarray(preds)
    dom = np.asarray(domain_of, dtype=object)
    per_domain = {d: accuracy(labels[dom == d], preds[dom == d]) for d in domains}
    targets = [v for d, v in per_domain.items() if d != source_domain and not math.isnan(v)]
    secs = np.asarray(seconds, dtype=np.float64) if seconds is not None else np.zeros(0)
    return {
        "per_domain_acc": per_domain,
        "target_acc": float(np.mean(targets)) if targets else math.nan,
        "all_acc": accuracy(labels, preds),
        "precision": precision(labels, preds, positive),
        "recall": recall(labels, preds, positive),
        "auc": roc_auc(labels == positive, pos_scores),
        "segment_acc": segment_accuracy(labels == preds),
        "seconds_per_image": float(secs.mean()) if secs.size else math.nan,
    }


def undefined_notes(labels: np.ndarray, preds: np.ndarray, positive: int) -> list[str]:
    """Why precision, recall or AUC of a stream is NaN (empty when all are defined)."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    notes: list[str] = []
    if not np.any(preds == positive):
        notes.append("precision undefined: no image was predicted positive")
    n_pos = int(np.count_nonzero(labels == positive))
    if n_pos == 0:
        notes.append("recall undefined: the stream holds no positive image")
    if n_pos in (0, labels.size):
        notes.append("AUC undefined: the stream holds a single class")
    return notes


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "std"}`` of the finite values (population std); NaN for none."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if arr.size == 0:
        return {"mean": math.nan, "std": math.nan}
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=0))}


def aggregate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean ± std over seeds of :func:`run_metrics` results (same keys, leaves ``{"mean","std"}``)."""
    if not runs:
        raise ValueError("nothing to aggregate")
    domains = list(runs[0]["per_domain_acc"])
    n_seg = len(runs[0]["segment_acc"])
    return {
        "per_domain_acc": {d: mean_std([r["per_domain_acc"][d] for r in runs]) for d in domains},
        "target_acc": mean_std([r["target_acc"] for r in runs]),
        "all_acc": mean_std([r["all_acc"] for r in runs]),
        "precision": mean_std([r["precision"] for r in runs]),
        "recall": mean_std([r["recall"] for r in runs]),
        "auc": mean_std([r["auc"] for r in runs]),
        "segment_acc": [mean_std([r["segment_acc"][i] for r in runs]) for i in range(n_seg)],
        "seconds_per_image": mean_std([r["seconds_per_image"] for r in runs]),
    }


def format_mean_std(entry: Mapping[str, float], digits: int = 2) -> str:
    """``"98.00 ± 0.21"``; ``"n/a"`` for NaN."""
    m, s = entry["mean"], entry["std"]
    if m is None or not math.isfinite(m):
        return "n/a"
    return f"{m:.{digits}f} ± {s:.{digits}f}"
