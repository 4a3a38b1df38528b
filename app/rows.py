"""One table row per processed image, and the table's filters (Qt-free)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from app.sources import StreamItem

FILTER_MODES: dict[str, str] = {
    "all": "All images",
    "changed": "Changed by adaptation",
    "low_confidence": "Low confidence",
    "wrong": "Wrong (vs. ground truth)",
    "fixed": "Fixed by adaptation",
    "uncertain": "High uncertainty",
    "events": "Guard events / skipped updates",
}


@dataclass(frozen=True)
class PredictionRow:
    """What the app records about one processed image (no arrays: rows are kept for every image)."""

    index: int  # arrival index reported by the engine (counts every image the profile has seen)
    position: int  # position within its source's arrival order
    key: str  # stable identifier within the source
    name: str  # file path relative to the folder, or tile position
    prediction: int  # adapted model's class index
    prediction_label: str
    confidence: float  # adapted model's probability of its prediction (0-1)
    positive_prob: float  # adapted model's probability of the card's positive class (0-1)
    source_prediction: int  # frozen source model's class index
    source_label: str
    source_confidence: float
    uncertainty: float  # mean per-token uncertainty (nan when the method has none)
    ground_truth: int | None
    truth_label: str | None
    seconds: float  # engine time for this image
    tile: tuple[int, int, int, int, int, int] | None = None  # (col, row, x, y, width, height) for slide tiles
    guard_message: str = ""  # what the collapse guard did after this image (empty: it did not act)
    update_skipped: bool = False  # the method skipped its update on this image (non-finite loss)
    restored: bool = False  # True for rows reloaded from the profile (no overlay available)

    @property
    def changed(self) -> bool:
        """Adaptation changed the source model's prediction."""
        return self.prediction != self.source_prediction

    @property
    def correct(self) -> bool | None:
        return None if self.ground_truth is None else self.prediction == self.ground_truth

    @property
    def source_correct(self) -> bool | None:
        return None if self.ground_truth is None else self.source_prediction == self.ground_truth

    @property
    def agreement(self) -> str:
        """Adapted prediction vs. ground truth, with the source model's outcome when it differs."""
        if self.ground_truth is None:
            return ""
        if self.correct and not self.source_correct:
            return "correct (fixed)"
        if not self.correct and self.source_correct:
            return "wrong (broken)"
        return "correct" if self.correct else "wrong"

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("restored")
        # Events are rare: leave the defaults out so the profile's rows files stay small.
        if not self.guard_message:
            data.pop("guard_message")
        if not self.update_skipped:
            data.pop("update_skipped")
        if self.tile is not None:
            data["tile"] = list(self.tile)
        for key in ("confidence", "positive_prob", "source_confidence", "uncertainty", "seconds"):
            value = data[key]
            data[key] = None if not math.isfinite(value) else round(float(value), 6)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PredictionRow:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        for key in ("confidence", "positive_prob", "source_confidence", "uncertainty", "seconds"):
            kwargs[key] = math.nan if kwargs.get(key) is None else float(kwargs[key])
        if kwargs.get("tile") is not None:
            kwargs["tile"] = tuple(int(v) for v in kwargs["tile"])
        kwargs["guard_message"] = str(kwargs.get("guard_message") or "")
        kwargs["update_skipped"] = bool(kwargs.get("update_skipped", False))
        kwargs["restored"] = True
        return cls(**kwargs)


def make_row(
    item: StreamItem,
    *,
    index: int,
    probs: Any,
    prediction: int,
    source_probs: Any,
    source_prediction: int,
    mean_uncertainty: float,
    seconds: float,
    classes: tuple[str, ...],
    positive_class: int,
    diagnostics: dict[str, Any] | None = None,
) -> PredictionRow:
    """Build a row from a stream item and the engine's outputs for it.

    ``diagnostics`` is the step's diagnostics dict: its ``"guard"`` message (the collapse guard
    acted) and ``"update_skipped"`` flag (I-DiPT's non-finite-loss guard) are kept in the row.
    """
    diagnostics = diagnostics or {}
    tile = None
    if item.tile is not None:
        t = item.tile
        tile = (t.col, t.row, t.x, t.y, t.width, t.height)
    truth = item.ground_truth
    return PredictionRow(
        index=int(index),
        position=item.position,
        key=item.key,
        name=item.name,
        prediction=int(prediction),
        prediction_label=classes[int(prediction)],
        confidence=float(probs[int(prediction)]),
        positive_prob=float(probs[positive_class]) if positive_class < len(probs) else math.nan,
        source_prediction=int(source_prediction),
        source_label=classes[int(source_prediction)],
        source_confidence=float(source_probs[int(source_prediction)]),
        uncertainty=float(mean_uncertainty),
        ground_truth=truth,
        truth_label=None if truth is None else classes[truth],
        seconds=float(seconds),
        tile=tile,
        guard_message=str(diagnostics.get("guard") or ""),
        update_skipped=bool(diagnostics.get("update_skipped", 0.0)),
    )


@dataclass(frozen=True)
class RowFilter:
    """Which rows the table shows."""

    mode: str = "all"  # one of FILTER_MODES
    low_confidence: float = 0.6  # rows below this confidence are "low confidence" (0-1)
    high_uncertainty: float = math.nan  # rows above this mean uncertainty are "high uncertainty"
    text: str = ""  # case-insensitive substring of the name or a label

    def accepts(self, row: PredictionRow) -> bool:
        if self.text:
            needle = self.text.lower()
            haystack = f"{row.name} {row.prediction_label} {row.source_label} {row.truth_label or ''}".lower()
            if needle not in haystack:
                return False
        if self.mode == "changed":
            return row.changed
        if self.mode == "low_confidence":
            return row.confidence < self.low_confidence
        if self.mode == "wrong":
            return row.correct is False
        if self.mode == "fixed":
            return row.correct is True and row.source_correct is False
        if self.mode == "events":
            return bool(row.guard_message) or row.update_skipped
        if self.mode == "uncertain":
            return math.isfinite(row.uncertainty) and (
                not math.isfinite(self.high_uncertainty) or row.uncertainty >= self.high_uncertainty
            )
        return True
