"""Rows of a generated two-class site for the review tests (no model needed)."""

from __future__ import annotations

import math

import numpy as np

from engine.run.review import SiteReview
from engine.run.rows import PredictionRow

CLASSES = ("normal", "tumor")


def site_rows(n: int = 240, shift: float = 2.0, seed: int = 0) -> tuple[list[PredictionRow], np.ndarray]:
    """A site whose classes divide at margin ``shift``: the source model over-calls tumour. Its
    label-free operating point stayed at the source threshold; the ``fit`` candidate found ``shift``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    margin = np.where(labels == 1, rng.normal(shift + 3, 1, n), rng.normal(shift - 3, 1, n))
    rows = []
    for i in range(n):
        src = int(margin[i] > 0)
        rows.append(
            PredictionRow(
                index=i,
                position=i,
                key=f"img{i:03d}.png",
                name=f"img{i:03d}.png",
                prediction=src,
                prediction_label=CLASSES[src],
                confidence=0.9,
                positive_prob=0.9 if src else 0.1,
                source_prediction=src,
                source_label=CLASSES[src],
                source_confidence=0.9,
                uncertainty=math.nan,
                ground_truth=None,
                truth_label=None,
                seconds=0.01,
                decision_path="not-accepted",
                site_group=0,
                decision_threshold=0.0,
                decision_reason="edge",
                source_margin=float(margin[i]),
                candidates=(("fit", shift), ("prior", math.nan), ("shift", -3.0)),
            )
        )
    return rows, labels


def review_all(review: SiteReview, labels: np.ndarray, reviewer: str = "ana") -> int:
    """Answer the queue until it is empty; returns the reviews made."""
    made = 0
    while (index := review.next_item()) is not None:
        review.set_mark(review.rows[index].key, int(labels[index]), reviewer)
        made += 1
    return made
