"""The window's work per image does not grow with the rows already shown (issue 30).

Counted, not timed: the Python calls the UI thread makes (``sys.setprofile``, calls from Qt into
Python included) to take a batch of results and show them -- the run model, the table, the plots,
the figures, and the repaint of the window -- at 100, 1 000 and 2 000 rows. (The figures and the
one-class collapse, kept row by row for this, are checked against a full count in
``tests/test_figure_tally.py``.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from app_fixtures import sample_row
from controller_fakes import results_of, window_on_folder

from app.control.controller import Controller
from app.core import stats as run_stats
from app.core.stats import RunStatistics
from engine import PredictionRow


def python_calls(action: Callable[[], object]) -> int:
    """How many Python functions run during ``action`` (on this thread)."""
    count = 0

    def hook(_frame: object, event: str, _arg: object) -> None:
        nonlocal count
        count += event == "call"

    sys.setprofile(hook)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


def rows(start: int, count: int) -> list[PredictionRow]:
    """Labelled rows of two site groups, some changed by adaptation."""
    return [
        sample_row(
            i, pred=i % 2, src=(i // 3) % 2, truth=(i // 2) % 2, conf=0.6 + (i % 4) / 10, site_group=i % 2
        )
        for i in range(start, start + count)
    ]


@pytest.fixture
def window_controller(qtbot: object, tmp_path: Path) -> Controller:
    """The real main window (shown offscreen, 1280×800) with its controller and a fake worker, a
    labelled folder of 2 200 images open."""
    return window_on_folder(qtbot, tmp_path, 2200)


def test_showing_a_batch_costs_the_same_at_2000_rows_as_at_100(window_controller: Controller) -> None:
    from PySide6.QtWidgets import QApplication

    c = window_controller
    window = c.view

    def batch(start: int) -> int:
        def show() -> None:
            c.on_worker_results_ready(results_of(rows(start, 20)))
            c.tick(force=True)
            window.grab()  # type: ignore[attr-defined]  # painted as on screen, into a pixmap
            QApplication.processEvents()

        return python_calls(show)

    def grow_to(count: int) -> None:
        have = len(c.model.rows)
        c.on_worker_results_ready(results_of(rows(have, count - have)))
        c.tick(force=True)
        QApplication.processEvents()

    grow_to(80)
    early = [batch(80), batch(100)]
    grow_to(1000)
    mid = [batch(1000), batch(1020)]
    grow_to(1980)
    late = [batch(1980), batch(2000)]
    assert len(c.model.rows) == 2020
    # The same batch shown at 2 000 rows as at 1 000, where a row's number has as many digits:
    # about the same. A cost in proportion to the rows would add from 1 000 to 2 000 what it
    # adds from 100 to 1 000 (one call a row is 1 000 calls); the allowance is well under that.
    assert min(late) <= max(mid) + 0.05 * max(early) + 100, (early, mid, late)
    # ... and at 2 000 as at 100: a little more (four digits, a plot's ticks), never many times it.
    assert min(late) <= 1.5 * max(early), (early, late)


def test_the_table_paints_a_cell_in_one_call(qtbot: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delegate paints from the model's cell(), one call a visible cell: the model is not
    asked for each role of each visible cell at every repaint (seven calls into Python a cell)."""
    from app.views import table_model
    from app.views.table_view import PredictionTable

    asked: list[int] = []
    cells: list[int] = []
    data = table_model.PredictionTableModel.data
    cell = getattr(table_model.PredictionTableModel, "cell", None)

    def counting_data(self: table_model.PredictionTableModel, index: object, role: int = 0) -> object:
        asked.append(role)
        return data(self, index, role)  # type: ignore[arg-type]

    def counting_cell(self: table_model.PredictionTableModel, row: int, column: int) -> object:
        cells.append(row)
        assert cell is not None
        return cell(self, row, column)

    monkeypatch.setattr(table_model.PredictionTableModel, "data", counting_data)
    monkeypatch.setattr(table_model.PredictionTableModel, "cell", counting_cell, raising=False)
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    table.resize(800, 500)
    table.show()
    qtbot.waitExposed(table)  # type: ignore[attr-defined]
    table.model.append_rows(rows(0, 300))
    qtbot.wait_until(lambda: table.proxy.rowCount() == 300)  # type: ignore[attr-defined]
    asked.clear()
    cells.clear()
    table.table.viewport().grab()  # painted as on screen, into a pixmap
    assert asked == []
    visible = table.table.rowAt(table.table.viewport().height() - 1) + 1
    assert visible > 5 and len(cells) >= visible * len(table_model.COLUMNS) - 20  # the cells were painted


