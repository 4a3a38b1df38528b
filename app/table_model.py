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

from app.rows import PredictionRow, RowFilter

COLUMNS = (
    "#",
    "Item",
    "Prediction",
    "Confidence",
    "Source prediction",
    "Uncertainty",
    "Ground truth",
    "Agreement",
)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CHANGED_BRUSH = QBrush(QColor(255, 244, 204))  # rows whose prediction adaptation changed
WRONG_BRUSH = QBrush(QColor(190, 30, 45))
RIGHT_BRUSH = QBrush(QColor(30, 130, 60))

Index = QModelIndex | QPersistentModelIndex
RIGHT_ALIGN = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _fmt(value: float, digits: int = 3) -> str:
    return "" if not math.isfinite(value) else f"{value:.{digits}f}"


class PredictionTableModel(QAbstractTableModel):
    """One row per processed image, appended in batches."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[PredictionRow] = []
        self._texts: list[tuple[str, ...]] = []  # display strings, formatted once per row

    def rowCount(self, parent: Index | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # Called for every visible cell and role at each repaint: keep the common paths short.
        if role == Qt.ItemDataRole.DisplayRole:
            return self._texts[index.row()][index.column()]
        if role == SORT_ROLE:
            return self._sort_key(self._rows[index.row()], index.column())
        if role == Qt.ItemDataRole.BackgroundRole:
            return CHANGED_BRUSH if self._rows[index.row()].changed else None
        if role == Qt.ItemDataRole.ForegroundRole and index.column() == 7:
            correct = self._rows[index.row()].correct
            return None if correct is None else RIGHT_BRUSH if correct else WRONG_BRUSH
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (0, 3, 5):
            return RIGHT_ALIGN
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(self._rows[index.row()])
        return None

    @staticmethod
    def _tooltip(row: PredictionRow) -> str:
        tip = f"{row.name}\nadapted: {row.prediction_label} ({row.confidence:.3f})"
        tip += f"\nsource: {row.source_label} ({row.source_confidence:.3f})"
        if row.changed:
            tip += "\nadaptation changed the prediction"
        if row.update_skipped:
            tip += "\nupdate skipped: non-finite loss or gradient"
        if row.guard_message:
            tip += f"\n{row.guard_message}"
        if row.restored:
            tip += "\n(from an earlier session: no overlay kept)"
        return tip

    @staticmethod
    def _display(row: PredictionRow, col: int) -> str:
        if col == 0:
            return str(row.index)
        if col == 1:
            return row.name
        if col == 2:
            return row.prediction_label
        if col == 3:
            return _fmt(row.confidence)
        if col == 4:
            return row.source_label + (" →" if row.changed else "")
        if col == 5:
            return _fmt(row.uncertainty, 4)
        if col == 6:
            return row.truth_label or ""
        return row.agreement

    @staticmethod
    def _sort_key(row: PredictionRow, col: int) -> Any:
        if col == 0:
            return row.index
        if col == 1:
            return (row.tile[1], row.tile[0]) if row.tile else row.name.lower()
        if col == 3:
            return row.confidence
        if col == 5:
            return row.uncertainty if math.isfinite(row.uncertainty) else -1.0
        return PredictionTableModel._display(row, col)

    # -- mutation -----------------------------------------------------------------------------
    def append_rows(self, rows: Sequence[PredictionRow]) -> None:
        if not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        self._rows.extend(rows)
        self._texts.extend(tuple(self._display(r, c) for c in range(len(COLUMNS))) for r in rows)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self._rows = []
        self._texts = []
        self.endResetModel()

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
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)

    @property
    def row_filter(self) -> RowFilter:
        return self._filter

    def set_row_filter(self, row_filter: RowFilter) -> None:
        self.beginFilterChange()
        self._filter = row_filter
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, PredictionTableModel):
            return True
        return self._filter.accepts(model.row_at(source_row))

    def lessThan(self, left: Index, right: Index) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        try:
            return bool(a < b)
        except TypeError:
            return str(a) < str(b)
