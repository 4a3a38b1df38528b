"""Python's cyclic garbage collector, run on the GUI thread only.

CPython runs a cycle collection in whichever thread happens to allocate when a generation's count
passes its threshold. In the app that is often the engine's worker thread (torch allocates a lot),
and a collection there may free the Python wrappers of Qt objects that belong to the GUI thread:
a closed dialog's menus and actions, a replaced window. Destroying a ``QObject`` takes Qt's
connection mutexes and may call back into Python (PySide6 looks for Python overrides), which needs
the GIL; the GUI thread, meanwhile, holds the GIL while it deletes other Qt objects and waits for
the same mutexes. Seen in CI: the worker in ``QObject::~QObject`` called from a collection,
waiting for the GIL; the GUI thread in ``QObject::~QObject`` of a menu, waiting for a Qt mutex; no
progress for ever.

:class:`GuiThreadCollector` turns automatic collection off and collects, with the thresholds CPython
would have used, from a timer on the GUI thread, so that no Qt object is ever freed by a
collection on another thread. Reference counting, which frees almost everything, is unaffected;
only cycles wait up to one timer interval.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 250


class GuiThreadCollector(QObject):
    """Collects cyclic garbage from a timer on the thread it was created on (the GUI thread)."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        self.was_enabled = gc.isenabled()
        gc.disable()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.collect_due)
        self.timer.start()

    def collect_due(self) -> int:
        """Collect the generations whose counts passed CPython's thresholds; returns the generation or -1."""
        counts = gc.get_count()
        if counts[0] <= self.thresholds[0]:
            return -1
        generation = 0
        # A generation is due once the younger one was collected more often than its threshold.
        while generation < 2 and counts[generation + 1] > self.thresholds[generation + 1]:
            generation += 1
        gc.collect(generation)
        return generation

    def stop(self) -> None:
        """Stop collecting here, collect once, and give collection back to CPython."""
        self.timer.stop()
        gc.collect()
        if self.was_enabled:
            gc.enable()


_installed: GuiThreadCollector | None = None


def collect_on_gui_thread() -> GuiThreadCollector:
    """Install the collector for this process (idempotent); :class:`~app.shell.studio_app.StudioApp` calls it
    on the GUI thread before it starts the engine's thread."""
    global _installed
    if _installed is None:
        _installed = GuiThreadCollector(QCoreApplication.instance())
    return _installed


def give_back() -> None:
    """Undo :func:`collect_on_gui_thread` (the tests call it after each test)."""
    global _installed
    if _installed is not None:
        _installed.stop()
        _installed.deleteLater()
        _installed = None
