"""One current row (issue 27, item 5): exactly one table row is highlighted on screen -- the one C,
X and 1-9 mark -- after a run with Follow newest, clicks, N presses, C presses, undo and redo.

The rows were selected with the selection model's signals blocked (so the selection was not
announced); the view repaints from those signals, so rows selected before stayed painted as
selected: #8, #10 and #11 at once. What is on screen is read back from the window's backing store
(``QScreen.grabWindow``), not re-rendered.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from app_fixtures import sample_row
from app_studio import settle
from controller_fakes import ended, results_of, window_on_folder

from app.control.controller import Controller


def highlighted(window: object) -> list[int]:
    """The proxy rows painted in the highlight colour, as the screen shows them."""
    from PySide6.QtWidgets import QApplication

    settle()
    table = window.table  # type: ignore[attr-defined]
    view, viewport = table.table, table.table.viewport()
    image = QApplication.primaryScreen().grabWindow(window.winId()).toImage()  # type: ignore[attr-defined]
    colour = view.palette().highlight().color()
    rows = []
    for row in range(table.proxy.rowCount()):
        rect = view.visualRect(table.proxy.index(row, 0))
        if not rect.isValid() or rect.bottom() >= viewport.height() or rect.top() < 0:
            continue
        point = viewport.mapTo(window, rect.topLeft())
        pixel = image.pixelColor(point.x() + 3, point.y() + rect.height() // 2)
        if sum(abs(a - b) for a, b in zip(pixel.getRgb()[:3], colour.getRgb()[:3], strict=True)) < 60:
            rows.append(row)
    return rows


def current(window: object) -> int | None:
    rows = window.table.table.selectionModel().selectedRows()  # type: ignore[attr-defined]
    return rows[0].row() if len(rows) == 1 else None


@pytest.fixture
def app(qtbot: object, tmp_path: Path) -> Controller:
    c = window_on_folder(qtbot, tmp_path, 60, wired=True)
    c.start()
    return c


def _run(c: Controller, start: int, count: int) -> None:
    rows = [sample_row(i, pred=i % 2, src=(i // 3) % 2) for i in range(start, start + count)]
    c.on_worker_results_ready(results_of(rows))
    c.tick(force=True)


def test_following_the_newest_highlights_only_the_newest(app: Controller) -> None:
    window = app.view
    for start in range(0, 15, 5):
        _run(app, start, 5)
        assert highlighted(window) == [current(window)] == [start + 4]


def test_a_click_and_the_rows_that_arrive_after_it(app: Controller, qtbot: object) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    window = app.view
    _run(app, 0, 12)
    table = window.table.table  # type: ignore[attr-defined]
    rect = table.visualRect(window.table.proxy.index(3, 1))  # type: ignore[attr-defined]
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert highlighted(window) == [current(window)] == [3]
    _run(app, 12, 5)  # Follow newest went off with the click: the clicked row stays current
    assert highlighted(window) == [current(window)] == [3]
    window.table.follow_box.setChecked(True)  # and on again: the newest is current, alone (#4 stayed)
    _run(app, 17, 5)
    assert highlighted(window) == [current(window)] == [21]


def test_n_presses_and_c_presses(app: Controller) -> None:
    window = app.view
    _run(app, 0, 12)
    app.on_worker_run_ended(ended("finished", 12, Path(app.state.home or ".")))
    window.table.select_source_row(2)  # type: ignore[attr-defined]
    for expected in (3, 4, 5):
        window.commands.next.trigger()  # type: ignore[attr-defined]
        assert highlighted(window) == [current(window)] == [expected]
    window.commands.confirm.trigger()  # C marks #6 and moves on
    assert app.model.marks and next(iter(app.model.marks)) == "k5"
    assert highlighted(window) == [current(window)] == [6]


def test_undo_and_redo_highlight_the_row_they_act_on(app: Controller) -> None:
    from controller_fakes import ended

    window = app.view
    _run(app, 0, 12)
    app.on_worker_run_ended(ended("finished", 12, Path(app.state.home or ".")))
    for row in (2, 7, 9):
        window.table.select_source_row(row)  # type: ignore[attr-defined]
        window.commands.confirm.trigger()  # type: ignore[attr-defined]
    app.on_window_undo_requested()  # the mark on #10 (row 9)
    assert highlighted(window) == [current(window)] == [9]
    app.on_window_undo_requested()  # the mark on #8 (row 7)
    assert highlighted(window) == [current(window)] == [7]
    app.on_window_undo_requested(redo=True)
    assert highlighted(window) == [current(window)] == [7]
    window.commands.next.trigger()
    assert highlighted(window) == [current(window)] == [8]
    window.commands.confirm.trigger()  # C acts on the row shown as current, and moves on
    assert "k8" in app.model.marks and highlighted(window) == [current(window)] == [9]
