"""The prediction table paints its cells in one loop (app/views/table_paint.py, issue 41): what it
paints is what Qt's own table view paints, pixel for pixel, in the states a run and a review put
the table in (the newest row selected with the focus, scrolled sideways, sorted the other way,
filtered, a column moved). Counted and compared, never timed."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable
from typing import Any

import pytest
from controller_fakes import shown
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QImage, QRegion
from PySide6.QtWidgets import QApplication
from test_gui_load_rows import rows

from app.core.filters import RowFilter
from app.views.table_cells import TableCells
from app.views.table_view import PredictionTable


def painted(table: PredictionTable, fast: bool) -> QImage:
    """The viewport as the loop (``fast``) or Qt paints it; the loop's cells drawn, kept and
    copied (three grabs) so that each of the delegate's ways is compared."""
    view = table.table
    view.fast = fast
    before = view.fast_paints
    images = [view.viewport().grab().toImage() for _ in range(3)]
    assert images[0] == images[1] == images[2]
    assert (view.fast_paints > before) is fast  # the loop painted, or Qt did
    view.fast = True
    return images[0]


def focused(table: PredictionTable) -> None:
    table.activateWindow()
    table.table.setFocus()
    table.table.selectRow(table.proxy.rowCount() - 2)
    QApplication.processEvents()
    assert table.table.hasFocus() and table.table.currentIndex().isValid()


def sideways(table: PredictionTable) -> None:
    table.resize(420, 300)
    QApplication.processEvents()
    bar = table.table.horizontalScrollBar()
    bar.setValue(bar.maximum() // 2 + 7)  # a column cut at the left edge
    table.table.selectRow(3)
    QApplication.processEvents()


def reversed_order(table: PredictionTable) -> None:
    table.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
    table.table.selectRow(1)
    QApplication.processEvents()


def filtered(table: PredictionTable) -> None:
    table.set_filter(RowFilter(mode="all", text="img1"))
    QApplication.processEvents()
    assert 0 < table.proxy.rowCount() < table.model.rowCount()


@pytest.mark.parametrize("state", [focused, sideways, reversed_order, filtered])
def test_the_loop_paints_what_qt_paints(qtbot: object, state: Callable[[PredictionTable], None]) -> None:
    table = shown(qtbot, PredictionTable(), 800, 400)
    table.append_rows(rows(0, 60))
    for _ in range(3):
        QApplication.processEvents()
    state(table)
    assert painted(table, fast=True) == painted(table, fast=False)


def test_qt_paints_what_the_loop_does_not_know(qtbot: object) -> None:
    """Alternating rows (which the table does not use) are left to Qt."""
    table = shown(qtbot, PredictionTable(), 800, 400)
    table.append_rows(rows(0, 20))
    QApplication.processEvents()
    table.table.setAlternatingRowColors(True)
    before = table.table.fast_paints
    table.table.viewport().grab()
    assert table.table.fast_paints == before


def test_a_region_of_two_rows_paints_those_rows_as_qt_does(qtbot: object, monkeypatch: object) -> None:
    """A region of two rectangles (the row deselected at the top, the one selected at the
    bottom) paints the cells of those two rows, not those between them, and as Qt does."""
    table = shown(qtbot, PredictionTable(), 800, 400)
    table.append_rows(rows(0, 60))
    table.follow_box.setChecked(False)
    table.table.scrollToTop()
    QApplication.processEvents()
    view = table.table
    first, last = view.rowViewportPosition(0), view.rowViewportPosition(10)
    width, height = view.viewport().width(), view.rowHeight(0)
    region = QRegion(QRect(0, first, width, height)) + QRegion(QRect(0, last, width, height))
    painted_rows: list[int] = []
    paint_row = TableCells.paint_row

    def counted(self: TableCells, *args: Any) -> None:
        painted_rows.append(args[2][1])
        paint_row(self, *args)

    monkeypatch.setattr(TableCells, "paint_row", counted)  # type: ignore[attr-defined]
    images = []
    for fast in (True, False):
        view.fast = fast
        image = QImage(view.viewport().size(), QImage.Format.Format_ARGB32)
        image.fill(0)
        view.viewport().render(image, QPoint(), region)
        images.append(image)
    assert sorted(painted_rows) == [0, 10]
    assert images[0] == images[1]
