"""What a run's first rows and every turn change in the window without laying it out or painting
it at once (issue 41): the progress bar's count is right after every update and is painted with
the window's next repaint, never inside the update (a synchronous repaint of the bar painted
everything else the window had to paint in the views' timer's turn); the outlook's sentence
growing from one line to two leaves the table and the plots their size."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from controller_fakes import shown
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QMainWindow

from app.views._layout import StatusParts
from app.views.main_window import MainWindow


class Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        self.count += event.type() == QEvent.Type.Paint
        return False


def test_the_bar_shows_the_count_and_paints_with_the_window(qtbot: object) -> None:
    window = shown(qtbot, QMainWindow(), 800, 200)
    parts = StatusParts(window.statusBar())
    QApplication.processEvents()
    bar, paints = parts.progress_bar, Paints()
    bar.installEventFilter(paints)
    for done, total, shown_as in ((3, 10, (0, 10, 3)), (250, 1000, (0, 1000, 250)), (7, 0, (0, 1, 1))):
        parts.show_progress(done, total, f"{done} of {total}")
        assert paints.count == 0  # not painted inside the update
        assert (bar.minimum(), bar.maximum(), bar.value()) == shown_as
        assert parts.progress_label.full_text() == f"{done} of {total}"
        qtbot.waitUntil(lambda: paints.count > 0)  # type: ignore[attr-defined]
        QApplication.processEvents()
        paints.count = 0
    parts.show_progress(7, 0, "7 of 0")  # the same count: nothing to paint again
    QApplication.processEvents()
    assert paints.count == 0


def test_the_outlook_growing_to_two_lines_lays_nothing_out_again(qtbot: object) -> None:
    window = shown(qtbot, MainWindow(), 1280, 800)
    window.set_outlook("No image of this folder has been processed yet.")
    QApplication.processEvents()
    before = (window.table.geometry(), window.plots.geometry())
    sentence = "The original model decides all 124 images. " * 6
    window.set_outlook(sentence.strip())
    QApplication.processEvents()
    outlook = window.views.outlook
    assert outlook.heightForWidth(outlook.width()) > outlook.fontMetrics().lineSpacing() * 1.5  # two lines
    assert (window.table.geometry(), window.plots.geometry()) == before
