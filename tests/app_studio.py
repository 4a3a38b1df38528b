"""The app under test: windows and their :class:`StudioApp` (controller, worker thread) on a tiny model,
each shut down at the end of a test.

The fixtures ``model``, ``home`` and ``studio`` (``tests/conftest.py``) build on :class:`Studio`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.core.settings import AppSettings
from app.shell.studio_app import StudioApp
from app.views.main_window import MainWindow

if TYPE_CHECKING:
    from app.control.controller import Controller

RUN_TIMEOUT_MS = 90_000
FAST_IDIPT = {"mc_passes": 2}  # fewer Monte-Carlo passes: same code paths, quicker on a CPU


class Studio:
    """Builds windows + their apps and shuts every one down at the end of a test."""

    def __init__(self, qtbot: object, home: Path, model: Path) -> None:
        self.qtbot = qtbot
        self.home = home
        self.model = model
        self.apps: list[StudioApp] = []

    def open(self, project: str = "default", state_dir: Path | None = None, **settings: object) -> StudioApp:
        window = MainWindow()
        self.qtbot.addWidget(window)  # type: ignore[attr-defined]
        # One image a step unless a test asks for more: pauses, stops and kills land between images.
        options = {"model": str(self.model), "method_config": FAST_IDIPT, "project": project, "batch": 1}
        options.update(settings)
        app = StudioApp(
            window,
            AppSettings(**options),  # type: ignore[arg-type]
            home=self.home,
            flush_interval_ms=20,
            state_dir=state_dir,
        )
        self.apps.append(app)
        with self.qtbot.waitSignal(app.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            app.controller.load_session()
        return app

    def open_folder(self, app: StudioApp, folder: Path) -> None:
        with self.qtbot.waitSignal(app.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            app.controller.open_folder(str(folder))

    def open_with(self, folder: Path, project: str = "default") -> StudioApp:
        """An app on ``project`` with ``folder`` open (as the user reopens it after a restart)."""
        app = self.open(project=project)
        self.open_folder(app, folder)
        return app

    def processed(self, folder: Path, project: str = "default") -> StudioApp:
        """An app on ``project`` that has run through ``folder`` to the end."""
        app = self.open_with(folder, project)
        self.run_to_end(app)
        return app

    def start_and_wait(self, app: StudioApp, folder: Path, rows: int) -> None:
        """Open ``folder``, start the run and return once ``rows`` results reached the model."""
        self.open_folder(app, folder)
        app.controller.start()
        self.qtbot.waitUntil(lambda: len(app.controller.model.rows) >= rows, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]

    def run_to_end(self, app: StudioApp) -> object:
        with self.qtbot.waitSignal(app.runFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
            app.controller.start()
        return blocker.args[0]

    def close(self, app: StudioApp) -> None:
        if app.engine_thread.isRunning():
            with self.qtbot.waitSignal(app.engine_thread.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
                app.shutdown()
        assert not app.engine_thread.isRunning()


def exported(app: object, out: Path, qtbot: object, ask: bool = True) -> tuple[bool, object]:
    """Export ``app``'s reports to ``out`` (``ask``: as the controller's export) and wait for the
    outcome: (True, paths) when it succeeded, (False, message) when it failed."""
    results: list[tuple[bool, object]] = []
    app.exportFinished.connect(lambda paths: results.append((True, paths)))  # type: ignore[attr-defined]
    app.exportError.connect(lambda message: results.append((False, message)))  # type: ignore[attr-defined]
    app.controller.export(out, ask=ask)  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: bool(results), timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    return results[0]


def table_keys(app: StudioApp) -> list[str]:
    return [r.key for r in app.window.table.model.rows]


def read_pdf_text(path: Path) -> tuple[int, str]:
    """Page count and text of a PDF, read back with pypdf (QtPdf is not in PySide6-Essentials)."""
    import unicodedata

    from pypdf import PdfReader

    reader = PdfReader(str(path))
    raw = "\n".join(page.extract_text() or "" for page in reader.pages)
    # pypdf returns the PDF's word gaps as tabs and keeps typographic ligatures (ﬁ): normalise both.
    return len(reader.pages), " ".join(unicodedata.normalize("NFKC", raw).split())


def settle() -> None:
    """Deliver what Qt has posted -- layouts, resizes, zero-time timers and what they post in turn --
    without waiting a fixed time."""
    from PySide6.QtWidgets import QApplication

    for _ in range(3):
        QApplication.processEvents()


def drain_worker(app: StudioApp) -> None:
    """Wait until the engine worker has served everything queued to it (twice over: a pull it
    scheduled meanwhile has run too), then deliver its answers here. After this, a paused or idle
    worker has had every chance to send a result, with no fixed sleep."""
    from PySide6.QtCore import QMetaObject, QObject, Qt, Slot

    class Probe(QObject):
        @Slot()
        def ping(self) -> None:
            pass

    probe = Probe()
    probe.moveToThread(app.engine_thread)
    for _ in range(2):
        QMetaObject.invokeMethod(probe, "ping", Qt.ConnectionType.BlockingQueuedConnection)
    probe.deleteLater()
    settle()


def started_window(
    qtbot: object, home: Path, n: int, settings: AppSettings | None = None
) -> tuple[MainWindow, Controller]:
    """The real window wired to a controller on a fake worker, as the app wires them, with the
    folder ``home / "site"`` of ``n`` images opened and its run started (no results yet)."""
    from controller_fakes import FakeTicker, FakeWorker, folder, session_info

    from app.control.controller import Controller
    from app.core.open_session import OpenSession
    from app.shell.wiring import window_connections

    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    state = OpenSession(settings or AppSettings(), home, persist_settings=False)
    c = Controller(window, FakeWorker(), state, FakeTicker())  # type: ignore[arg-type]
    for signal, handler in window_connections(window, c):
        signal.connect(handler)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    c.sessions.on_worker_source_ready(folder(home, n))
    c.start()
    return window, c
