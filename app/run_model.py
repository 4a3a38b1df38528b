"""The run model: everything the app knows about the open source and its run, without Qt.

Rows, overlays, previews, the slide's tile values, the selection, the statistics and the run's
counters live here -- not in widgets. Views observe the model through its notifiers (wired by
the controller), and reports read it (:mod:`app.report_data`). The model also paces the views:
results arrive as fast as the engine makes them, and :meth:`RunModel.flush` hands them to one
group of views per timer tick (table, plots, images in turn), so no single repaint redraws the
whole window while the engine competes for the same cores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from app._engine import PredictionRow, SlideSource, Source
from app.messages import ItemResult
from app.overlay import Overlay, widen_levels
from app.state import LruCache, ProgressMeter
from app.stats import PlotData, RunStatistics, segment_size_for

T = TypeVar("T")


class Notifier(Generic[T]):
    """A Qt-free signal: ``connect`` callbacks, ``emit`` calls them in order."""

    def __init__(self) -> None:
        self._slots: list[Callable[[T], object]] = []

    def connect(self, slot: Callable[[T], object]) -> None:
        self._slots.append(slot)

    def emit(self, value: T) -> None:
        for slot in list(self._slots):
            slot(value)


@dataclass(frozen=True)
class Selection:
    """What the image view shows: a stream position, its preview (None: being loaded) and overlay."""

    position: int
    name: str
    row: PredictionRow | None
    preview: np.ndarray | None
    overlay: Overlay | None
    levels: tuple[float, float] | None
    keep_view: bool = False


@dataclass(frozen=True)
class Cell:
    """One slide tile's value on the heat-map grid."""

    row: int
    col: int
    value: float  # the adapted model's probability of the positive class


