"""Which handler each Qt signal reaches: explicit ``(signal, handler)`` tables, one line a signal.

Grep a signal's name and its handler is on the same line. ``tests/test_app_wiring.py`` checks that
every signal the worker, the window, its views and the link declare has a receiver once the app is
wired, so a signal without a handler cannot ship (``previewFailed`` once did).

The handlers are the plain controller's methods. PySide6 runs a slot that is not a method of a
``QObject`` in the thread that emitted the signal -- the worker's thread, for the worker's answers --
so :func:`connect_on_ui_thread` connects each through a small ``QObject`` living on the UI thread,
and Qt queues the call there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, QTimer, SignalInstance

from app.control.controller import Controller
from app.shell.log_bridge import LogBridge
from app.shell.pdf_job import PdfJob
from app.views.main_window import MainWindow
from app.worker.engine_worker import EngineWorker

Connection = tuple[SignalInstance, Callable[..., object]]


def window_connections(window: MainWindow, c: Controller) -> list[Connection]:
    """What the user asks for, to the controller's parts."""
    sessions, projects, selection = c.sessions, c.projects, c.selection
    return [
        (window.openFolderRequested, c.open_folder),
        (window.openSlideRequested, c.open_slide),
        (window.orderChanged, sessions.on_window_order_changed),
        (window.startRequested, c.start),
        (window.pauseRequested, c.pause),
        (window.resumeRequested, c.resume),
        (window.stopRequested, c.stop),
        (window.resetRequested, sessions.request_reset),  # the window asked the user to confirm
        (window.exportRequested, c.export),
        (window.cancelExportRequested, c.exports.cancel),
        (window.settingsRequested, projects.on_window_settings_requested),
        (window.aboutRequested, sessions.on_window_about_requested),
        (window.projectSelected, projects.select),
        (window.newProjectRequested, projects.on_window_new_project_requested),
        (window.renameProjectRequested, projects.on_window_rename_project_requested),
        (window.deleteProjectRequested, projects.on_window_delete_project_requested),
        (window.closeRequested, c.on_window_close_requested),
        (window.windowActivated, c.on_window_activated),
        (window.positionSelected, selection.on_window_position_selected),
        (window.filterChanged, selection.on_window_filter_changed),
        (window.tileClicked, selection.on_window_tile_clicked),
        (window.opacityChanged, selection.on_window_opacity_changed),
        (window.reviewRequested, c.on_window_review_requested),
        (window.queueRequested, c.on_window_queue_requested),
        (window.undoRequested, c.on_window_undo_requested),
        (window.bannerActionTriggered, projects.on_window_banner_action_triggered),
        (window.demoRequested, projects.on_window_demo_requested),
        (window.cohortSiteRequested, c.cohorts.open_site),
        (window.regionRequested, c.on_window_region_requested),
    ]


def worker_connections(worker: EngineWorker, c: Controller, pdf: PdfJob) -> list[Connection]:
    """The worker's answers, to the controller's parts; ``pdf`` writes the export's PDF on the UI
    thread once the worker staged the tables. (``closed`` is not here: it ends the worker's
    thread directly, see :class:`app.shell.studio_app.StudioApp`.)"""
    sessions, projects, selection = c.sessions, c.projects, c.selection
    return [
        (worker.sessionReady, sessions.on_worker_session_ready),
        (worker.sessionFailed, sessions.on_worker_session_failed),
        (worker.sourceReady, sessions.on_worker_source_ready),
        (worker.sourceFailed, sessions.on_worker_source_failed),
        (worker.resultsReady, c.on_worker_results_ready),
        (worker.itemFailed, c.on_worker_item_failed),
        (worker.paused, c.on_worker_paused),
        (worker.runEnded, c.on_worker_run_ended),
        (worker.stateSaved, c.on_worker_state_saved),
        (worker.saveFailed, c.on_worker_save_failed),
        (worker.resetDone, sessions.on_worker_reset_done),
        (worker.projectFailed, projects.on_worker_project_failed),
        (worker.previewReady, c.on_worker_preview_ready),
        (worker.previewFailed, selection.on_worker_preview_failed),
        (worker.regionReady, c.on_worker_region_ready),
        (worker.exportProgress, c.exports.on_export_progress),
        (worker.exported, pdf.start),
        (worker.exportFailed, c.exports.on_export_failed),
        (worker.exportCancelled, c.exports.on_export_cancelled),
        (worker.newImages, c.on_worker_new_images),
        (pdf.progress, c.exports.on_export_progress),
        (pdf.finished, c.exports.on_reports_written),
        (pdf.failed, c.exports.on_export_failed),
        (pdf.cancelled, c.exports.on_export_cancelled),
    ]


def app_connections(timer: QTimer, bridge: LogBridge, c: Controller) -> list[Connection]:
    """The view timer's ticks and the engine's log records (from any thread), to the controller."""
    return [
        (timer.timeout, c.tick),
        (bridge.recordLogged, c.on_engine_logged),
    ]


class _UiSlot(QObject):
    """Calls ``handler`` on the thread this object lives on (the UI thread)."""

    def __init__(self, handler: Callable[..., object], parent: QObject) -> None:
        super().__init__(parent)
        self._handler = handler
        # Named after its handler, so a queued call is named in event traces (benchmarks/_stalls.py).
        self.setObjectName(getattr(handler, "__qualname__", type(handler).__name__))

    def call(self, *args: Any) -> None:
        self._handler(*args)


def connect_on_ui_thread(owner: QObject, connections: Sequence[Connection]) -> None:
    """Connect each signal to its handler so that the handler runs on ``owner``'s (the UI) thread."""
    for signal, handler in connections:
        signal.connect(_UiSlot(handler, owner).call)
