"""Metrics against hand-computed examples, edge cases and mean ± std aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab.bench.metrics import (
    accuracy,
    aggregate,
    average_ranks,
    format_mean_std,
    mean_std,
    oracle_threshold_accuracy,
    precision,
    recall,
    roc_auc,
    run_metrics,
    running_accuracy,
    segment_accuracy,
    undefined_notes,
)

LABELS = np.array([1, 1, 1, 0, 0, 0, 1, 0])
PREDS = np.array([1, 0, 1, 1, 0, 0, 1, 0])


def test_accuracy_precision_recall_by_hand() -> None:
    assert accuracy(LABELS, PREDS) == pytest.approx(100 * 6 / 8)
    # predicted positive: idx 0, 2, 3, 6 -> 3 of 4 true; positives: 0, 1, 2, 6 -> 3 of 4 found
    assert precision(LABELS, PREDS, 1) == pytest.approx(75.0)
    assert recall(LABELS, PREDS, 1) == pytest.approx(75.0)
    # class 0 as positive: predicted 0 at 1, 4, 5, 7 -> 3 true; actual 0 at 3, 4, 5, 7 -> 3 found
    assert precision(LABELS, PREDS, 0) == pytest.approx(75.0)
    assert math.isnan(accuracy(np.array([]), np.array([])))


def test_precision_recall_undefined_are_nan() -> None:
    assert math.isnan(precision(np.array([1, 0]), np.array([0, 0]), 1))  # nothing predicted positive
    assert math.isnan(recall(np.array([0, 0]), np.array([1, 0]), 1))  # no positive image
    notes = undefined_notes(np.array([0, 0]), np.array([0, 0]), 1)
    assert len(notes) == 3 and all("undefined" in n for n in notes)
    assert undefined_notes(LABELS, PREDS, 1) == []


def test_average_ranks_share_ties() -> None:
    assert average_ranks(np.array([0.5, 0.2, 0.5, 0.9])).tolist() == [2.5, 1.0, 2.5, 4.0]


def test_auc_by_hand_with_ties() -> None:
    pos = np.array([True, True, False, False])
    # pairs (pos, neg): (.8,.5)=1 (.8,.2)=1 (.5,.5)=1/2 (.5,.2)=1 -> 3.5 / 4
    assert roc_auc(pos, np.array([0.8, 0.5, 0.5, 0.2])) == pytest.approx(87.5)
    assert roc_auc(pos, np.array([0.9, 0.8, 0.2, 0.1])) == pytest.approx(100.0)
    assert roc_auc(pos, np.array([0.1, 0.2, 0.8, 0.9])) == pytest.approx(0.0)
    assert roc_auc(pos, np.full(4, 0.3)) == pytest.approx(50.0)


def test_auc_matches_pairwise_count() -> None:
    rng = np.random.default_rng(0)
    pos = rng.random(60) < 0.4
    scores = np.round(rng.random(60), 1)  # many ties
    p, n = scores[pos], scores[~pos]
    pairs = (p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()
    assert roc_auc(pos, scores) == pytest.approx(100 * pairs / (p.size * n.size))


def test_auc_single_class_is_nan() -> None:
    assert math.isnan(roc_auc(np.array([True, True]), np.array([0.1, 0.9])))
    assert math.isnan(roc_auc(np.array([False]), np.array([0.1])))
    assert math.isnan(roc_auc(np.array([], dtype=bool), np.array([])))


def test_segments_and_running_accuracy() -> None:
    correct = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1], dtype=bool)
    assert segment_accuracy(correct) == [100.0, 50.0, 0.0, 100.0, 100.0, 0.0, 50.0, 100.0]
    short = segment_accuracy(np.array([True, False, True]))
    assert short[:3] == [100.0, 0.0, 100.0] and all(math.isnan(v) for v in short[3:])
    assert running_accuracy(np.array([1, 0, 1, 1])).tolist() == pytest.approx([100, 50, 200 / 3, 75])


def test_run_metrics_per_domain_and_target_mean() -> None:
    domains = np.array(["src", "src", "t1", "t1", "t1", "t2", "t2", "t2"])
    scores = np.array([0.9, 0.4, 0.8, 0.6, 0.3, 0.2, 0.7, 0.1])
    m = run_metrics(LABELS, PREDS, scores, domains, ["src", "t1", "t2", "t3"], "src", 1, np.full(8, 0.5))
    assert m["per_domain_acc"]["src"] == pytest.approx(50.0)
    assert m["per_domain_acc"]["t1"] == pytest.approx(200 / 3)
    assert m["per_domain_acc"]["t2"] == pytest.approx(100.0)
    assert math.isnan(m["per_domain_acc"]["t3"])  # absent from the stream
    assert m["target_acc"] == pytest.approx((200 / 3 + 100) / 2)  # macro over present targets
    assert m["all_acc"] == pytest.approx(75.0)
    assert len(m["segment_acc"]) == 8 and m["seconds_per_image"] == pytest.approx(0.5)
    assert m["auc"] == pytest.approx(roc_auc(LABELS == 1, scores))


def test_mean_std_population_and_nan() -> None:
    assert mean_std([1.0, 2.0, 3.0]) == pytest.approx({"mean": 2.0, "std": math.sqrt(2 / 3)})
    assert mean_std([5.0]) == {"mean": 5.0, "std": 0.0}
    assert mean_std([1.0, math.nan, 3.0]) == {"mean": 2.0, "std": 1.0}
    both = mean_std([math.nan, math.nan])
    assert math.isnan(both["mean"]) and math.isnan(both["std"])
    assert format_mean_std({"mean": 98.004, "std": 0.2}) == "98.00 ± 0.20"
    assert format_mean_std(both) == "n/a"


def test_aggregate_over_seeds() -> None:
    def run(acc: float) -> dict[str, object]:
        return {
            "per_domain_acc": {"a": acc, "b": 100 - acc},
            "target_acc": acc,
            "all_acc": acc,
            "precision": acc,
            "recall": acc,
            "auc": math.nan,
            "segment_acc": [acc] * 8,
            "seconds_per_image": 0.1,
        }

    agg = aggregate([run(60.0), run(80.0)])
    assert agg["per_domain_acc"]["a"] == {"mean": 70.0, "std": 10.0}
    assert agg["per_domain_acc"]["b"] == {"mean": 30.0, "std": 10.0}
    assert agg["all_acc"] == {"mean": 70.0, "std": 10.0}
    assert math.isnan(agg["auc"]["mean"])
    assert len(agg["segment_acc"]) == 8 and agg["segment_acc"][3] == {"mean": 70.0, "std": 10.0}
    assert agg["seconds_per_image"]["mean"] == pytest.approx(0.1)
    with pytest.raises(ValueError):
        aggregate([])


def test_oracle_threshold_accuracy_by_hand_and_brute_force() -> None:
    # Perfect ranking with a shifted operating point: argmax gets 50 %, the best threshold 100 %.
    pos = np.array([True, True, False, False])
    scores = np.array([0.4, 0.3, 0.2, 0.1])
    assert accuracy(pos.astype(int), (scores > 0.5).astype(int)) == 50.0
    assert oracle_threshold_accuracy(pos, scores) == 100.0
    # Ties stay together: no threshold separates the two 0.5 scores.
    assert oracle_threshold_accuracy(np.array([True, False]), np.array([0.5, 0.5])) == 50.0
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 12))
        p = rng.random(n) < 0.5
        s = rng.integers(0, 4, n) / 4.0  # many ties
        brute = max(100.0 * np.mean((s > t) == p) for t in np.concatenate([[-1.0], s]))
        assert oracle_threshold_accuracy(p, s) == pytest.approx(brute)
    assert math.isnan(oracle_threshold_accuracy(np.array([], dtype=bool), np.array([])))
