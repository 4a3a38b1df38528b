"""The prediction table's view, painting its visible cells in one Python loop.

Qt's table view calls its delegate once a cell from C++, each call handing a wrapped painter,
style option and index to Python, which reads the option's rectangle and state back: with every
cell copied from a kept pixmap (:mod:`app.views.table_cells`), a repaint of 230 cells (23 rows)
cost 10 ms of the GUI thread's time, 3 ms of it with a delegate that does nothing, and a run that
follows its newest rows repaints every visible cell at every batch (issue 41). :class:`CellTable`
paints what Qt's ``QTableView::paintEvent`` paints (each cell as its ``drawCell`` would, then the
grid) in one loop over the visible rows and columns that copies each kept cell's pixmap: 4.4 ms
for the same 230 cells. A cell not kept yet is drawn by the delegate as before. Anything the loop
does not know (spans, right-to-left, alternating rows, hidden or moved rows, rows not selected
whole, another delegate, a style that draws the grid's left and top lines) is painted by Qt;
``tests/test_gui_table_paint.py`` compares the two pixel for pixel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from PySide6.QtCore import QLineF, QModelIndex, QPointF, QRect, Qt
from PySide6.QtGui import QColor, QCursor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QAbstractItemView, QStyle, QStyleOptionViewItem, QTableView

from app.views.table_cells import TableCells

SELECTED = QStyle.StateFlag.State_Selected
ENABLED = QStyle.StateFlag.State_Enabled


class CellTable(QTableView):
    """A :class:`QTableView` whose repaints copy :class:`TableCells`' pixmaps in one loop (see the
    module notes).

    Attributes:
        fast: paint with the loop where it applies (False: Qt paints every repaint).
        fast_paints: repaints the loop made (the others were Qt's).
    """

    def __init__(self) -> None:
        super().__init__()
        self.fast = True
        self.fast_paints = 0

    def _plain(self, cells: object) -> bool:
        """Whether the loop paints as Qt would: nothing it does not know is set."""
        rows = self.verticalHeader()
        return (
            self.fast
            and isinstance(cells, TableCells)
            and self.showGrid()
            and not self.alternatingRowColors()
            and not self.isRightToLeft()
            and not self.rootIndex().isValid()
            and self.selectionBehavior() is QAbstractItemView.SelectionBehavior.SelectRows
            and self.columnSpan(0, 0) == 1  # no spans set (the table sets none)
            and not rows.sectionsHidden()
            and not rows.sectionsMoved()
            and not self.style().styleHint(QStyle.StyleHint.SH_Table_AlwaysDrawLeftTopGridLines, None, self)
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        cells = self.itemDelegate()
        model = self.model()
        if not self._plain(cells) or model is None or not isinstance(cells, TableCells):
            super().paintEvent(event)
            return
        if self.horizontalHeader().count() == 0 or self.verticalHeader().count() == 0:
            return
        self.fast_paints += 1
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        if option.state & ENABLED:  # as drawCell: every cell of this model is enabled
            option.palette.setCurrentColorGroup(QPalette.ColorGroup.Normal)
        pen = QPen(self._grid_color(option), 1, self.gridStyle())
        drawn: set[tuple[int, int]] = set()  # (row, column): a cell in two of the region's rectangles
        painter = QPainter(self.viewport())
        try:
            # Each rectangle of the region, as Qt paints it: a row deselected at the top and one
            # selected at the bottom are two rows, not all the rows between them.
            for area in cast("Iterable[QRect]", event.region()):  # PySide6 iterates a region
                self._paint_area(painter, (cells, option, pen), QRect(area), drawn)
        finally:
            painter.end()

    def _paint_area(
        self,
        painter: QPainter,
        how: tuple[TableCells, QStyleOptionViewItem, QPen],
        area: QRect,
        drawn: set[tuple[int, int]],
    ) -> None:
        """The cells in ``area`` not ``drawn`` yet, then the grid's lines across it (``how``: the
        delegate, the view's option for every cell and the grid's pen)."""
        cells, option, pen = how
        columns, rows = self.horizontalHeader(), self.verticalHeader()
        # The area holding cells: to the last column's and the last row's end (Qt's x and y).
        area.setRight(min(area.right(), columns.length() - columns.offset() - 1))
        area.setBottom(min(area.bottom(), rows.length() - rows.offset() - 1))
        if not area.isValid():
            return
        left, right = columns.visualIndexAt(area.left()), columns.visualIndexAt(area.right())
        left, right = max(left, 0), right if right >= 0 else columns.count() - 1
        top, bottom = rows.visualIndexAt(area.top()), rows.visualIndexAt(area.bottom())
        bottom = bottom if bottom >= 0 else rows.count() - 1
        if top < 0 or top > bottom:
            return
        grid = 1  # the grid is shown: each cell gives its last row and column of pixels to it
        shown = [
            (c, self.columnViewportPosition(c), self.columnWidth(c) - grid)
            for c in (columns.logicalIndex(v) for v in range(left, right + 1))
            if not columns.isSectionHidden(c)
        ]
        lines: list[int] = []
        for row in range(top, bottom + 1):  # rows are neither hidden nor moved (_plain)
            y, height = self.rowViewportPosition(row), self.rowHeight(row) - grid
            lines.append(y + height)
            todo = [c for c in shown if (row, c[0]) not in drawn]
            drawn.update((row, c[0]) for c in todo)
            if todo:
                self._paint_row(painter, cells, option, row, y, height, todo)
        painter.setPen(pen)
        half = QPointF(0.5, 0.5)
        for y in lines:
            painter.drawLine(QLineF(area.left(), y, area.right(), y).translated(half))
        for _, x, width in shown:
            painter.drawLine(QLineF(x + width, area.top(), x + width, area.bottom()).translated(half))

    def _grid_color(self, option: QStyleOptionViewItem) -> QColor:
        hint = self.style().styleHint(QStyle.StyleHint.SH_Table_GridLineColor, option, self)
        return QColor.fromRgba(hint & 0xFFFFFFFF)

    def _paint_row(
        self,
        painter: QPainter,
        cells: TableCells,
        option: QStyleOptionViewItem,
        row: int,
        y: int,
        height: int,
        shown: list[tuple[int, int, int]],
    ) -> None:
        """One row's cells, each with the state Qt's ``drawCell`` gives it."""
        model = self.model()
        selection = self.selectionModel()
        state = option.state
        if selection is not None and selection.isRowSelected(row, QModelIndex()):
            state |= SELECTED
        current = self.currentIndex()
        focus = current.isValid() and current.row() == row and (self.hasFocus() or self.viewport().hasFocus())
        states = (state, current.column() if focus else -1, self._hover_column(row))
        at = (cells.source_row(model.index(row, 0)), row, y, height)
        cells.paint_row(painter, option, at, states, shown)

    def _hover_column(self, row: int) -> int:
        """The column of the cell under the mouse in ``row`` (-1: none), as Qt's hover index."""
        viewport = self.viewport()
        if not viewport.testAttribute(Qt.WidgetAttribute.WA_Hover) or not viewport.underMouse():
            return -1  # Qt follows the hover only where the viewport gets hover events
        index = self.indexAt(viewport.mapFromGlobal(QCursor.pos()))
        return index.column() if index.isValid() and index.row() == row else -1
