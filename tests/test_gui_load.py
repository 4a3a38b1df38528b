"""The window's work per update under load (issue 41, item 4; pytest-qt, offscreen): the table
draws a cell's text once and copies it afterwards, appending rows lays nothing out, the table
follows the newest rows as they are appended, plots the window does not show wait until shown,
and the empty plots are titled as their first rows will title them. Counted, never timed (the
timings are ``benchmarks/app_overhead.py``'s)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from app_fixtures import sample_row
from controller_fakes import shown
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QSplitter

from app.core.stats import RunStatistics
from app.views.main_window import MainWindow
from app.views.table_view import PredictionTable
from engine import PredictionRow


def rows(start: int, count: int) -> list[PredictionRow]:
    return [
        sample_row(i, pred=i % 2, src=(i // 3) % 2, truth=(i // 2) % 2, conf=0.6 + (i % 4) / 10)
        for i in range(start, start + count)
    ]


def shown_table(qtbot: object, count: int) -> PredictionTable:
    table = shown(qtbot, PredictionTable(), 800, 400)
    table.model.append_rows(rows(0, count))
    QApplication.processEvents()
    return table


def painted(table: PredictionTable) -> QImage:
    """The table's cells as on screen (painted into a pixmap)."""
    return table.table.viewport().grab().toImage()


def test_a_cell_is_drawn_once_and_looks_as_qt_draws_it(qtbot: object) -> None:
    table = shown_table(qtbot, 40)
    cells = table.table.itemDelegate()
    first = painted(table)  # each cell seen once: drawn as Qt draws it
    painted(table)  # seen again: drawn once more, kept
    drawn = cells.drawn  # type: ignore[attr-defined]
    assert drawn > 0
    third = painted(table)
    assert cells.drawn == drawn, "the cells kept are copied, not drawn again"  # type: ignore[attr-defined]
    assert third == first, "a kept cell looks as Qt draws it"
    # A row that changes shows its new text, and only its cells are drawn afresh.
    changed = sample_row(3, pred=1, src=0, truth=0, conf=0.95, name="renamed.png")
    table.model.replace_row(3, changed, table.model._reviews.get(3) or _no_review())
    fresh = painted(table)
    assert fresh != third
    table.table.itemDelegate().cells.clear()  # type: ignore[attr-defined]
    table.table.itemDelegate().seen.clear()  # type: ignore[attr-defined]
    assert painted(table) == fresh, "the changed row is drawn as Qt draws it"


def _no_review() -> object:
    from app.core.run_items import ReviewNote

    return ReviewNote()


class LayoutRequests(QObject):
    """Counts the layout requests the window's splitters and the window itself receive."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest and isinstance(watched, (QSplitter, MainWindow)):
            self.count += 1
        return False


def test_rows_arriving_lay_the_window_out_no_more(qtbot: object) -> None:
    """The count of rows changes with every batch; its label asked the window to lay itself out
    again each time (all panes' sizes asked anew)."""
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.resize(1280, 800)
    window.show()
    qtbot.waitExposed(window)  # type: ignore[attr-defined]
    window.panes.show_work(True)
    window.append_rows(rows(0, 5))
    for _ in range(3):
        QApplication.processEvents()
    requests = LayoutRequests()
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(requests)
    try:
        for start in range(5, 400, 15):
            window.append_rows(rows(start, 15))
            QApplication.processEvents()
    finally:
        app.removeEventFilter(requests)
    assert window.table.count_label.text() == "410 rows"
    assert requests.count == 0


def test_the_table_follows_the_newest_rows_as_they_are_appended(qtbot: object) -> None:
    table = shown_table(qtbot, 10)
    assert table.follow
    table.append_rows(rows(10, 300))
    QApplication.processEvents()
    newest = table.proxy.mapFromSource(table.model.index(309, 0))
    assert table.table.viewport().rect().contains(table.table.visualRect(newest)), "the newest row is in view"
    assert table.selected_source_row() is None, "following scrolls; it selects nothing by itself"
    table.follow_box.setChecked(False)
    top = table.table.verticalScrollBar().value()
    table.append_rows(rows(310, 50))
    QApplication.processEvents()
    assert table.table.verticalScrollBar().value() == top, "not following: the view stays"


def plot_data(count: int) -> object:
    stats = RunStatistics(segment_size=10, truth="dataset labels")
    stats.extend(rows(0, count))
    return stats.plot_data()


def test_hidden_plots_are_drawn_when_shown(qtbot: object) -> None:
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.resize(1280, 800)
    window.show()
    window.panes.show_work(True)
    window.clear_results(100, 10, labelled=True)
    window.show_tab("metrics")
    data = plot_data(30)
    window.set_plot_data(data)  # type: ignore[arg-type]
    curve = window.plots.adapted_curve
    assert curve.getData()[0] is None or len(curve.getData()[0]) == 0, "hidden: not drawn"
    assert window.plots.data is data, "the newest data is kept"
    window.show_tab("plots")
    x, y = curve.getData()
    np.testing.assert_array_equal(x, data.x)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(y, data.adapted)  # type: ignore[attr-defined]
    # The report's picture of hidden plots shows their newest data too.
    window.show_tab("log")
    newer = plot_data(60)
    window.set_plot_data(newer)  # type: ignore[arg-type]
    assert len(curve.getData()[0]) == 30
    assert window.plot_png().startswith(b"\x89PNG")
    assert len(curve.getData()[0]) == 60


def test_the_empty_plots_of_a_labelled_folder_are_titled_as_its_rows_will_title_them(
    qtbot: object,
) -> None:
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.clear_results(100, 10, labelled=True)
    titles = [p.getPlotItem().titleLabel.text for p in (window.plots.running, window.plots.segments)]
    assert "against dataset labels" in titles[0]
    window.set_plot_data(plot_data(3))  # type: ignore[arg-type]
    assert [p.getPlotItem().titleLabel.text for p in (window.plots.running, window.plots.segments)] == titles
