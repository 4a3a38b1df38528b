"""The run model: everything the app knows about the open source and its run, without Qt.

Rows, overlays, previews, the slide's tile values, the selection, the statistics and the run's
counters live here -- not in widgets. Views observe the model through its notifiers (wired by
the controller), and reports read it (:mod:`app.reports.data`). The model also paces the views:
results arrive as fast as the engine makes them, and :meth:`RunModel.flush` hands them to one
group of views per timer tick (table, plots, images in turn), so no single repaint redraws the
whole window while the engine competes for the same cores. Its rows are the engine's, decided by
the rule the site's reviews left in use where they moved it (the source model after a revert, a
promoted candidate; :mod:`app.core.review_desk`), with a review mark as the truth of an image the
dataset does not label (:meth:`RunModel.effective`); a mark never replaces the dataset's label, and
the figures against either truth are kept apart (:mod:`app.core.figures`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from app._engine import Certificate, DecisionPath, KindTally, PredictionRow, ReviewMark, SlideSource, Source
from app.core.applicability import Collapse, CollapseWatch, Kind, collapse_due
from app.core.caches import LruCache
from app.core.certificates import QueueState
from app.core.figure_tally import FigureTally
from app.core.figures import Figures
from app.core.messages import ItemResult
from app.core.overlay import Overlay, widen_levels
from app.core.progress import ProgressMeter
from app.core.review_desk import MarkChange, ReviewDesk
from app.core.review_record import review_tally
from app.core.run_items import Cell, Notifier, ReviewNote, RowChange, Selection, review_note
from app.core.run_maps import waiting
from app.core.stats import PlotData, RunStatistics, segment_size_for


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
        self.classes: tuple[str, ...] = ()
        self.raw_rows: list[PredictionRow] = []  # the rows as the engine made them (the journal's)
        self.tally = FigureTally()  # the figures, counted row by row (figures())
        self.watch = CollapseWatch()  # the predictions, counted row by row (a one-class collapse)
        self.desk = ReviewDesk()  # review marks, undo, the review queue and the certificates
        self._moved = self.desk.moved_rules  # the parts' rules the reviews moved, as the rows show
        self.kinds = KindTally()  # what the first previews look like
        self.collapse: Collapse | None = None  # the one-class collapse noticed on this source
        # Applicability warnings about this source by kind ("gate:<check>", "collapse", "subfolders",
        # "resolution"), for the reports: a newer warning of a kind replaces the older one.
        self.checks: dict[str, str] = {}
        self.gate: list[str] = []  # the engine's applicability gate's warnings that fired for it
        self.gate_checks: list[str] = []  # the names of those checks (they choose the figures' caption)
        self.dataset_labelled = False  # the source labels some images: the plots measure against them
        self.run_guard_events = self.run_skipped_updates = 0
        self._collapse_checked = 0  # rows when the collapse was last checked
        self._row_of_position: dict[int, int] = {}
        self._position_of_cell: dict[tuple[int, int], int] = {}
        self._unshown: list[PredictionRow] = []
        self._cells: list[Cell] = []
        self._plots_dirty = self._images_dirty = self._queue_dirty = self._summary_dirty = False
        self._tick = 0
        self.summaries = 0  # the review's summaries given (_flush_summary)
        # What views observe.
        self.rows_shown: Notifier[list[PredictionRow]] = Notifier()
        self.plots_changed: Notifier[PlotData] = Notifier()
        self.cells_changed: Notifier[list[Cell]] = Notifier()
        self.selection_changed: Notifier[Selection] = Notifier()
        self.preview_needed: Notifier[int] = Notifier()
        self.event_noted: Notifier[PredictionRow] = Notifier()  # a guard event or skipped update
        self.rows_changed: Notifier[list[RowChange]] = Notifier()  # review marks set or cleared
        self.metrics_changed: Notifier[Figures] = Notifier()
        self.collapse_noted: Notifier[Collapse] = Notifier()
        self.collapse_changed: Notifier[Collapse] = Notifier()  # its figures, as more rows came
        self.queue_changed: Notifier[QueueState] = Notifier()  # the review queue and the groups' verdicts
        self.certificates_changed: Notifier[list[Certificate]] = Notifier()
        self.review_decided: Notifier[Certificate] = Notifier()  # a comparison of the site decided
        # What decides the folder now and what reviewing could change (the engine's outlook).
        self.outlook_changed: Notifier[str] = Notifier()
        self._outlook = ""

    # -- opening ---------------------------------------------------------------------------------
    def open(
        self,
        source: Source,
        done: int,
        restored: Sequence[PredictionRow],
        positive_class: int,
        classes: Sequence[str] = (),
        overlays: Mapping[str, Overlay] | None = None,
        review_dir: Path | None = None,
    ) -> None:
        """Forget the previous source; show the rows of ``source`` that earlier runs made.

        Args:
            source: the source now open.
            done: its items processed or skipped for good by earlier runs.
            restored: the rows earlier runs made (their positions follow today's arrival order).
            positive_class: the class whose probability the slide map shows.
            classes: the model's class names.
            overlays: the kept overlays of restored rows, by item key.
            review_dir: the project's review folder, where the source's marks are read from and kept
                (None: nothing is kept).
        """
        self.source = source
        total = len(source.items)
        self.rows, self.raw_rows, self.overlays = [], [], {}
        self.classes = tuple(classes)
        self.tally, self.watch = FigureTally(self.classes), CollapseWatch()
        self.kinds, self.collapse, self.checks, self.gate, self.gate_checks = KindTally(), None, {}, [], []
        self.dataset_labelled = any(item.ground_truth is not None for item in source.items)
        self._collapse_checked = 0
        self.previews.clear()
        self.heat_levels = None
        self._row_of_position, self._position_of_cell = {}, {}
        self._unshown, self._cells = [], []
        self._plots_dirty = self._images_dirty = self._summary_dirty = False
        self._queue_dirty = True
        self.selected = None
        self.pending = total - done + waiting(restored)  # images to decide, and decided ones to map
        self.notes = list(source.notes)
        self.stats = RunStatistics(
            positive_class=positive_class,
            segment_size=segment_size_for(total),
            low_confidence=self.low_confidence,
            truth="dataset labels" if self.dataset_labelled else "review marks",
        )
        grid = source.plan.grid if isinstance(source, SlideSource) else (0, 0)
        self.tile_values = np.full(grid, np.nan)
        self.progress.start(done, total)
        # Positions follow today's arrival order (the order may have changed since the rows were made).
        position = {item.key: item.position for item in source.items}
        rows = []
        for extra, row in enumerate(restored):
            rows.append(dataclasses.replace(row, position=position.get(row.key, total + extra)))
        for row in rows:
            overlay = (overlays or {}).get(row.key)
            if overlay is not None:
                self.overlays[row.position] = overlay
                self.heat_levels = widen_levels(self.heat_levels, overlay)
        self.desk.open(rows, review_dir, source.source_id, len(self.classes))
        self.desk.set_complete(self.pending == 0)
        self._moved = self.desk.moved_rules
        self._add_rows(rows, new=False)
        self.flush(force=True)
        self._say_outlook()

    def close(self) -> None:
        self.desk.close()  # its review files saved and let go of first: nothing is written after this
        self.source, self.pending, self.selected, self.rows, self.raw_rows = None, 0, None, [], []
        self.tally, self.watch = FigureTally(self.classes), CollapseWatch()
        self._unshown, self._cells, self.overlays = [], [], {}
        self._say_outlook()

    # -- results ---------------------------------------------------------------------------------
    def start_run(self, counters: bool = True) -> None:
        """A run starts (``counters``: count its events afresh) or resumes after a pause."""
        if counters:
            self.run_guard_events = self.run_skipped_updates = 0
        self.progress.start(self.progress.done, self.progress.total)

    def add_results(self, batch: Sequence[ItemResult]) -> None:
        """Keep the results of a batch of images; the views see them at the next :meth:`flush`."""
        maps = [r for r in batch if r.map_only]  # maps behind the decisions (after their rows)
        batch = [r for r in batch if not r.map_only]
        for result in batch:
            position = result.row.position
            self.overlays[position] = result.overlay
            self.heat_levels = widen_levels(self.heat_levels, result.overlay)
            if result.preview is not None:
                self.previews.put(position, result.preview)
                self.kinds.add(result.preview)
            self.run_guard_events += bool(result.row.guard_message)
            self.run_skipped_updates += result.row.update_skipped
            if result.row.guard_message or result.row.update_skipped:
                self.event_noted.emit(result.row)
        self._add_rows([r.row for r in batch])
        made = sum(not r.prompted_only for r in maps)  # I-DiPT's decisions are no part of a run's work
        self.pending = max(self.pending - len(batch) + waiting(r.row for r in batch) - made, 0)
        self.desk.set_complete(self.pending == 0)
        self.progress.add(len(batch))
        if maps:
            self._refresh(self._apply_maps(maps))

    def _apply_maps(self, results: Sequence[ItemResult]) -> list[int]:
        """Maps that arrived behind the decisions (the engine's maps-behind mode): each replaces its
        image's row (the same decision, now with its uncertainty and I-DiPT's prompted decision)
        and brings the overlay; the indices of the rows that changed."""
        changed = []
        for result in results:
            index = self.row_index(result.row.position)
            if index is None:
                continue
            self.raw_rows[index] = result.row
            self.rows[index] = self.effective(result.row)
            if not result.prompted_only:  # I-DiPT's decision alone: the map stays
                self.overlays[result.row.position] = result.overlay
                self.heat_levels = widen_levels(self.heat_levels, result.overlay)
            changed.append(index)
        self.desk.add_rows([r.row for r in results])  # the review's rows: I-DiPT's prompted decisions
        if self.selected is not None and self.selected in {r.row.position for r in results}:
            self.select(self.selected, keep_view=True)  # its overlay arrived
        return changed

    def note_failure(self, retried: bool) -> None:
        if not retried:
            self.pending = max(self.pending - 1, 0)
            self.desk.set_complete(self.pending == 0)

    def _add_rows(self, rows_in: list[PredictionRow], new: bool = True) -> None:
        if new:
            self.desk.add_rows(rows_in)
        rows = [self.effective(r) for r in rows_in]
        if not self.dataset_labelled and any(r.ground_truth is not None for r in rows_in):
            self._measure_against_dataset()  # rows labelled where the items said nothing
        self.raw_rows.extend(rows_in)
        for row in rows:
            self._row_of_position[row.position] = len(self.rows)
            self.rows.append(row)
            self._tally(len(self.rows) - 1)
            self._show_tile(row)
        self.stats.extend(rows, [self._plot_truth(r) for r in rows_in])
        self._unshown.extend(rows)

    def _show_tile(self, row: PredictionRow) -> None:
        """A slide tile's row on the heat map (nothing for a folder's image)."""
        if row.tile is not None:
            col, r = row.tile[0], row.tile[1]
            self._position_of_cell[(r, col)] = row.position
            if 0 <= r < self.tile_values.shape[0] and 0 <= col < self.tile_values.shape[1]:
                self.tile_values[r, col] = row.positive_prob
            self._cells.append(Cell(r, col, row.positive_prob))
            self._images_dirty = True

    # -- pacing the views ------------------------------------------------------------------------
    def flush(self, force: bool = False, follow: bool = False) -> None:
        """Hand new results to the views: one group per call, or all groups when ``force``.

        Args:
            force: update the table, the plots and the images now (pauses, the end of a run).
            follow: show the newest image (the table's "follow newest").
        """
        groups = (self._flush_table, lambda: self._flush_plots(force), lambda: self._flush_images(follow))
        # The review's summary (the certificates' lines, the sentence of what decides the folder)
        # reads every row: it comes with the images, the lightest turn, not with the plots (one
        # turn of the views' timer was their sum: issue 41).
        if force:
            for group in groups:
                group()
            self._flush_summary()
        else:
            groups[self._tick % len(groups)]()
            if self._tick % len(groups) == len(groups) - 1:
                self._flush_summary()
            self._tick += 1

    def _flush_table(self) -> None:
        if self._unshown:
            rows, self._unshown = self._unshown, []
            self.rows_shown.emit(rows)
            self._plots_dirty = self._images_dirty = self._summary_dirty = True
        if self._queue_dirty:
            self._queue_dirty = False
            self.queue_changed.emit(self.desk.queue_state())

    def _flush_plots(self, force: bool = False) -> None:
        if self._plots_dirty:
            self._plots_dirty = False
            self._check_collapse(force)  # before the figures: a collapse found now marks them
            self.plots_changed.emit(self.plot_data())
            if self.rows:
                self.metrics_changed.emit(self.figures())

    def _flush_summary(self) -> None:
        """The certificates' lines and the sentence, when rows came or changed since they were last given."""
        if self._summary_dirty:
            self._summary_dirty = False
            self.summaries += 1
            self.certificates_changed.emit(self.desk.lines())
            self._say_outlook()

    def _say_outlook(self) -> None:
        """The sentence of what decides the folder now, when it changed (the status area, the Metrics tab)."""
        text = self.desk.sentence(self.classes) if self.source is not None else ""
        if text != self._outlook:
            self._outlook = text
            self.outlook_changed.emit(text)

    def _check_collapse(self, force: bool = False) -> None:
        """Note a one-class collapse once per source, checked every few new rows, and on every new
        row when ``force`` (a pause, the end of a run: the banner said "270 of 273" after 278 tiles);
        once noted, its figures follow the rows (a banner said "21 of 21" where the PDF said "48 of 48")."""
        due = collapse_due(len(self.rows), self._collapse_checked)
        if not due and not (force and len(self.rows) != self._collapse_checked):
            return
        self._collapse_checked = len(self.rows)
        latest = self.watch.collapse()
        if latest is None or latest == self.collapse:
            return
        noted, self.collapse = self.collapse is not None, latest
        (self.collapse_changed if noted else self.collapse_noted).emit(latest)

    def looks_like(self) -> Kind | None:
        """What most of the judged previews look like (the engine's verdict, :class:`KindTally`)."""
        return self.kinds.verdict()

    # -- review marks and certificates ----------------------------------------------------------
    def review(self, position: int, label: int | None, reviewer: str = "") -> ReviewMark | None:
        """Mark the image at ``position``: ``label`` is the right class (None clears the mark).

        The mark is written to the project first (when that fails, nothing changes); the class
        the image is marked with already changes nothing.

        Raises:
            OSError: the mark cannot be kept.
            ValueError: no row at ``position``, or ``label`` is not a class.
        """
        index = self._row_of_position.get(position)
        if index is None:
            raise ValueError(f"no processed image at position {position}")
        if label is not None and not 0 <= label < len(self.classes):
            raise ValueError(f"{label} is not a class of this model")
        key = self.raw_rows[index].key
        change = self.desk.set_mark(key, label, reviewer)
        if change is not None:
            self._changed(change)
        return self.marks.get(key)

    def undo(self, redo: bool = False) -> MarkChange | None:
        """Take the last mark change back, or make the last undone one again (``redo``); None when
        there is none. Raises OSError as :meth:`review` does."""
        change = self.desk.undo(redo)
        if change is not None:
            self._changed(change)
        return change

    def _changed(self, change: MarkChange) -> None:
        """A mark changed: its row, the rows a changed rule decides otherwise, the queue and the certificates."""
        self._sync_rule()
        self._refresh([self.desk.index_of(change.key)])
        self._queue_dirty = False
        self.queue_changed.emit(self.desk.queue_state())
        self.certificates_changed.emit(self.desk.lines())
        self._say_outlook()

    def start_queue(self) -> QueueState:
        """The review queue, a comparison started on the images so far when none is open."""
        queue = self.desk.start()
        self._sync_rule()
        self.queue_changed.emit(queue)
        self.certificates_changed.emit(self.desk.lines())
        self._say_outlook()
        return queue

    def _sync_rule(self) -> None:
        """Show every row again when the site's reviews moved the rule in use (a revert, a promotion,
        or an undo taking one back), and announce each comparison decided."""
        for line in self.desk.take_decided():
            self.review_decided.emit(line)
        if self.desk.moved_rules == self._moved:
            # the same rules: rows whose call a certificate now covers (or no longer does) change
            shown = [i for i, row in enumerate(self.rows) if row.decision_path == DecisionPath.PROVISIONAL]
            now = self.desk.provisional_rows()
            changed = set(shown) ^ set(np.flatnonzero(now[: len(self.rows)]).tolist())
            if changed:
                self._refresh(sorted(changed))
            return
        self._moved, self._queue_dirty = self.desk.moved_rules, True
        self._refresh(range(len(self.raw_rows)))

    def _refresh(self, indices: Iterable[int]) -> None:
        """Show the rows at ``indices`` again as :meth:`effective` makes them."""
        changes, decided = [], False
        for index in indices:
            old, row = self.rows[index], self.effective(self.raw_rows[index])
            self.rows[index] = row
            decided |= old.prediction != row.prediction or old.positive_prob != row.positive_prob
            self.stats.set_truth(index, self._plot_truth(self.raw_rows[index]))
            self._tally(index)
            self._show_tile(row)
            changes.append(RowChange(index, row, self.review_of(row.position)))
        if not changes:
            return
        if decided:  # the statistics follow the decisions shown
            self.stats.clear()
            self.stats.extend(self.rows, [self._plot_truth(r) for r in self.raw_rows])
        shown = {c.row.position: c.row for c in changes}
        self._unshown = [shown.get(r.position, r) for r in self._unshown]
        self.rows_changed.emit(changes)
        self._plots_dirty = self._summary_dirty = True

    # -- truths: what the rows are measured against, and each row as shown ------------------------
    @property
    def marks(self) -> dict[str, ReviewMark]:
        return self.desk.marks  # review marks by item key, in the order they were made

    def _plot_truth(self, raw: PredictionRow) -> int | None:
        """The truth the plots measure ``raw`` against: the dataset's where it labels any image, else the mark."""
        if self.dataset_labelled:
            return raw.ground_truth
        mark = self.marks.get(raw.key)
        return None if mark is None else mark.label

    def set_gate(self, warnings: Sequence[tuple[str, str]]) -> None:
        """The engine's applicability gate fired with ``warnings`` (``(check, message)`` pairs) for
        this source (none: it did not); the figures shown so far are shown again, marked."""
        self.gate = [message for _, message in warnings]
        self.gate_checks = [check for check, _ in warnings]
        if self.rows:
            self.metrics_changed.emit(self.figures())
            self.plots_changed.emit(self.plot_data())  # the plots carry the mark too

    def _measure_against_dataset(self) -> None:
        """The rows carry dataset labels after all: the plots measure against them from now on."""
        self.dataset_labelled, self.stats.truth = True, "dataset labels"
        self.stats.clear()
        self.stats.extend(self.rows, [self._plot_truth(r) for r in self.raw_rows])

    def plot_data(self) -> PlotData:
        """What the plots draw, with the caption every figure carries when the gate fired."""
        return dataclasses.replace(self.stats.plot_data(), caption=self.figures().caption)

    def figures(self) -> Figures:
        """The figures against the dataset's labels and against the reviewers' marks, kept apart,
        with the applicability warnings that fired (the gate's and a one-class collapse)."""
        collapsed = self.collapse is not None
        gate = [*self.gate, *([self.collapse.text()] if self.collapse is not None else [])]
        checks = [*self.gate_checks, *(["collapse"] if collapsed else [])]
        return self.tally.figures(gate, checks, review_tally(self.marks.values(), self._decision_now))

    def _decision_now(self, key: str) -> int | None:
        """The decision the row of ``key`` shows now (None: no such row)."""
        return self.rows[self.desk.index_of(key)].prediction if self.desk.has(key) else None

    def _tally(self, index: int) -> None:
        """The figures count the row at ``index`` as it is shown now (its decision, its dataset
        label and its mark): what it counted before is taken away (O(1), see :mod:`app.core.figure_tally`)."""
        raw = self.raw_rows[index]
        mark = self.marks.get(raw.key)
        self.tally.set_row(index, self.rows[index], raw.ground_truth, None if mark is None else mark.label)
        self.watch.set_row(index, self.rows[index])

    def disagreement(self, position: int, label: int) -> tuple[str, str] | None:
        """``(dataset's class, marked class)`` when marking the image at ``position`` as ``label``
        would disagree with its dataset label; None when it agrees, the image has no label, or the
        image already carries that mark."""
        index = self._row_of_position.get(position)
        if index is None or not 0 <= label < len(self.classes):
            return None
        raw = self.raw_rows[index]
        mark = self.marks.get(raw.key)
        if (
            raw.ground_truth is None
            or raw.ground_truth == label
            or (mark is not None and mark.label == label)
        ):
            return None
        return raw.truth_label or str(raw.ground_truth), self.classes[label]

    def effective(self, row: PredictionRow) -> PredictionRow:
        """``row`` as shown (:meth:`ReviewDesk.row_shown`)."""
        return self.desk.row_shown(row, self.classes, self.stats.positive_class)

    def reported(self, index: int) -> PredictionRow:
        """The row at ``index`` as reports give it (:meth:`ReviewDesk.row_reported`)."""
        return self.desk.row_reported(
            self.rows[index], self.raw_rows[index], self.classes, self.stats.positive_class
        )

    def review_of(self, position: int) -> ReviewNote:
        """The review column's text and tooltip for the row at ``position``."""
        index = self._row_of_position.get(position)
        if index is None:
            return ReviewNote()
        raw = self.raw_rows[index]
        return review_note(
            self.marks.get(raw.key), self.classes, self.rows[index].prediction, raw.truth_label
        )

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
        name, overlay, review = (
            source.items[position].name,
            self.overlays.get(position),
            self.review_of(position).text,
        )
        self.selection_changed.emit(
            Selection(position, name, row, preview, overlay, self.heat_levels, keep_view, review)
        )
        if preview is None:
            self.preview_needed.emit(position)

    def preview_loaded(self, position: int, image: np.ndarray) -> None:
        self.previews.put(position, image)
        if position == self.selected:
            self.select(position)

    def set_low_confidence(self, value: float) -> None:
        self.low_confidence = value
        self.stats.low_confidence = value
