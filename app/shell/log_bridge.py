"""Engine log records (warnings and errors, from any thread) forwarded to the UI's log panel."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal


class _Handler(logging.Handler):
    def __init__(self, bridge: LogBridge, level: int) -> None:
        super().__init__(level)
        self._bridge = bridge

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = "error" if record.levelno >= logging.ERROR else "warning"
            self._bridge.recordLogged.emit(level, record.getMessage())
        except RuntimeError:  # the bridge's C++ object is gone (the app is closing)
            pass


class LogBridge(QObject):
    """Attach a handler to a logger; its records arrive as ``recordLogged(level, message)``.

    The signal is emitted on whatever thread logged (usually the engine worker) and delivered
    queued to the bridge's thread, so slots run on the UI thread. Per-image events (the collapse
    guard, skipped updates) are not logged by the engine: they arrive in the step's diagnostics,
    which the app shows with the image they belong to.
    """

    recordLogged = Signal(str, str)

    def __init__(self, logger_name: str = "engine", level: int = logging.WARNING) -> None:
        super().__init__()
        self._logger = logging.getLogger(logger_name)
        self._handler = _Handler(self, level)
        self._logger.addHandler(self._handler)

    def detach(self) -> None:
        self._logger.removeHandler(self._handler)