def test_rows_in_arrival_order_are_placed_without_comparing_them(
    qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.views import table_model
    from app.views.table_view import PredictionTable

    compared: list[int] = []
    less = table_model.PredictionFilterProxy.lessThan

    def counting(self: table_model.PredictionFilterProxy, left: object, right: object) -> bool:
        compared.append(1)
        return less(self, left, right)  # type: ignore[arg-type]

    monkeypatch.setattr(table_model.PredictionFilterProxy, "lessThan", counting)
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    for start in range(0, 600, 50):
        table.model.append_rows(rows(start, 50))
    assert compared == []
    shown = [table.proxy.index(r, 0).data() for r in range(table.proxy.rowCount())]
    assert shown == [str(i + 1) for i in range(600)]
    # Restored rows of a folder reordered since arrive out of order: "#" is sorted for real.
    table.model.append_rows([sample_row(700), sample_row(650)])
    shown = [table.proxy.index(r, 0).data() for r in range(table.proxy.rowCount())]
    assert shown[-2:] == ["651", "701"] and compared
    table.table.sortByColumn(0, table_model.Qt.SortOrder.DescendingOrder)
    assert table.proxy.index(0, 0).data() == "701"


def test_the_table_does_not_widen_as_rows_arrive(qtbot: object) -> None:
    """A count label as wide as its text widened the table, and a window at its least width with
    it, at each new digit: a resize and a repaint of the whole window during a run."""
    from PySide6.QtWidgets import QApplication

    from app.views.table_view import PredictionTable

    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    table.show()
    qtbot.waitExposed(table)  # type: ignore[attr-defined]
    widths = [table.minimumSizeHint().width()]
    for start, count in ((0, 9), (9, 1), (10, 90), (100, 900), (1000, 500)):
        table.model.append_rows(rows(start, count))
        QApplication.processEvents()
        widths.append(table.minimumSizeHint().width())
    table.search.setText("img1")  # "… of 1500 rows"
    QApplication.processEvents()
    widths.append(table.minimumSizeHint().width())
    assert len(set(widths)) == 1, widths


def test_the_plots_draw_at_most_plot_points_per_curve() -> None:
    stats = RunStatistics(segment_size=500)
    stats.extend(rows(0, 5000))
    data = stats.plot_data()
    assert data.x.size <= run_stats.PLOT_POINTS and data.x[0] == 1 and data.x[-1] == 5000
    stats_all = [r.prediction == r.ground_truth for r in rows(0, 5000)]
    assert data.adapted[-1] == pytest.approx(sum(stats_all) / 5000)
    small = RunStatistics()
    small.extend(rows(0, 50))
    assert small.plot_data().x.size == 50


def test_axes_are_drawn_once_and_reused(qtbot: object) -> None:
    """Every axis of the plots and of the colour bars is cached: a new curve or image does not
    repaint the axes, their tick labels and grid lines."""
    import pyqtgraph as pg
    from PySide6.QtWidgets import QGraphicsItem

    from app.views.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    axes = []
    for view in (
        window.plots.running,
        window.plots.segments,
        window.image_view.canvas,
        window.slide_view.canvas,
    ):
        axes += [i for i in view.scene().items() if isinstance(i, pg.AxisItem) and i.isVisible()]
    assert len(axes) >= 6
    assert {a.cacheMode() for a in axes} == {QGraphicsItem.CacheMode.DeviceCoordinateCache}
