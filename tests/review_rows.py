"""Rows of a generated two-class site for the review tests (no model needed)."""

from __future__ import annotations

import math

import numpy as np

from engine.review.comparison import Comparison
from engine.review.ladder import LadderRule
from engine.run.review import SiteReview
from engine.run.rows import PredictionRow
from lab.bench.adversarial import site_rows as adversarial_rows
from lab.reviewer import answer_queue, review_stream

CLASSES = ("normal", "tumor")


def site_rows(n: int = 240, shift: float = 2.0, seed: int = 0) -> tuple[list[PredictionRow], np.ndarray]:
    """A site whose classes divide at margin ``shift``: the source model over-calls tumour. Its
    label-free operating point stayed at the source threshold; the ``fit`` candidate found ``shift``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    margin = np.where(labels == 1, rng.normal(shift + 3, 1, n), rng.normal(shift - 3, 1, n))
    candidates = {"fit": shift, "prior": math.nan, "shift": -3.0}
    fields = {"decision_path": "not-accepted", "decision_reason": "edge", "seconds": 0.01}
    rows = adversarial_rows(margin, candidates, CLASSES, "img{:03d}.png", **fields)
    return rows, labels


def review_all(review: SiteReview, labels: np.ndarray, reviewer: str = "ana") -> int:
    """Answer the queue until it is empty; returns the reviews made."""
    return answer_queue(review, labels, reviewer=reviewer)


def null_site(key: int, s: int, rule: LadderRule, budget: int) -> tuple[list[Comparison], np.ndarray]:
    """A two-class site of 160 images whose labels do not depend on the margin (a best-fit
    threshold at -1.5), reviewed with ``budget`` answers: its comparisons and labels."""
    rng = np.random.default_rng([key, s])
    n = 160
    margin = rng.uniform(-3.0, 3.0, n)
    source = (margin > 0).astype(np.int64)
    labels = rng.integers(0, 2, n)
    out = review_stream(
        source, source, margin, None, {"fit": np.full(n, -1.5)}, np.zeros(n, dtype=np.int64), labels, budget,
        rule=rule, seed=s,
    )  # fmt: skip
    return out.ladders[0].comparisons, labels
