"""The prediction table's Qt model and its sort/filter proxy (rows are :class:`PredictionRow`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QBrush, QColor

from app._engine import DecisionPath, describe_decision, shown
from app.core.certificates import QueueState, ReviewedRow, decided_by
from app.core.filters import PredictionRow, RowFilter
from app.core.run_items import ReviewNote
from app.core.uncertainty import UncertaintyRanks

COLUMNS = (
    "#",
    "Item",
    "Prediction",
    "Conf.",
    "Source",
    "Decided by",
    "Uncert.",
    "Truth",
    "Agreement",
    "Review",
)
HEADER_TIPS = (
    "Arrival order within this folder or slide (1 = first image)",
    "File, or the slide tile's grid row and column (its level-0 position in the tooltip)",
    "The decision: the original model's, or that of the rule your answers in the review queue showed better",
    "Confidence in the decision",
    "The original model's call, the model as it was trained (→: the decision differs from it)",
    "Who decides the image: the original model, the site threshold (unreviewed: reported without "
    "review), or the rule your answers in the review queue showed better (best-fit threshold, site "
    "threshold, appearance correction, class-balance correction, adapted network (I-DiPT); the "
    "Certificates tab says what they showed). 'provisional: ': the rule's call on an image that arrived "
    "after the images your answers covered; reports give the rule below it until your answers cover it. "
    "The row's tooltip gives the reason (for example, that a site threshold awaits your review)",
    "Uncertainty ranked within this folder or slide: high = its top 10 %, low = below the median",
    "Ground truth: a review mark, else the folder's labels",
    "The decision against the ground truth",
    "Your review mark, as you made it: ✓ you confirmed the decision on screen; ✎ you corrected it "
    "(the decision on screen → your class). Its tooltip says who and when",
)
GROUP_COLUMN, AGREEMENT_COLUMN, REVIEW_COLUMN = 5, 8, 9
UNCERTAINTY_COLUMN = 6  # shown as low/medium/high within the site (app.core.uncertainty)
#: The uncertainty column of a row whose map has not come (the maps follow the decisions).
MAP_WORDS = {"pending": "pending", "unreadable": "no map"}
MAP_TIPS = {
    "pending": "The uncertainty map of this image is not made yet: the maps follow the decisions, in order",
    "unreadable": "No uncertainty map: the image could not be read again for it (its decision is kept)",
}
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CHANGED_BRUSH = QBrush(QColor(255, 244, 204))  # rows whose prediction adaptation changed
WRONG_BRUSH = QBrush(QColor(190, 30, 45))
RIGHT_BRUSH = QBrush(QColor(30, 130, 60))

Index = QModelIndex | QPersistentModelIndex
RIGHT_ALIGN = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
#: A cell as the delegate paints it: text, right-aligned, text colour, background (None: the default).
Cell = tuple[str, bool, QBrush | None, QBrush | None]


def _fmt(value: float, digits: int = 3) -> str:
    return "" if not math.isfinite(value) else f"{value:.{digits}f}"


class PredictionTableModel(QAbstractTableModel):
    """One row per processed image, appended in batches."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[PredictionRow] = []
        # Display strings, formatted once per row when it is first shown (None: not yet): a batch
        # of rows is appended without formatting the many that scroll past unseen.
        self._texts: list[tuple[str, ...] | None] = []
        self._reviews: dict[int, ReviewNote] = {}  # the review column by row
        self.review_updates = 0  # review texts set so far (a mark the reviewer declined sets none)
        self.uncertainty = UncertaintyRanks()  # the rows' uncertainties, to rank each within the site
        self.queue = QueueState({})  # the review queue's order
        self.in_arrival_order = True  # the rows' positions ascend: "#" sorts as the rows are kept

    def rowCount(self, parent: Index | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section]
            if role == Qt.ItemDataRole.ToolTipRole:
                return HEADER_TIPS[section]
        return None

    def text(self, row: int, column: int) -> str:
        """What the cell at (``row``, ``column``) shows."""
        if column == REVIEW_COLUMN:
            return self.review_at(row)
        if column == UNCERTAINTY_COLUMN:  # ranked among the rows so far: not cached
            shown = self._rows[row]
            return MAP_WORDS.get(shown.map_status) or self.uncertainty.band(shown.uncertainty)
        if column == GROUP_COLUMN:
            return decided_by(self._rows[row])
        texts = self._texts[row]
        if texts is None:
            texts = self._texts[row] = tuple(self._display(self._rows[row], c) for c in range(len(COLUMNS)))
        return texts[column]

    def cell(self, row: int, column: int) -> Cell:
        """The cell's text, whether it is right-aligned (a number), its text colour and its
        background, in one call (the table's delegate paints from it: one call a cell instead of
        one a role, see :mod:`app.views.table_cells`)."""
        data = self._rows[row]
        foreground = None
        if column in (AGREEMENT_COLUMN, REVIEW_COLUMN) and data.ground_truth is not None:
            foreground = RIGHT_BRUSH if data.correct else WRONG_BRUSH
        return self.text(row, column), column in (0, 3), foreground, CHANGED_BRUSH if data.changed else None

    def keeps_start(self, row: int, column: int) -> bool:
        """Whether the cell is elided at its end (its start says the most): a review mark, and a
        provisional row's Decided by ("provisional: best-fit th…"); other cells keep both ends."""
        if column == REVIEW_COLUMN:
            return True
        data = self._rows[row]
        return column == GROUP_COLUMN and isinstance(data, ReviewedRow) and data.provisional

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # The delegate paints from cell(); this serves sorting, tooltips, tests and accessibility.
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(index.row(), index.column())
        if role == SORT_ROLE:
            if index.column() == REVIEW_COLUMN:
                return self.review_at(index.row())
            return self._sort_key(self._rows[index.row()], index.column())
        if role == Qt.ItemDataRole.BackgroundRole:
            return CHANGED_BRUSH if self._rows[index.row()].changed else None
        if role == Qt.ItemDataRole.ForegroundRole and index.column() in (AGREEMENT_COLUMN, REVIEW_COLUMN):
            correct = self._rows[index.row()].correct
            return None if correct is None else RIGHT_BRUSH if correct else WRONG_BRUSH
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (0, 3):
            return RIGHT_ALIGN
        if role == Qt.ItemDataRole.ToolTipRole:
            if index.column() == UNCERTAINTY_COLUMN:
                shown = self._rows[index.row()]
                return MAP_TIPS.get(shown.map_status) or self.uncertainty.describe(shown.uncertainty)
            if index.column() == REVIEW_COLUMN:
                review = self._reviews.get(index.row())
                if review is None:
                    return "Not reviewed (C confirms, X corrects)"
                return f"Your review mark: {review.text}\n{review.detail}"
            return self._tooltip(self._rows[index.row()])
        return None

    @staticmethod
    def _tooltip(row: PredictionRow) -> str:
        tip = f"#{row.position + 1} {shown(row.name)} (CSV index {row.index}, counted from 0)"
        reviewed = row.decision_path in (DecisionPath.REVIEWED, DecisionPath.PROVISIONAL)
        tip += f"\ndecision: {row.prediction_label} ({row.confidence:.3f})"
        tip += f"\noriginal model: {row.source_label} ({row.source_confidence:.3f})"
        if row.changed:  # who changed it: "adaptation" read wrong beside the reviews' rule's reason
            tip += (
                "\nthe rule your answers showed better changed it"
                if reviewed
                else "\nadaptation changed the original model's call"
            )
        if reviewed:  # what adapting decided, and why the review's rule decides (or calls it, provisionally)
            tip += f"\n{row.decision_reason}"
        elif row.decision_path:
            tip += f"\n{describe_decision(row)}"
        if row.update_skipped:
            tip += "\nupdate skipped: non-finite loss or gradient"
        if row.guard_message:
            tip += f"\n{row.guard_message}"
        if row.restored:
            tip += "\n(processed in an earlier session)"
        return tip

    @staticmethod
    def _display(row: PredictionRow, col: int) -> str:
        if col == 0:
            return str(row.position + 1)
        if col == 1:
            if row.tile is not None:  # its grid position; the level-0 corner is in the tooltip
                return (
                    f"tile r{row.tile[1] + 1} c{row.tile[0] + 1}"  # as engine.io.tile_plan.Tile.label: from 1
                )
            return shown(row.name)  # Qt drops bytes that are not UTF-8 and lays out bidi controls
        if col == 2:
            return row.prediction_label
        if col == 3:
            return _fmt(row.confidence)
        if col == 4:
            return row.source_label + (" →" if row.changed else "")
        if col == 6:
            return _fmt(row.uncertainty, 4)
        if col == 7:
            return row.truth_label or ""
        if col == AGREEMENT_COLUMN:
            return row.agreement
        return ""

    @staticmethod
    def _sort_key(row: PredictionRow, col: int) -> Any:
        if col == 0:
            return row.position
        if col == 1:
            return (row.tile[1], row.tile[0]) if row.tile else row.name.lower()
        if col == 3:
            return row.confidence
        if col == GROUP_COLUMN:
            return decided_by(row)
        if col == 6:
            return row.uncertainty if math.isfinite(row.uncertainty) else -1.0
        return PredictionTableModel._display(row, col)

    # -- mutation -----------------------------------------------------------------------------
    def append_rows(self, rows: Sequence[PredictionRow]) -> None:
        if not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        last = self._rows[-1].position if self._rows else -1
        for row in rows:
            self.in_arrival_order &= row.position > last
            last = row.position
        self._rows.extend(rows)
        self.uncertainty.add(r.uncertainty for r in rows)
        self._texts.extend([None] * len(rows))
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self._rows = []
        self._texts = []
        self._reviews = {}
        self.in_arrival_order = True
        self.uncertainty.clear()
        self.queue = QueueState({})
        self.endResetModel()

    def replace_row(self, index: int, row: PredictionRow, review: ReviewNote) -> None:
        """Show ``row`` (its ground truth changed) with its review mark at ``index``."""
        if not 0 <= index < len(self._rows):
            return
        if math.isnan(self._rows[index].uncertainty):  # its map arrived (maps behind the decisions)
            self.uncertainty.add([row.uncertainty])
        self._rows[index] = row
        self._texts[index] = None
        self.review_updates += 1
        if review.text:
            self._reviews[index] = review
        else:
            self._reviews.pop(index, None)
        self.dataChanged.emit(self.index(index, 0), self.index(index, len(COLUMNS) - 1))

    def set_reviews(self, reviews: dict[int, ReviewNote]) -> None:
        """The review column of many rows at once (a source opens with earlier marks)."""
        self._reviews.update(reviews)
        if self._rows:
            self.dataChanged.emit(
                self.index(0, REVIEW_COLUMN), self.index(len(self._rows) - 1, REVIEW_COLUMN)
            )

    def set_queue(self, queue: QueueState) -> None:
        """The review queue's order (the rows name the rule that decides them: the Decided by column)."""
        self.queue = queue

    @property
    def has_reviews(self) -> bool:
        """Some row has a review mark."""
        return bool(self._reviews)

    def review_at(self, index: int) -> str:
        """The review column's text of the row at ``index`` (empty: no mark)."""
        review = self._reviews.get(index)
        return "" if review is None else review.text

    def row_at(self, source_row: int) -> PredictionRow:
        return self._rows[source_row]

    @property
    def rows(self) -> list[PredictionRow]:
        return self._rows


