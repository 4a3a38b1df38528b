"""A new folder's plots draw their axes each in a repaint of the window of its own (issue 41):
opening one changes their titles, labels and ranges, and each then draws its axes afresh; with the
newly shown work area, the window's first repaint drew both plots' five axes (12-21 ms of the GUI
thread's time in one event). The window's first repaint after the folder opens draws no axis, each
later one the axes of one plot at most; the report's picture taken meanwhile shows them as they
will be painted."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pyqtgraph as pg
import pytest
from controller_fakes import FakeTicker, FakeWorker, folder, session_info, shown
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication

from app.control.controller import Controller
from app.core.open_session import OpenSession
from app.core.settings import AppSettings
from app.views.main_window import MainWindow


class Frames(QObject):
    """The plots whose axes were drawn afresh in each of the window's repaints."""

    def __init__(self, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.window = window
        self.frames: list[set[str]] = [set()]
        names = {window.plots.running.scene(): "running", window.plots.segments.scene(): "segments"}
        draw = pg.AxisItem.generateDrawSpecs
        frames = self.frames

        def counted(axis: pg.AxisItem, painter: object) -> object:
            frames[-1].add(names.get(axis.scene(), "other"))
            return draw(axis, painter)

        monkeypatch.setattr(pg.AxisItem, "generateDrawSpecs", counted)
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window and event.type() == QEvent.Type.UpdateRequest:
            self.frames.append(set())
        return False


def settle() -> None:
    for _ in range(10):
        QApplication.processEvents()


def plots_painted(window: MainWindow) -> bool:
    """Whether both plots show what they were last given (none waits for its turn)."""
    views = (window.plots.running.viewport(), window.plots.segments.viewport())
    return not any(view.testAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled) for view in views)


def window_before_opening(qtbot: object, home: Path) -> tuple[Controller, MainWindow]:
    window = shown(qtbot, MainWindow(), 1280, 800)
    c = Controller(
        window, FakeWorker(), OpenSession(AppSettings(), home, persist_settings=False), FakeTicker()
    )  # type: ignore[arg-type]
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    settle()
    return c, window


def test_a_new_folder_draws_each_plots_axes_in_a_repaint_of_its_own(
    qtbot: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, window = window_before_opening(qtbot, tmp_path)
    frames = Frames(window, monkeypatch)
    c.open_folder(str(tmp_path / "site"))
    c.sessions.on_worker_source_ready(folder(tmp_path, 1000))  # titles, labels and ranges change
    both = {"running", "segments"}
    qtbot.waitUntil(lambda: both <= set().union(*frames.frames[1:]))  # type: ignore[attr-defined]
    settle()
    drawn = frames.frames[1:]  # frames[0]: before the window's first repaint
    assert drawn and not drawn[0], frames.frames  # not with the newly shown work area
    assert all(len(plots) <= 1 for plots in drawn), frames.frames  # one plot a repaint
    assert set().union(*drawn) == both, frames.frames


def test_the_reports_picture_taken_before_their_turn_shows_the_new_plots(
    qtbot: object, tmp_path: Path
) -> None:
    c, window = window_before_opening(qtbot, tmp_path)
    c.open_folder(str(tmp_path / "site"))
    c.sessions.on_worker_source_ready(folder(tmp_path, 1000))
    early = window.plot_png()
    qtbot.waitUntil(lambda: plots_painted(window))  # type: ignore[attr-defined]
    settle()
    assert window.plot_png() == early


def test_a_plot_painted_once_repaints_without_calling_into_the_panel(qtbot: object) -> None:
    """Whether a plot was painted once is all the panel watches its paints for: the repaints
    after it (every turn of a run) make no call into Python for it."""
    import sys
    from types import FrameType

    window = shown(qtbot, MainWindow(), 1280, 800)
    qtbot.waitUntil(lambda: window.plots.running.viewport() in window.plots._painted)  # type: ignore[attr-defined]
    calls: list[str] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("plots_view.py"):
            calls.append(frame.f_code.co_name)

    sys.setprofile(hook)
    try:
        window.plots.running.viewport().repaint()
    finally:
        sys.setprofile(None)
    assert calls == []
