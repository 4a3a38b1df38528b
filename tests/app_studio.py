"""The app under test: windows and controllers on a tiny model, each shut down at the end of a test.

The fixtures ``model``, ``home`` and ``studio`` (``tests/conftest.py``) build on :class:`Studio`.
"""

from __future__ import annotations

from pathlib import Path

from app.control.controller import Controller
from app.core.settings import AppSettings
from app.views.main_window import MainWindow

RUN_TIMEOUT_MS = 90_000
FAST_IDIPT = {"mc_passes": 2}  # fewer Monte-Carlo passes: same code paths, quicker on a CPU


class Studio:
    """Builds windows + controllers and shuts every one down at the end of a test."""

    def __init__(self, qtbot: object, home: Path, model: Path) -> None:
        self.qtbot = qtbot
        self.home = home
        self.model = model
        self.controllers: list[Controller] = []

    def open(self, profile: str = "default", state_dir: Path | None = None, **settings: object) -> Controller:
        window = MainWindow()
        self.qtbot.addWidget(window)  # type: ignore[attr-defined]
        options = {"model": str(self.model), "method_config": FAST_IDIPT, "profile": profile, **settings}
        controller = Controller(
            window,
            AppSettings(**options),  # type: ignore[arg-type]
            home=self.home,
            flush_interval_ms=20,
            state_dir=state_dir,
        )
        self.controllers.append(controller)
        with self.qtbot.waitSignal(controller.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            controller.load_session()
        return controller

    def open_folder(self, controller: Controller, folder: Path) -> None:
        with self.qtbot.waitSignal(controller.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            controller.open_folder(str(folder))

    def open_with(self, folder: Path, profile: str = "default") -> Controller:
        """A controller on ``profile`` with ``folder`` open (as the user reopens it after a restart)."""
        controller = self.open(profile=profile)
        self.open_folder(controller, folder)
        return controller

    def processed(self, folder: Path, profile: str = "default") -> Controller:
        """A controller on ``profile`` that has run through ``folder`` to the end."""
        controller = self.open_with(folder, profile)
        self.run_to_end(controller)
        return controller

    def start_and_wait(self, controller: Controller, folder: Path, rows: int) -> None:
        """Open ``folder``, start the run and return once ``rows`` results reached the model."""
        self.open_folder(controller, folder)
        controller.start()
        self.qtbot.waitUntil(lambda: len(controller.model.rows) >= rows, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]

    def run_to_end(self, controller: Controller) -> object:
        with self.qtbot.waitSignal(controller.runFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
            controller.start()
        return blocker.args[0]

    def close(self, controller: Controller) -> None:
        if controller.engine_thread.isRunning():
            with self.qtbot.waitSignal(controller.engine_thread.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
                controller.shutdown()
        assert not controller.engine_thread.isRunning()


def table_keys(controller: Controller) -> list[str]:
    return [r.key for r in controller.window.table.model.rows]


def read_pdf_text(path: Path) -> tuple[int, str]:
    """Page count and text of a PDF, read back with pypdf (QtPdf is not in PySide6-Essentials)."""
    import unicodedata

    from pypdf import PdfReader

    reader = PdfReader(str(path))
    raw = "\n".join(page.extract_text() or "" for page in reader.pages)
    # pypdf returns the PDF's word gaps as tabs and keeps typographic ligatures (ﬁ): normalise both.
    return len(reader.pages), " ".join(unicodedata.normalize("NFKC", raw).split())