class RunModel:
    """Rows and everything else shown about the open source (owned by the UI thread).

    Args:
        low_confidence: the threshold under which a prediction counts as low-confidence.
        preview_capacity: previews kept in memory (older ones are read again when shown).
    """

    def __init__(self, low_confidence: float = 0.6, preview_capacity: int = 256) -> None:
        self.low_confidence = low_confidence
        self.source: Source | None = None
        self.rows: list[PredictionRow] = []
        self.overlays: dict[int, Overlay] = {}
        self.previews = LruCache(preview_capacity)
        self.heat_levels: tuple[float, float] | None = None  # one colour scale for the whole stream
        self.stats = RunStatistics(low_confidence=low_confidence)
        self.progress = ProgressMeter()
        self.tile_values = np.zeros((0, 0))  # slide heat map (rows, cols), nan where not processed
        self.pending = 0  # items of the source not processed yet
        self.selected: int | None = None
        self.notes: list[str] = []
        self.run_failures = self.run_guard_events = self.run_skipped_updates = 0
        self._row_of_position: dict[int, int] = {}
        self._position_of_cell: dict[tuple[int, int], int] = {}
        self._unshown: list[PredictionRow] = []
        self._cells: list[Cell] = []
        self._plots_dirty = self._images_dirty = False
        self._tick = 0
        # What views observe.
        self.rows_shown: Notifier[list[PredictionRow]] = Notifier()
        self.plots_changed: Notifier[PlotData] = Notifier()
        self.cells_changed: Notifier[list[Cell]] = Notifier()
        self.selection_changed: Notifier[Selection] = Notifier()
        self.preview_needed: Notifier[int] = Notifier()
        self.event_noted: Notifier[PredictionRow] = Notifier()  # a guard event or skipped update

    # -- opening ---------------------------------------------------------------------------------
    def open(self, source: Source, done: int, restored: Sequence[PredictionRow], positive_class: int) -> None:
        """Forget the previous source; show the rows of ``source`` that earlier runs made."""
        self.source = source
        total = len(source.items)
        self.rows, self.overlays = [], {}
        self.previews.clear()
        self.heat_levels = None
        self._row_of_position, self._position_of_cell = {}, {}
        self._unshown, self._cells = [], []
        self._plots_dirty = self._images_dirty = False
        self.selected = None
        self.pending = total - done
        self.notes = list(source.notes)
        self.stats = RunStatistics(
            positive_class=positive_class,
            segment_size=segment_size_for(total),
            low_confidence=self.low_confidence,
        )
        grid = source.plan.grid if isinstance(source, SlideSource) else (0, 0)
        self.tile_values = np.full(grid, np.nan)
        self.progress.start(done, total)
        self._add_rows(list(restored))
        self.flush(force=True)

    def close(self) -> None:
        self.source = None
        self.pending = 0

    # -- results ---------------------------------------------------------------------------------
    def start_run(self, counters: bool = True) -> None:
        """A run starts (``counters``: count its events afresh) or resumes after a pause."""
        if counters:
            self.run_failures = self.run_guard_events = self.run_skipped_updates = 0
        self.progress.start(self.progress.done, self.progress.total)

    def add_results(self, batch: Sequence[ItemResult]) -> None:
        """Keep the results of a batch of images; the views see them at the next :meth:`flush`."""
        for result in batch:
            position = result.row.position
            self.overlays[position] = result.overlay
            self.heat_levels = widen_levels(self.heat_levels, result.overlay)
            if result.preview is not None:
                self.previews.put(position, result.preview)
            self.run_guard_events += bool(result.row.guard_message)
            self.run_skipped_updates += result.row.update_skipped
            if result.row.guard_message or result.row.update_skipped:
                self.event_noted.emit(result.row)
        self._add_rows([r.row for r in batch])
        self.pending = max(self.pending - len(batch), 0)
        self.progress.add(len(batch))

    def note_failure(self, retried: bool) -> None:
        self.run_failures += 1
        if not retried:
            self.pending = max(self.pending - 1, 0)

    def _add_rows(self, rows: list[PredictionRow]) -> None:
        for row in rows:
            self._row_of_position[row.position] = len(self.rows)
            self.rows.append(row)
            if row.tile is not None:
                col, r = row.tile[0], row.tile[1]
                self._position_of_cell[(r, col)] = row.position
                if 0 <= r < self.tile_values.shape[0] and 0 <= col < self.tile_values.shape[1]:
                    self.tile_values[r, col] = row.positive_prob
                self._cells.append(Cell(r, col, row.positive_prob))
        self.stats.extend(rows)
        self._unshown.extend(rows)

    # -- pacing the views ------------------------------------------------------------------------
    def flush(self, force: bool = False, follow: bool = False) -> None:
        """Hand new results to the views: one group per call, or all groups when ``force``.

        Args:
            force: update the table, the plots and the images now (pauses, the end of a run).
            follow: show the newest image (the table's "follow newest").
        """
        groups = (self._flush_table, self._flush_plots, lambda: self._flush_images(follow))
        if force:
            for group in groups:
                group()
        else:
            groups[self._tick % len(groups)]()
            self._tick += 1

    def _flush_table(self) -> None:
        if self._unshown:
            rows, self._unshown = self._unshown, []
            self.rows_shown.emit(rows)
            self._plots_dirty = self._images_dirty = True

    def _flush_plots(self) -> None:
        if self._plots_dirty:
            self._plots_dirty = False
            self.plots_changed.emit(self.stats.plot_data())

    def _flush_images(self, follow: bool) -> None:
        if not self._images_dirty:
            return
        self._images_dirty = False
        if self._cells:
            cells, self._cells = self._cells, []
            self.cells_changed.emit(cells)
        if follow and self.rows:
            self.select(self.rows[-1].position, keep_view=True)

    # -- selection and lookups -------------------------------------------------------------------
    def row_at(self, position: int) -> PredictionRow | None:
        index = self._row_of_position.get(position)
        return None if index is None else self.rows[index]

    def row_index(self, position: int) -> int | None:
        """Where the row of stream ``position`` is in :attr:`rows` (arrival order)."""
        return self._row_of_position.get(position)

    def position_of_cell(self, row: int, col: int) -> int | None:
        return self._position_of_cell.get((row, col))

    def select(self, position: int, keep_view: bool = False) -> None:
        """Show the image at stream ``position``; asks for its preview when it is not at hand."""
        source = self.source
        if source is None or not 0 <= position < len(source.items):
            return
        self.selected = position
        preview = self.previews.get(position)
        row = self.row_at(position)
        self.selection_changed.emit(
            Selection(
                position,
                source.items[position].name,
                row,
                preview,
                self.overlays.get(position),
                self.heat_levels,
                keep_view,
            )
        )
        if preview is None:
            self.preview_needed.emit(position)

    def preview_loaded(self, position: int, image: np.ndarray) -> None:
        self.previews.put(position, image)
        if position == self.selected:
            self.select(position)

    def uncertainty_threshold(self, quantile: float = 0.9) -> float:
        """The uncertainty above which a row counts as "high uncertainty" (nan without values)."""
        values = np.array([r.uncertainty for r in self.rows], dtype=float)
        values = values[np.isfinite(values)]
        return float(np.quantile(values, quantile)) if values.size else math.nan

    def set_low_confidence(self, value: float) -> None:
        self.low_confidence = value
        self.stats.low_confidence = value


def image_title(row: PredictionRow | None) -> str:
    """The image view's caption for a row (rich text)."""
    if row is None:
        return ""
    text = f"<b>#{row.index}</b> {row.name} — <b>{row.prediction_label}</b> ({row.confidence:.2f})"
    text += f", source: {row.source_label} ({row.source_confidence:.2f})"
    if row.truth_label:
        text += f", truth: {row.truth_label}"
    if math.isfinite(row.uncertainty):
        text += f", mean uncertainty {row.uncertainty:.4f}"
    if row.restored:
        text += " <i>(earlier session: no overlay)</i>"
    return text
