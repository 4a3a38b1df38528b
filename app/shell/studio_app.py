"""One running studio: the window, the plain controller and the Qt machinery around them.

:class:`StudioApp` is what ``main()`` (and the app's tests and benchmarks) build. It installs the
process-wide guards (:mod:`app.runtime`), starts the engine worker in its own ``QThread`` behind a
:class:`~app.shell.worker_link.WorkerLink` (with the export's PDF job), makes the timer that paces
the views, connects every signal to its handler (:mod:`app.shell.wiring`) and ends the thread at
shutdown. The logic is the
:class:`~app.control.controller.Controller`'s, which imports no Qt; its events are offered here again
as Qt signals, for ``qtbot.waitSignal`` and for local event loops.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, Qt, QThread, QTimer, Signal

from app.control.controller import Controller
from app.core.open_session import OpenSession
from app.core.phase import Phase
from app.core.settings import AppSettings
from app.runtime.collector import collect_on_gui_thread
from app.runtime.singleton_refs import protect_singletons
from app.shell.log_bridge import LogBridge
from app.shell.wiring import app_connections, connect_on_ui_thread, window_connections, worker_connections
from app.shell.worker_link import WorkerLink
from app.views.main_window import MainWindow
from app.worker.engine_worker import EngineWorker

logger = logging.getLogger(__name__)


class StudioApp(QObject):
    """The window and its controller, with the engine worker running in its own thread.

    Args:
        window: the main window (or a stand-in with its methods and signals).
        settings: the settings in force.
        home: the studio home (projects, settings.json); None for the default.
        flush_interval_ms: how often the views are handed new results during a run.
        persist_settings: settings changed in the dialog are saved to disk.
        state_dir: a journal directory to use instead of a project (``--state``).
        model_chosen: the settings' model was given for this session (``--model``): it is loaded
            even where the project remembers another (which is then named, not replaced).

    Signals (the controller's :class:`~app.control.status.ControllerEvents`, as Qt signals):
        sessionChanged(object): a session was loaded (:class:`~app.core.messages.SessionInfo`).
        sourceOpened(object): a source was opened (:class:`~app.core.messages.SourceOpened`).
        loadFailed(str): the model, the project's state or a source could not be opened.
        runFinished(object): a run ended (:class:`~app.core.messages.RunEnded`), after its results
            reached the views.
        exportFinished(object): reports were written (list of paths). exportError(str): they were not.
    """

    sessionChanged = Signal(object)
    sourceOpened = Signal(object)
    loadFailed = Signal(str)
    runFinished = Signal(object)
    exportFinished = Signal(object)
    exportError = Signal(str)

    def __init__(
        self,
        window: MainWindow,
        settings: AppSettings,
        home: Path | None = None,
        flush_interval_ms: int = 250,
        persist_settings: bool = True,
        state_dir: Path | None = None,
        model_chosen: bool = False,
    ) -> None:
        super().__init__()
        protect_singletons()  # a long session makes more calls than None and True have references
        self.window = window
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("f2tta-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        self.link = WorkerLink(self.worker)
        self.timer = QTimer(self)
        self.timer.setObjectName("views-timer")
        self.timer.setInterval(flush_interval_ms)
        self.log_bridge = LogBridge("engine")
        state = OpenSession(settings, home, state_dir, persist_settings, model_chosen=model_chosen)
        self.controller = Controller(window, self.link, state, self.timer)
        events = self.controller.events
        for event, signal in (
            (events.session_changed, self.sessionChanged),
            (events.source_opened, self.sourceOpened),
            (events.load_failed, self.loadFailed),
            (events.run_finished, self.runFinished),
            (events.export_finished, self.exportFinished),
            (events.export_error, self.exportError),
        ):
            event.connect(signal.emit)
        events.shutdown_needed.connect(lambda _: self.shutdown())
        connect_on_ui_thread(self, window_connections(window, self.controller))
        connect_on_ui_thread(self, worker_connections(self.worker, self.controller, self.link.pdf))
        connect_on_ui_thread(self, app_connections(self.timer, self.log_bridge, self.controller))
        # Direct: quit() is called on the worker thread right after close(), which is thread-safe
        # (the UI thread may be waiting for the thread to end, see shutdown).
        self.worker.closed.connect(self.engine_thread.quit, Qt.ConnectionType.DirectConnection)
        collect_on_gui_thread()  # from now on no collection runs on the engine's thread (see the module)
        self.engine_thread.start()

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Stop any run (saving the state), release the session and end the worker thread."""
        if not self.engine_thread.isRunning():
            return
        controller = self.controller
        if controller.running:
            loop = QEventLoop()
            self.runFinished.connect(loop.quit)
            QTimer.singleShot(timeout_ms, loop.quit)
            if controller.phase is not Phase.STOPPING:
                controller.stop()
            loop.exec()
        self.timer.stop()
        self.log_bridge.detach()
        self.link.close()  # the worker releases the session and journal, then quits its thread
        if not self.engine_thread.wait(timeout_ms):
            logger.error("the engine thread did not end within %d ms", timeout_ms)
        controller.save_settings()
