"""The controller: wires the passive main window to the engine worker and the Qt-free run model.

It holds no results: they live in :class:`~app.core.run_model.RunModel`, whose notifiers are connected
to the window's methods; the engine work happens in :class:`~app.worker.engine_worker.EngineWorker` on its own
QThread. This class starts, pauses and stops runs, exports reports (the PDF on this thread) and
shuts down; what is open (session, source, profile, settings) is the
:class:`~app.control.session_controller.SessionController`'s; scripted use is :mod:`app.control.script`.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, Qt, QThread, QTimer, Signal, Slot

from app._engine import shown as shown_name
from app.control.log_bridge import LogBridge
from app.control.session_controller import SessionController
from app.control.wiring import connect_by_name
from app.core import advice, notices
from app.core.applicability import Collapse, model_kind, one_class_collapse
from app.core.caches import MessageThrottle
from app.core.filters import PredictionRow
from app.core.messages import ItemFailure, ItemResult, RegionRead, RegionRequest, RunEnded
from app.core.open_session import OpenSession
from app.core.phase import Phase, actions_for
from app.core.profiles import ProfileInfo
from app.core.run_model import RunModel
from app.core.settings import AppSettings, available_demos
from app.reports.data import collect_report_data
from app.reports.files import ReportData, StagedReports
from app.reports.pdf import add_pdf
from app.runtime.collector import collect_on_gui_thread
from app.runtime.singleton_refs import protect_singletons
from app.views.main_window import MainWindow
from app.worker.engine_worker import EngineWorker

logger = logging.getLogger(__name__)
RUNNING = (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED, Phase.STOPPING)
_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING}


class Controller(QObject):
    """Connects a :class:`MainWindow` (or anything with its methods and signals) to the engine.

    Signals (the first three are its :class:`SessionController`'s, offered here):
        sessionChanged(object): a session was loaded (:class:`~app.core.messages.SessionInfo`).
        sourceOpened(object): a source was opened (:class:`~app.core.messages.SourceOpened`).
        loadFailed(str): the model, the profile's state or a source could not be opened.
        runFinished(object): a run ended (:class:`~app.core.messages.RunEnded`), after its results
            reached the views.
        exportFinished(object): reports were written (list of paths). exportError(str): they were not.
    """

    runFinished = Signal(object)
    exportFinished = Signal(object)
    exportError = Signal(str)
    # requests to the worker (queued: the worker lives in another thread)
    _requestStart = Signal()
    _requestResume = Signal()
    _requestStop = Signal()
    _requestPreview = Signal(int)
    _requestRegion = Signal(object)
    _requestExport = Signal(object, object)  # Path (a str signal cuts a name that is not UTF-8), ReportData
    _requestClose = Signal()

    def __init__(
        self,
        window: MainWindow,
        settings: AppSettings,
        home: Path | None = None,
        flush_interval_ms: int = 250,
        persist_settings: bool = True,
        state_dir: Path | None = None,
    ) -> None:
        super().__init__()
        protect_singletons()  # a long session makes more calls than None and True have references
        self.window = window
        self.state = OpenSession(settings, home, state_dir, persist_settings)
        self.model = RunModel(settings.low_confidence)
        self._closing = False
        self._region_ticket = 0
        self._throttle = MessageThrottle()
        self._skip_throttle = MessageThrottle()  # a NaN storm must not flood the log
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("f2tta-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        self.flush_timer = QTimer(self)
        self.flush_timer.setInterval(flush_interval_ms)
        self.log_bridge = LogBridge("engine")
        self.sessions = SessionController(
            window, self.model, self.worker, self.state, self._set_phase, self.log
        )
        self.sessionChanged = self.sessions.sessionChanged
        self.sourceOpened = self.sessions.sourceOpened
        self.loadFailed = self.sessions.loadFailed
        self._connect()
        collect_on_gui_thread()  # from now on no collection runs on the engine's thread (see the module)
        self.engine_thread.start()
        window.set_preferences(settings.low_confidence, settings.overlay_opacity)
        window.set_order(settings.order)
        window.set_demos(available_demos())
        self.sessions.refresh_profiles()
        self._set_phase(Phase.EMPTY)

    # -- wiring -------------------------------------------------------------------------------
    def _connect(self) -> None:
        w, win, m = self.worker, self.window, self.model
        for request, slot in (
            (self._requestStart, w.start),
            (self._requestResume, w.resume),
            (self._requestStop, w.stop),
            (self._requestPreview, w.load_preview),
            (self._requestRegion, w.read_region),
            (self._requestExport, w.export_reports),
            (self._requestClose, w.close),
            (win.startRequested, self.start),
            (win.pauseRequested, self.pause),
            (win.resumeRequested, self.resume),
            (win.stopRequested, self.stop),
            (win.exportRequested, self.export),
            (win.positionSelected, m.select),
            (self.flush_timer.timeout, self._on_flush_timer_timeout),
            (self.log_bridge.recordLogged, self._on_engine_logged),
        ):
            request.connect(slot)
        connect_by_name(w, self, "worker")  # resultsReady -> _on_worker_results_ready, ...
        connect_by_name(w, self.sessions, "worker")  # sessionReady, sourceReady, resetDone, ...
        connect_by_name(win, self.sessions, "window")  # tileClicked, filterChanged, ...
        connect_by_name(win, self.sessions.profiles, "window")  # profileSelected, settingsRequested, ...
        connect_by_name(win, self, "window")  # reviewRequested, regionRequested
        # Direct: quit() is called on the worker thread right after close(), which is thread-safe.
        w.closed.connect(self.engine_thread.quit, Qt.ConnectionType.DirectConnection)
        m.rows_shown.connect(win.append_rows)
        m.plots_changed.connect(win.set_plot_data)
        m.cells_changed.connect(lambda cells: win.set_tile_values([(c.row, c.col, c.value) for c in cells]))
        m.selection_changed.connect(self.sessions.show_selection)
        m.preview_needed.connect(self._requestPreview.emit)
        m.event_noted.connect(self._note_event)
        m.rows_changed.connect(win.update_rows)
        m.metrics_changed.connect(win.set_metrics)
        m.collapse_noted.connect(self._note_collapse)

    # -- phase and messages -------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return self.state.phase

    def _set_phase(self, phase: Phase, status: str | None = None) -> None:
        self.state.phase = phase
        info, m = self.state.info, self.model
        actions = actions_for(phase, has_session=self.state.usable, pending=m.pending, has_rows=bool(m.rows))
        if info is not None and info.profile_error:  # only a reset can make such a profile usable
            actions = dataclasses.replace(actions, reset=phase in (Phase.EMPTY, Phase.DONE))
        if status is None and m.source is None and phase is Phase.DONE:
            status = "open a folder or slide"
        elif status is None and phase is Phase.READY and m.progress.done:
            status = f"ready · {m.pending} left"
        self.window.set_actions(phase, actions, status)
        if phase in (Phase.RUNNING, Phase.PAUSING, Phase.STOPPING):
            self.flush_timer.start()
        else:
            self.flush_timer.stop()

    def log(self, level: str, message: str) -> None:
        """Show ``message`` in the log panel (errors also in the status bar and the reports)."""
        self.window.log_message(level, message)
        logger.log(_LEVELS.get(level, logging.INFO), message)
        if level == "error":
            self.state.errors.append(message)
            self.window.show_status(message)

    @Slot(str, str)
    def _on_engine_logged(self, level: str, message: str) -> None:
        shown = self._throttle.admit(message)
        if shown is not None:
            self.window.log_message(level, f"engine: {shown}")

    def _note_collapse(self, found: Collapse, log: bool = True) -> None:
        """Nearly every prediction is one class: the model may not apply (offer the other demo model)."""
        info = self.state.info
        model = model_kind(info.card) if info is not None else None
        looks = self.model.looks_like()
        banner = advice.collapse(found, looks, model, available_demos())
        if log:
            self.log("warning", banner.text)
        self.model.checks.append(banner.text)
        self.window.show_banner(banner)

    # -- review marks and the slide's pyramid -------------------------------------------------
    @Slot(int, int)
    def _on_window_review_requested(self, position: int, label: int) -> None:
        """Confirm or correct the image at ``position`` (label -1 clears the mark); kept at once."""
        try:
            self.model.review(position, None if label < 0 else label)
        except OSError as exc:
            self.log("error", f"The review mark cannot be kept ({exc}); nothing was changed.")
            return
        except ValueError as exc:
            self.log("warning", str(exc))
            return
        if self.phase not in RUNNING:
            self.model.flush(force=True)

    @Slot(int, object)
    def _on_worker_preview_ready(self, position: int, image: object) -> None:
        # A slot of this QObject, so the view is updated on the UI thread (not the worker's).
        self.model.preview_loaded(position, image)  # type: ignore[arg-type]

    @Slot(int, int, int, int, int)
    def _on_window_region_requested(self, x: int, y: int, width: int, height: int, max_side: int) -> None:
        self._region_ticket += 1
        self._requestRegion.emit(RegionRequest(self._region_ticket, x, y, width, height, max_side))

    @Slot(object)
    def _on_worker_region_ready(self, read: RegionRead) -> None:
        r = read.request
        if r.ticket == self._region_ticket:
            self.window.set_slide_region(r.x, r.y, r.width, r.height, read.rgb)

    def _note_event(self, row: PredictionRow) -> None:
        """The collapse guard's actions and skipped updates, as their images arrive."""
        if row.guard_message:
            self.log("warning", f"{row.name}: {row.guard_message}")
            self.window.show_status(f"{row.name}: {row.guard_message}")
        if row.update_skipped:
            shown = self._skip_throttle.admit(notices.update_skipped(row), key="update skipped")
            if shown is not None:
                self.log("warning", shown)

    # -- what is open (the session controller does the work) ----------------------------------
    def load_session(self) -> None:
        self.sessions.load_session()

    def open_folder(self, path: str) -> None:
        self.sessions.open_folder(path)

    def open_slide(self, path: str) -> None:
        self.sessions.open_slide(path)

    # -- the run ------------------------------------------------------------------------------
    @Slot()
    def start(self) -> None:
        if not self.state.usable or self.model.source is None or not self.model.pending:
            return
        self.model.start_run()
        self._set_phase(Phase.RUNNING)
        self.log("info", f"Run started: {self.model.pending} images")
        self._requestStart.emit()

    @Slot()
    def pause(self) -> None:
        if self.phase is Phase.RUNNING:
            self.worker.request_pause()
            self._set_phase(Phase.PAUSING)

    @Slot()
    def resume(self) -> None:
        if self.phase is Phase.PAUSED:
            self.model.start_run(counters=False)
            self._set_phase(Phase.RUNNING)
            self._requestResume.emit()

    @Slot()
    def stop(self) -> None:
        if self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED):
            self.worker.request_stop()
            self._set_phase(Phase.STOPPING)
            self._requestStop.emit()

    @Slot(object)
    def _on_worker_results_ready(self, batch: tuple[ItemResult, ...]) -> None:
        self.model.add_results(batch)
        self.state.images_seen += len(batch)

    @Slot()
    def _on_flush_timer_timeout(self, force: bool = False) -> None:
        running = self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.STOPPING)
        self.window.set_progress(self.model.progress.progress(running=running))
        self.model.flush(force=force, follow=self.window.following)
        self.window.set_profile_summary(self.state.profile_text())

    @Slot(object)
    def _on_worker_item_failed(self, failure: ItemFailure) -> None:
        self.model.note_failure(failure.retried)
        self.log("error", failure.message)

    @Slot()
    def _on_worker_paused(self) -> None:
        self._on_flush_timer_timeout(force=True)
        self.model.progress.pause()
        if self.phase is Phase.PAUSING:
            self._set_phase(Phase.PAUSED)
            self.window.set_progress(self.model.progress.progress(running=False))
            self.log("info", f"Paused after {self.model.progress.done} of {self.model.progress.total} images")

    @Slot(object)
    def _on_worker_run_ended(self, ended: RunEnded) -> None:
        self._on_flush_timer_timeout(force=True)
        self.model.progress.pause()
        self.state.last_run = ended
        if ended.profile is not None:
            self._on_worker_state_saved(ended.profile)
        self.log("error" if ended.reason == "failed" else "info", notices.run_ended(ended, self.model))
        if self.model.collapse is not None:  # the banner's figures as of the end of the run
            final = one_class_collapse(self.model.rows)
            if final is not None:
                self.model.checks = [c for c in self.model.checks if not c.startswith("Nearly every")]
                self._note_collapse(final, log=False)
        self.window.set_progress(self.model.progress.progress(running=False))
        pending = self.model.pending
        status = None
        if ended.reason != "finished" or pending:
            status = f"{ended.reason} · {pending} left" + (" · state saved" if ended.saved else "")
        self._set_phase(Phase.READY if pending else Phase.DONE, status)
        self.runFinished.emit(ended)
        if self._closing:
            self.shutdown()
            self.window.close_now()

    @Slot(object)
    def _on_worker_state_saved(self, info: ProfileInfo) -> None:
        self.state.latest_profile = info
        self.window.set_profile_summary(self.state.profile_text())

    @Slot(str)
    def _on_worker_save_failed(self, message: str) -> None:
        self.log("error", message)

    # -- export -------------------------------------------------------------------------------
    @Slot(str)
    def export(self, directory: str | Path) -> None:
        """Write every report kind into ``directory`` (tables on the worker thread, the PDF here)."""
        directory = Path(directory)
        try:
            data = self.report_data()
        except Exception as exc:  # a report must never leave a scripted run waiting forever
            logger.exception("collecting the report data failed")
            self._on_worker_export_failed(f"Reports cannot be prepared: {type(exc).__name__}: {exc}")
            return
        if data is None:
            self._on_worker_export_failed("Nothing to export: open images and process them first.")
            return
        self.log("info", f"Exporting reports to {shown_name(directory)} …")
        self._requestExport.emit(directory, data)

    def report_data(self) -> ReportData | None:
        """What the reports need, read from the run model and the session (None: no rows yet)."""
        return collect_report_data(self.model, self.state, self.window.plot_png)

    @Slot(object, object)
    def _on_worker_exported(self, staged: StagedReports, data: ReportData) -> None:
        paths = add_pdf(staged, data)  # on this thread, see app.worker.io.write_reports
        if isinstance(paths, str):
            self._on_worker_export_failed(paths)
            return
        self.log("info", "Reports written: " + ", ".join(shown_name(p) for p in paths))
        self.window.show_banner(advice.exported(str(paths[0].parent), [p.name for p in paths]))
        self.exportFinished.emit(paths)

    @Slot(str)
    def _on_worker_export_failed(self, message: str) -> None:
        self.log("error", message)
        self.window.show_banner(advice.export_failed(message))
        self.exportError.emit(message)

    # -- shutdown -----------------------------------------------------------------------------
    @Slot()
    def _on_window_close_requested(self) -> None:
        if self.phase in RUNNING:  # finish the current image and save first; close when the run ends
            self._closing = True
            self.window.close_allowed = False
            self.stop()
        else:
            self.shutdown()

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Stop any run (saving the state), release the session and end the worker thread."""
        if not self.engine_thread.isRunning():
            return
        if self.phase in RUNNING:
            loop = QEventLoop()
            self.runFinished.connect(loop.quit)
            QTimer.singleShot(timeout_ms, loop.quit)
            if self.phase is not Phase.STOPPING:
                self.stop()
            loop.exec()
        self.flush_timer.stop()
        self.log_bridge.detach()
        self._requestClose.emit()  # the worker releases the session and journal, then quits its thread
        if not self.engine_thread.wait(timeout_ms):
            logger.error("the engine thread did not end within %d ms", timeout_ms)
        self.sessions.save_settings()
