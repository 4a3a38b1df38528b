"""The table's filters over prediction rows (Qt-free); the rows themselves are the engine's
(:class:`engine.run.rows.PredictionRow`, re-exported here)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app._engine import PredictionRow, make_row

__all__ = ["FILTER_MODES", "PredictionRow", "RowFilter", "make_row", "uncertainty_threshold"]

FILTER_MODES: dict[str, str] = {
    "all": "All images",
    "queue": "Review queue (random order)",
    "changed": "Changed from the original model",
    "low_confidence": "Low confidence",
    "wrong": "Wrong (vs. ground truth)",
    "confident_errors": "Confident errors",
    "fixed": "Fixed by adaptation",
    "uncertain": "High uncertainty",
    "unreviewed": "Not reviewed yet",
    "reviewed": "Reviewed",
    "events": "Guard events / skipped updates",
}
CONFIDENT = 0.9  # a wrong prediction at or above this confidence is a "confident error"
#: Why a filter shows no row although the table has some (the row count says it): an empty view
#: said "0 of 160 rows" and nothing else (issue 38).
EMPTY_WHY: dict[str, str] = {
    "queue": "nothing waits for review (Q says why)",
    "changed": "every decision is the original model's",
    "low_confidence": "every decision is confident",
    "wrong": "no labelled image is wrong",
    "confident_errors": "no confident error",
    "fixed": "no labelled image was fixed",
    "uncertain": "no uncertainty values (maps pending, or the method makes none)",
    "unreviewed": "every image is reviewed",
    "reviewed": "no image is reviewed yet",
    "events": "the guard never acted",
}


@dataclass(frozen=True)
class RowFilter:
    """Which rows the table shows."""

    mode: str = "all"  # one of FILTER_MODES
    low_confidence: float = 0.6  # rows below this confidence are "low confidence" (0-1)
    high_uncertainty: float = math.nan  # rows above this mean uncertainty are "high uncertainty"
    text: str = ""  # case-insensitive substring of the name or a label

    def accepts(self, row: PredictionRow, reviewed: bool = False, queued: bool = False) -> bool:
        """Whether the table shows ``row`` (``reviewed``: it has a mark; ``queued``: it waits in
        the review queue)."""
        if self.text:
            needle = self.text.lower()
            haystack = f"{row.name} {row.prediction_label} {row.source_label} {row.truth_label or ''}".lower()
            if needle not in haystack:
                return False
        if self.mode == "queue":
            return queued
        if self.mode == "changed":
            return row.changed
        if self.mode == "low_confidence":
            return row.confidence < self.low_confidence
        if self.mode == "wrong":
            return row.correct is False
        if self.mode == "confident_errors":
            return row.correct is False and row.confidence >= CONFIDENT
        if self.mode == "reviewed":
            return reviewed
        if self.mode == "unreviewed":
            return not reviewed
        if self.mode == "fixed":
            return row.correct is True and row.source_correct is False
        if self.mode == "events":
            return bool(row.guard_message) or row.update_skipped
        if self.mode == "uncertain":
            return math.isfinite(row.uncertainty) and (
                not math.isfinite(self.high_uncertainty) or row.uncertainty >= self.high_uncertainty
            )
        return True


def uncertainty_threshold(rows: Sequence[PredictionRow], quantile: float = 0.9) -> float:
    """The uncertainty above which a row counts as "high uncertainty" (nan without values)."""
    values = np.array([r.uncertainty for r in rows], dtype=float)
    values = values[np.isfinite(values)]
    return float(np.quantile(values, quantile)) if values.size else math.nan
