"""The plain uses of K labels that the review ladder is compared with (issue 37, item 5)."""

from __future__ import annotations

import numpy as np

from lab.bench.plain_labels import BEST, THRESHOLD, fitted_threshold, plain_uses


def test_the_fitted_threshold_makes_the_fewest_errors_and_prefers_the_source_models_own() -> None:
    margins = np.array([-2.0, -1.0, 0.5, 1.5, 3.0])
    assert fitted_threshold(margins, np.array([0, 0, 0, 1, 1])) == 1.0  # between 0.5 and 1.5
    assert fitted_threshold(margins, np.array([0, 0, 1, 1, 1])) == 0.0  # the source's own makes none
    assert fitted_threshold(np.zeros(0), np.zeros(0, dtype=np.int64)) == 0.0


def _site(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A site whose classes divide at margin 2: the source model (threshold 0) over-calls class 1."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    margin = np.where(labels == 1, rng.normal(5, 1, n), rng.normal(-1, 1, n))
    return margin, labels


def test_k_labels_pick_the_better_rule_and_decide_the_whole_site() -> None:
    margin, labels = _site()
    n = margin.shape[0]
    source = (margin > 0).astype(np.int64)
    out = plain_uses(
        source,
        margin,
        {"fit": np.full(n, 2.0), "shift": np.full(n, -3.0)},
        None,
        np.zeros(n, np.int64),
        labels,
        40,
    )
    fit = (margin > 2.0).astype(np.int64)
    assert np.array_equal(out[BEST][0], fit), "40 labels show the fit candidate right most often"
    threshold = out[THRESHOLD][0]
    assert np.mean(threshold == labels) > np.mean(source == labels)
    assert np.array_equal(out[BEST][1], source), "the reviewer came at the end: shown as decided then"


def test_no_label_keeps_the_source_model_and_a_late_reviewer_changes_only_what_follows() -> None:
    margin, labels = _site(seed=1)
    n = margin.shape[0]
    source = (margin > 0).astype(np.int64)
    unit = np.zeros(n, np.int64)
    none = plain_uses(source, margin, {"fit": np.full(n, 2.0)}, None, unit, labels, 0)
    assert all(np.array_equal(retro, source) for retro, _ in none.values()), "ties go to the source model"
    half = plain_uses(source, margin, {"fit": np.full(n, 2.0)}, None, unit, labels, 20, review_at=0.5)
    retro, online = half[BEST]
    assert np.array_equal(online[:200], source[:200]) and np.array_equal(online[200:], retro[200:])
