"""The window's work as rows arrive (issue 41, item 4; pytest-qt, offscreen): appending rows paints
the rows appended, not every visible row; the table's cells look as Qt's own delegate draws them
from the model's roles; rows shown before any review do not ask the engine for their rule; the
review's summary is given when rows came, not at every turn of the views' timer. Counted, never
timed (the timings are ``benchmarks/app_overhead.py``'s)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pytest
from app_fixtures import sample_row
from controller_fakes import results_of, shown, window_on_folder
from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QStyledItemDelegate

from app.control.controller import Controller
from app.views.table_view import PredictionTable
from engine import PredictionRow

ROW_HEIGHT = 22  # PredictionTable's rows


def rows(start: int, count: int) -> list[PredictionRow]:
    return [
        sample_row(i, pred=i % 2, src=(i // 3) % 2, truth=(i // 2) % 2, conf=0.6 + (i % 4) / 10)
        for i in range(start, start + count)
    ]


class Paints(QObject):
    """The regions the table's viewport was asked to paint."""

    def __init__(self) -> None:
        super().__init__()
        self.regions: list[QRect] = []

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.regions.append(event.region().boundingRect())  # type: ignore[attr-defined]
        return False


def shown_table(qtbot: object, count: int) -> PredictionTable:
    table = shown(qtbot, PredictionTable(), 800, 400)
    table.append_rows(rows(0, count))
    for _ in range(3):
        QApplication.processEvents()
    return table


def painted_after(table: PredictionTable, new: list[PredictionRow]) -> list[QRect]:
    paints = Paints()
    table.table.viewport().installEventFilter(paints)
    try:
        table.append_rows(new)
        for _ in range(3):
            QApplication.processEvents()
    finally:
        table.table.viewport().removeEventFilter(paints)
    return paints.regions


def test_appended_rows_are_the_only_rows_painted(qtbot: object) -> None:
    table = shown_table(qtbot, 60)
    painted_after(table, rows(60, 5))  # the first scroll to the newest rows
    viewport = table.table.viewport().rect()
    # Following: the rows shown scroll up (their pixels are kept) and the 5 new rows are painted.
    regions = painted_after(table, rows(65, 5))
    assert regions, "the new rows are painted"
    assert all(r.height() <= 5 * ROW_HEIGHT for r in regions), regions
    assert all(r.bottom() == viewport.bottom() for r in regions), "at the bottom, where they arrive"
    newest = table.proxy.mapFromSource(table.model.index(69, 0))
    assert viewport.contains(table.table.visualRect(newest)), "the newest row is in view"
    # Not following, rows below the view paint nothing.
    table.follow_box.setChecked(False)
    table.table.scrollToTop()
    QApplication.processEvents()
    assert painted_after(table, rows(70, 5)) == []
    # Rows placed among those shown (sorted by another column) paint the view again.
    table.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    QApplication.processEvents()
    regions = painted_after(table, rows(75, 5))
    assert any(r.height() == viewport.height() for r in regions), regions


def test_rows_appended_to_a_table_not_yet_full_paint_from_the_first_new_row(qtbot: object) -> None:
    table = shown_table(qtbot, 3)
    viewport = table.table.viewport().rect()
    regions = painted_after(table, rows(3, 2))
    top = table.table.rowViewportPosition(3)
    assert regions and all(r.top() >= top for r in regions), (regions, top)
    assert all(r.height() < viewport.height() for r in regions)


def grab(table: PredictionTable) -> QImage:
    return table.table.viewport().grab().toImage()


def test_the_cells_look_as_qts_own_delegate_draws_the_models_roles(qtbot: object) -> None:
    """Selection, a row adaptation changed (its background), the agreement's red and green text
    and the numbers' alignment: the delegate that paints from the model's cells draws them as
    Qt's delegate draws them from the model's roles, drawn afresh and copied."""
    table = shown_table(qtbot, 12)
    table.follow_box.setChecked(False)
    table.table.scrollToTop()
    table.table.selectRow(2)
    QApplication.processEvents()
    ours = [grab(table) for _ in range(3)]  # seen once, drawn into the cells kept, then copied
    cells = table.table.itemDelegate()
    plain = QStyledItemDelegate(table.table)
    table.table.setItemDelegate(plain)
    assert grab(table) == ours[0] == ours[1] == ours[2]
    table.table.setItemDelegate(cells)


@pytest.fixture
def controller(qtbot: object, tmp_path: Path) -> Controller:
    """The main window (1280×800, offscreen) with its controller and a fake worker, a labelled
    folder of 400 images open."""
    return window_on_folder(qtbot, tmp_path, 400)


def test_rows_before_any_review_do_not_ask_for_their_rule(controller: Controller) -> None:
    c = controller
    c.on_worker_results_ready(results_of(rows(0, 40)))
    c.tick(force=True)
    assert len(c.model.rows) == 40
    assert c.model.desk.untested
    assert c.model.desk.rule_asks == 0, "no comparison: every row is the label-free rule's"
    assert c.model.desk.lines() == []


def test_the_review_summary_is_given_when_rows_came(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = controller
    model = c.model
    sentences: list[int] = []
    real = type(model.desk).sentence

    def counted(self: object, *args: object, **kwargs: object) -> str:
        sentences.append(1)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(model.desk), "sentence", counted)
    c.on_worker_results_ready(results_of(rows(0, 10)))
    for _ in range(6):  # each group's turn after the table's: the plots', the images' (with the summary)
        c.tick()
    given = model.summaries
    assert given >= 1 and sentences
    asked = len(sentences)
    for _ in range(9):  # no rows came: nothing to give again
        c.tick()
    assert model.summaries == given and len(sentences) == asked
    c.on_worker_results_ready(results_of(rows(10, 10)))
    for _ in range(6):
        c.tick()
    assert model.summaries == given + 1