class PredictionFilterProxy(QSortFilterProxyModel):
    """Sorts with :data:`SORT_ROLE` and keeps the rows a :class:`RowFilter` accepts."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._filter = RowFilter()
        self._column = -1  # the column the user sorts by ("#" may be sorted as the rows are kept)
        # Rows marked while the review queue is shown, in the order they were marked: they stay
        # in its view, above the images still to review (a mark left the view the moment it was
        # made, and with it what the reviewer had just done).
        self.marked_in_queue: dict[int, int] = {}
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)

    @property
    def row_filter(self) -> RowFilter:
        return self._filter

    def set_row_filter(self, row_filter: RowFilter) -> None:
        resort = "queue" in (row_filter.mode, self._filter.mode)  # into, within or out of the queue's order
        if row_filter.mode == "queue" and self._filter.mode != "queue":
            self.marked_in_queue.clear()  # a queue view opened afresh lists what is left to review
        self.beginFilterChange()
        self._filter = row_filter
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        if resort:
            column = self._sort_column(self._column)
            if column == self.sortColumn():
                self.invalidate()
            else:
                super().sort(column, self.sortOrder())

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column``; by "#" (arrival order), the rows stay in the order the model keeps
        them, so rows that arrive are placed without comparing them (each comparison is a call
        into Python: with the rows' comparisons the table took most of the UI thread's time)."""
        self._column = column
        super().sort(self._sort_column(column), order)

    def keep_order(self) -> None:
        """Rows arrived out of arrival order (restored rows of a folder reordered since): "#" is
        sorted by comparing the rows from now on."""
        if self.sortColumn() != self._sort_column(self._column):
            super().sort(self._sort_column(self._column), self.sortOrder())

    def _sort_column(self, column: int) -> int:
        model = self.sourceModel()
        arrival = isinstance(model, PredictionTableModel) and model.in_arrival_order
        return -1 if column == 0 and arrival and self._filter.mode != "queue" else column

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, PredictionTableModel):
            return True
        queued = source_row in model.queue.ranks or self.marked_here(model, source_row)
        return self._filter.accepts(model.row_at(source_row), bool(model.review_at(source_row)), queued)

    def keep_in_queue(self, source_row: int) -> None:
        """The row at ``source_row`` is being marked in the queue's view: it stays there, after the
        rows marked before it and before those still to review."""
        self.marked_in_queue.setdefault(source_row, len(self.marked_in_queue))

    def marked_here(self, model: PredictionTableModel, source_row: int) -> bool:
        """The row was marked in the queue's view and keeps its mark (an undo puts it back among
        the images to review)."""
        return source_row in self.marked_in_queue and bool(model.review_at(source_row))

    def _queue_rank(self, model: PredictionTableModel, source_row: int) -> tuple[int, int]:
        """Where the row goes in the queue's view: the rows marked there first, then the queue's
        own order."""
        if self.marked_here(model, source_row):
            return 0, self.marked_in_queue[source_row]
        ranks = model.queue.ranks
        return 1, ranks.get(source_row, len(ranks))

    def lessThan(self, left: Index, right: Index) -> bool:
        model = self.sourceModel()
        if self._filter.mode == "queue" and isinstance(model, PredictionTableModel):
            # the queue's own order, whatever column was sorted
            return self._queue_rank(model, left.row()) < self._queue_rank(model, right.row())
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        try:
            return bool(a < b)
        except TypeError:
            return str(a) < str(b)
