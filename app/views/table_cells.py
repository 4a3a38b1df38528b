"""The prediction table's cells as the view paints them: one call into Python a cell.

Qt's item delegate asks the model for seven roles of every visible cell at every repaint (text,
alignment, colours, font, check state, decoration), each a call from C++ into Python; with the
engine's thread holding the interpreter between its own calls, each of those waits its turn, and
the table's repaints were the longest stalls of the window during a run (issue 30). This delegate
fills the style option from :meth:`PredictionTableModel.cell` in one call instead, and keeps the
plain-text tooltips of :class:`~app.views._plain.PlainToolTips`.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QPalette
from PySide6.QtWidgets import QStyleOptionViewItem, QWidget

from app.views._plain import PlainToolTips
from app.views.table_model import PredictionTableModel

HAS_DISPLAY = QStyleOptionViewItem.ViewItemFeature.HasDisplay
ELIDE_RIGHT, ELIDE_MIDDLE = Qt.TextElideMode.ElideRight, Qt.TextElideMode.ElideMiddle
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter  # numbers: "#" and the confidence
NO_BRUSH = QBrush()


class TableCells(PlainToolTips):
    """Fills each cell's style option from the table model in one call (see the module notes).

    Args:
        model: the table's model (its rows, as the proxy's source).
        proxy: the sort and filter proxy the view shows.
        parent: the view.
    """

    def __init__(self, model: PredictionTableModel, proxy: QSortFilterProxyModel, parent: QWidget) -> None:
        super().__init__(parent)
        self._model, self._proxy = model, proxy

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        source = self._proxy.mapToSource(index)
        if not source.isValid():
            super().initStyleOption(option, index)
            return
        text, right, foreground, background = self._model.cell(source.row(), source.column())
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
        keeps_start = self._model.keeps_start(source.row(), source.column())
        option.textElideMode = ELIDE_RIGHT if keeps_start else ELIDE_MIDDLE
        option.backgroundBrush = background if background is not None else NO_BRUSH
