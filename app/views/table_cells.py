"""The prediction table's cells as the view paints them: one call into Python a cell, and each
distinct cell drawn once.

Qt's item delegate asks the model for seven roles of every visible cell at every repaint (text,
alignment, colours, font, check state, decoration), each a call from C++ into Python; with the
engine's thread holding the interpreter between its own calls, each of those waits its turn, and
the table's repaints were the longest stalls of the window during a run (issue 30). This delegate
fills the style option from :meth:`PredictionTableModel.cell` in one call instead, and keeps the
plain-text tooltips of :class:`~app.views._plain.PlainToolTips`.

Laying out and drawing a cell's text was still most of a repaint (about 16 ms of the GUI thread's
time for the 160 cells of a 1280×800 window, issue 41): the rows arrive at the bottom while the
table follows them, so every new batch repaints every visible cell. A cell is drawn the way Qt
draws it once, into a pixmap kept under what it shows (text, alignment, colours, size, state);
the repaints after that copy the pixmap. Most cells repeat (a class name, a confidence, who
decided), so a batch of new rows draws few cells afresh. The view
(:class:`~app.views.table_paint.CellTable`) asks for a row of cells at a time
(:meth:`TableCells.paint_row`) instead of one call from C++ a cell.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRect,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QBrush, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QApplication, QStyle, QStyleOptionViewItem, QWidget

from app.views._plain import PlainToolTips
from app.views.table_model import GROUP_COLUMN, REVIEW_COLUMN, Cell, PredictionTableModel

PAINT = QEvent.Type.Paint
HAS_DISPLAY = QStyleOptionViewItem.ViewItemFeature.HasDisplay
ELIDE_RIGHT, ELIDE_MIDDLE = Qt.TextElideMode.ElideRight, Qt.TextElideMode.ElideMiddle
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter  # numbers: "#" and the confidence
NO_BRUSH = QBrush()
HAS_FOCUS, MOUSE_OVER = QStyle.StateFlag.State_HasFocus, QStyle.StateFlag.State_MouseOver
NO_STATE = QStyle.StateFlag.State_None
KEEPS_START_COLUMNS = (GROUP_COLUMN, REVIEW_COLUMN)  # the only ones PredictionTableModel.keeps_start names
#: Cells kept drawn: a 1920×1080 window shows about 400; a few screens' worth stay for scrolling back.
CACHED_CELLS = 2000
#: What every cell looks different after (the view's events).
REDRAW_ALL = frozenset(
    (
        QEvent.Type.PaletteChange,
        QEvent.Type.FontChange,
        QEvent.Type.StyleChange,
        QEvent.Type.DevicePixelRatioChange,
        QEvent.Type.ScreenChangeInternal,
    )
)


class TableCells(PlainToolTips):
    """Fills each cell's style option from the table model in one call, and draws each distinct
    cell once (see the module notes).

    Args:
        model: the table's model (its rows, as the proxy's source).
        proxy: the sort and filter proxy the view shows.
        parent: the view.

    Attributes:
        drawn: cells drawn afresh so far (the others were copied from :attr:`cells`).
    """

    def __init__(self, model: PredictionTableModel, proxy: QSortFilterProxyModel, parent: QWidget) -> None:
        super().__init__(parent)
        self._model, self._proxy = model, proxy
        self.cells: OrderedDict[Hashable, QPixmap] = OrderedDict()
        self.seen: OrderedDict[Hashable, None] = OrderedDict()  # cells painted once, not kept
        self.drawn = 0
        self._in_order = False  # the view shows every row in the model's order (set at each repaint)
        self._last: tuple[Hashable, Cell, bool] = ((), ("", False, None, None), False)  # _copy's last cell
        parent.installEventFilter(self)
        if isinstance(parent, QAbstractItemView):
            parent.viewport().installEventFilter(self)

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        row, column = self._source(index)
        if row < 0:
            super().paint(painter, option, index)
            return
        if not self._copy(painter, option.rect, option.state.value, row, column):
            self._miss(painter, option, index)

    def paint_row(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        at: tuple[int, int, int, int],
        states: tuple[QStyle.StateFlag, int, int],
        shown: list[tuple[int, int, int]],
    ) -> None:
        """One row of cells as :meth:`paint` draws each after Qt's ``drawCell`` (for the view's
        :class:`~app.views.table_paint.CellTable`, in one call a row): ``at`` is the model's row,
        the view's row, its top and its height, ``states`` the row's state, the columns with the
        focus and the mouse over them (-1: none), ``shown`` each column with its left and width;
        ``option``: the view's option for every cell."""
        row, view_row, y, height = at
        state, focus, hover = states
        value = state.value
        model, kept, keeps_start = self._model, self.cells, False
        for column, x, width in shown:
            if column == focus or column == hover:
                cell_state = state | (HAS_FOCUS if column == focus else NO_STATE)
                cell_state = cell_state | (MOUSE_OVER if column == hover else NO_STATE)
                cell_value = cell_state.value
            else:
                cell_state, cell_value = state, value
            if row >= 0:
                cell = model.cell(row, column)
                keeps_start = column in KEEPS_START_COLUMNS and model.keeps_start(row, column)
                key = (cell[0], cell[1], id(cell[2]), id(cell[3]), keeps_start, width, height, cell_value)
                pixmap = kept.get(key)
                if pixmap is not None:
                    kept.move_to_end(key)
                    painter.drawPixmap(x, y, pixmap)
                    continue
                self._last = (key, cell, keeps_start)
            filled = QStyleOptionViewItem(option)
            filled.rect = QRect(x, y, width, height)
            filled.state = cell_state
            widget = option.widget
            style = widget.style() if widget is not None else QApplication.style()
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewRow, filled, painter, widget)
            index = self._proxy.index(view_row, column)
            if row < 0:
                super().paint(painter, filled, index)
            else:
                self._miss(painter, filled, index)

    def source_row(self, index: QModelIndex) -> int:
        """The model's row of the view's ``index`` (-1: none)."""
        return self._source(index)[0]

    def _copy(self, painter: QPainter, rect: QRect, state: int, row: int, column: int) -> bool:
        """Draw the cell from its pixmap where one is kept; False where it is not."""
        cell = self._model.cell(row, column)
        text, right, foreground, background = cell
        # What the drawn cell shows: the model's cell (its brushes are the model's module constants,
        # told apart by identity), where it is elided, its size and its state (selected, focused,
        # active); the palette, the font and the screen's pixel ratio clear the cells when they
        # change (eventFilter).
        keeps_start = column in KEEPS_START_COLUMNS and self._model.keeps_start(row, column)
        key = (text, right, id(foreground), id(background), keeps_start, rect.width(), rect.height(), state)
        pixmap = self.cells.get(key)
        self._last = (key, cell, keeps_start)
        if pixmap is None:
            return False
        self.cells.move_to_end(key)
        painter.drawPixmap(rect.topLeft(), pixmap)
        return True

    def _miss(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        """The cell :meth:`_copy` last found no pixmap for: drawn as it is the first time it is
        seen (a name, a number may not come again), kept as a pixmap the second time."""
        key, cell, keeps_start = self._last
        if key not in self.seen:
            self.seen[key] = None
            if len(self.seen) > CACHED_CELLS:
                self.seen.popitem(last=False)
            self._draw_cell(painter, option, index, cell, keeps_start)
            return
        pixmap = self._draw(option, index, painter.device().devicePixelRatioF(), cell, keeps_start)
        self.cells[key] = pixmap
        if len(self.cells) > CACHED_CELLS:
            self.cells.popitem(last=False)
        painter.drawPixmap(option.rect.topLeft(), pixmap)

    def _source(self, index: QModelIndex | QPersistentModelIndex) -> tuple[int, int]:
        """The model's row and column of the view's ``index`` (row -1: none). While the view shows
        every row in the model's order (nothing filtered out, no column sorted), they are the
        view's own, read without asking the proxy (each ask is three calls into Python, a cell)."""
        row, column = index.row(), index.column()
        if self._in_order and self._proxy.sortColumn() < 0 and 0 <= row < self._model.rowCount():
            return row, column
        source = self._proxy.mapToSource(index)
        return (source.row(), source.column()) if source.isValid() else (-1, -1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == PAINT:  # once a repaint: whether the view shows every row in the model's order
            self._in_order = self._proxy.rowCount() == self._model.rowCount()
        elif kind in REDRAW_ALL:
            self.cells.clear()
            self.seen.clear()
        return super().eventFilter(watched, event)

    def _draw(
        self,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
        ratio: float,
        cell: Cell,
        keeps_start: bool,
    ) -> QPixmap:
        """The cell as Qt's delegate draws it, on the view's base colour (as the view shows it)."""
        self.drawn += 1
        rect = option.rect
        pixmap = QPixmap(round(rect.width() * ratio), round(rect.height() * ratio))
        pixmap.setDevicePixelRatio(ratio)
        pixmap.fill(option.palette.color(QPalette.ColorRole.Base))
        at_origin = QStyleOptionViewItem(option)
        at_origin.rect = QRect(0, 0, rect.width(), rect.height())
        painter = QPainter(pixmap)
        try:
            self._draw_cell(painter, at_origin, index, cell, keeps_start)
        finally:
            painter.end()
        return pixmap

    def _draw_cell(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
        cell: Cell,
        keeps_start: bool,
    ) -> None:
        """What :class:`QStyledItemDelegate`'s paint does (the option, filled as
        :meth:`initStyleOption` fills it, drawn by the view's style), from the cell already read:
        Qt's paint asks :meth:`initStyleOption` again, a call into Python that reads the cell anew."""
        filled = QStyleOptionViewItem(option)
        self._fill(filled, index, cell, keeps_start)
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, filled, painter, widget)

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        row, column = self._source(index)
        if row < 0:
            super().initStyleOption(option, index)
            return
        self._fill(option, index, self._model.cell(row, column), self._model.keeps_start(row, column))

    def _fill(
        self,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
        cell: Cell,
        keeps_start: bool,
    ) -> None:
        text, right, foreground, background = cell
        if isinstance(index, QModelIndex):
            option.index = index
        else:
            option.index = self._proxy.index(index.row(), index.column())
        if right:
            option.displayAlignment = RIGHT
        if foreground is not None:
            palette = QPalette(option.palette)
            palette.setBrush(QPalette.ColorRole.Text, foreground)
            option.palette = palette
        # The view sets no other feature (no word wrap, no alternating rows, no check boxes or
        # icons): the flag is assigned, not or-ed in (enum arithmetic costs a call a cell).
        option.features = HAS_DISPLAY
        option.text = text
        # The review mark keeps its start ("✓ confirmed · dataset: …"), and so does a provisional
        # call ("provisional: best-fit th…"); names keep both ends.
        option.textElideMode = ELIDE_RIGHT if keeps_start else ELIDE_MIDDLE
        option.backgroundBrush = background if background is not None else NO_BRUSH
