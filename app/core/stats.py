"""Running statistics behind the plots and the report (Qt-free).

With ground truth the plots show the running accuracy of the adapted and of the source model;
without it, the running positive rate (share of images predicted as the card's positive class)
and the running mean confidence. The accuracies are measured against one truth, named in
:attr:`PlotData.truth`: the dataset's labels where the source labels any image, else the review
marks (:meth:`app.core.run_model.RunModel._plot_truth`). Per-segment bars show the same quantities over consecutive
blocks of the stream, where drift and recovery are easier to see than in a cumulative curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from app.core.filters import PredictionRow

DEFAULT_SEGMENTS = 10
#: Points of a running curve the plots draw at most: more than a plot is pixels wide only costs
#: repaint time, which grew with the rows shown (issue 30). The curves are cumulative: even steps
#: through the stream lose nothing a reader can see.
PLOT_POINTS = 600


def thin(count: int, most: int = PLOT_POINTS) -> np.ndarray:
    """Indices of at most ``most`` of ``count`` points, evenly spread, first and last included."""
    if count <= most:
        return np.arange(count)
    # Steps over 1 apart stay apart when rounded: the indices ascend without repeats (np.unique
    # imported numpy.ma on its first call, 50 ms of the GUI thread when a run passed ``most`` rows).
    return np.linspace(0, count - 1, most).round().astype(np.int64)


def segment_size_for(total: int, segments: int = DEFAULT_SEGMENTS) -> int:
    """Images per segment so that a stream of ``total`` images gives about ``segments`` bars."""
    return max(1, math.ceil(max(total, 1) / segments))


@dataclass(frozen=True)
class PlotData:
    """Everything the plots draw, as immutable arrays (x = position in the stream, 1-based)."""

    labelled: bool  # True when the curves are accuracies against ground truth
    x: np.ndarray  # at most PLOT_POINTS, evenly spread over the stream (the last one included)
    adapted: np.ndarray  # running accuracy or positive rate of the adapted model
    source: np.ndarray  # the same for the source model
    confidence: np.ndarray  # running mean confidence of the adapted model
    segment_starts: np.ndarray  # first stream position of each segment (1-based)
    segment_adapted: np.ndarray
    segment_source: np.ndarray
    segment_size: int
    truth: str = ""  # what the accuracies are measured against ("dataset labels", "review marks")
    caption: str = ""  # what the figures say when the applicability gate fired (app.core.figures)

    @property
    def empty(self) -> bool:
        return self.x.size == 0


@dataclass(frozen=True)
class Summary:
    """Counts for the status line and the report."""

    images: int
    labelled: int
    changed: int
    adapted_correct: int
    source_correct: int
    positive: int
    mean_confidence: float
    mean_uncertainty: float
    low_confidence: int
    guard_events: int = 0  # images after which the collapse guard reset image-specific state
    skipped_updates: int = 0  # images whose update the method skipped (non-finite loss)
    by_class: tuple[int, ...] = ()  # images decided as each class, by class index (up to the last decided)

    @property
    def adapted_accuracy(self) -> float:
        return self.adapted_correct / self.labelled if self.labelled else math.nan

    @property
    def source_accuracy(self) -> float:
        return self.source_correct / self.labelled if self.labelled else math.nan


@dataclass
class RunStatistics:
    """Accumulates rows in arrival order; cheap to append, arrays built on demand."""

    positive_class: int = 1
    segment_size: int = 10
    low_confidence: float = 0.6
    truth: str = "dataset labels"  # what the truths given to :meth:`extend` are
    _pred: list[int] = field(default_factory=list)
    _src: list[int] = field(default_factory=list)
    _truth: list[int] = field(default_factory=list)  # -1 when unknown
    _conf: list[float] = field(default_factory=list)
    _unc: list[float] = field(default_factory=list)
    _guard_events: int = 0
    _skipped_updates: int = 0

    def __len__(self) -> int:
        return len(self._pred)

    def clear(self) -> None:
        for values in (self._pred, self._src, self._truth, self._conf, self._unc):
            values.clear()
        self._guard_events = self._skipped_updates = 0

    def extend(self, rows: Iterable[PredictionRow], truths: Iterable[int | None] | None = None) -> None:
        """Add ``rows``; ``truths`` (one per row) replaces their ground truth for the accuracies."""
        rows = list(rows)
        given = [r.ground_truth for r in rows] if truths is None else list(truths)
        for row, truth in zip(rows, given, strict=True):
            self._pred.append(row.prediction)
            self._src.append(row.source_prediction)
            self._truth.append(-1 if truth is None else truth)
            self._conf.append(row.confidence)
            self._unc.append(row.uncertainty)
            self._guard_events += bool(row.guard_message)
            self._skipped_updates += row.update_skipped

    def set_truth(self, index: int, truth: int | None) -> None:
        """Change the ground truth of the row at ``index`` (arrival order), e.g. after a review."""
        self._truth[index] = -1 if truth is None else truth

    def summary(self) -> Summary:
        pred, src, truth = np.asarray(self._pred), np.asarray(self._src), np.asarray(self._truth)
        known = truth >= 0
        conf, unc = np.asarray(self._conf, dtype=float), np.asarray(self._unc, dtype=float)
        finite_unc = unc[np.isfinite(unc)]
        return Summary(
            images=len(pred),
            labelled=int(known.sum()),
            changed=int((pred != src).sum()),
            adapted_correct=int((pred[known] == truth[known]).sum()),
            source_correct=int((src[known] == truth[known]).sum()),
            positive=int((pred == self.positive_class).sum()),
            mean_confidence=float(conf.mean()) if conf.size else math.nan,
            mean_uncertainty=float(finite_unc.mean()) if finite_unc.size else math.nan,
            low_confidence=int((conf < self.low_confidence).sum()),
            guard_events=self._guard_events,
            skipped_updates=self._skipped_updates,
            by_class=tuple(int(n) for n in np.bincount(pred.astype(np.int64))) if pred.size else (),
        )

    def plot_data(self) -> PlotData:
        pred = np.asarray(self._pred, dtype=np.int64)
        src = np.asarray(self._src, dtype=np.int64)
        truth = np.asarray(self._truth, dtype=np.int64)
        conf = np.asarray(self._conf, dtype=np.float64)
        n = pred.size
        x_all = np.arange(1, n + 1, dtype=np.float64)
        known = truth >= 0
        labelled = bool(known.any())
        if labelled:
            # Accuracy curves are drawn at the labelled images only.
            x = x_all[known]
            adapted_hits = (pred[known] == truth[known]).astype(np.float64)
            source_hits = (src[known] == truth[known]).astype(np.float64)
            count = np.arange(1, x.size + 1, dtype=np.float64)
            adapted = np.cumsum(adapted_hits) / count
            source = np.cumsum(source_hits) / count
            confidence = (np.cumsum(conf) / np.maximum(x_all, 1))[known]
        else:
            x = x_all
            count = np.maximum(x_all, 1)
            adapted = np.cumsum(pred == self.positive_class) / count
            source = np.cumsum(src == self.positive_class) / count
            confidence = np.cumsum(conf) / count
        starts, seg_a, seg_s = self._segments(pred, src, truth, labelled)
        keep = thin(x.size)
        return PlotData(
            labelled,
            x[keep],
            adapted[keep],
            source[keep],
            confidence[keep],
            starts,
            seg_a,
            seg_s,
            self.segment_size,
            self.truth,
        )

    def _segments(
        self, pred: np.ndarray, src: np.ndarray, truth: np.ndarray, labelled: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = max(1, self.segment_size)
        starts, seg_a, seg_s = [], [], []
        for start in range(0, pred.size, size):
            sl = slice(start, start + size)
            if labelled:
                known = truth[sl] >= 0
                if not known.any():
                    continue
                seg_a.append(float((pred[sl][known] == truth[sl][known]).mean()))
                seg_s.append(float((src[sl][known] == truth[sl][known]).mean()))
            else:
                seg_a.append(float((pred[sl] == self.positive_class).mean()))
                seg_s.append(float((src[sl] == self.positive_class).mean()))
            starts.append(start + 1)
        return (
            np.asarray(starts, dtype=np.float64),
            np.asarray(seg_a, dtype=np.float64),
            np.asarray(seg_s, dtype=np.float64),
        )
