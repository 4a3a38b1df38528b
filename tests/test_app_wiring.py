"""Every signal has a receiver once the app is wired (``app/shell/wiring.py``), and the worker's
answers reach the controller on the UI thread (offscreen, pytest-qt).

Signals used to be connected by name (``fooBar`` to ``_on_<prefix>_foo_bar``): a signal whose
handler was missing or misspelt was silently left unconnected, and ``previewFailed`` shipped that
way. The tables are explicit now, and this test fails for a signal that nothing receives.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QMetaMethod, QObject, Signal, Slot

from app.core.settings import AppSettings
from app.shell.studio_app import StudioApp
from app.shell.wiring import app_connections, window_connections, worker_connections
from app.views.main_window import MainWindow

TIMEOUT_MS = 30_000


def declared_signals(obj: QObject) -> list[str]:
    """The signals ``obj``'s own (Python) classes declare, not Qt's."""
    names: list[str] = []
    for cls in type(obj).__mro__:
        if cls.__module__.split(".")[0] in ("PySide6", "shiboken6"):
            break
        names += [name for name, value in vars(cls).items() if isinstance(value, Signal)]
    return names


def without_receiver(obj: QObject) -> list[str]:
    meta = obj.metaObject()
    signals = [meta.method(i) for i in range(meta.methodCount())]
    signals = [m for m in signals if m.methodType() == QMetaMethod.MethodType.Signal]
    missing = []
    for name in declared_signals(obj):
        methods = [m for m in signals if bytes(m.name().data()).decode() == name]
        assert methods, f"{type(obj).__name__}.{name} is not in its meta-object"
        if not any(obj.isSignalConnected(m) for m in methods):
            missing.append(f"{type(obj).__name__}.{name}")
    return missing


@pytest.fixture
def studio_app(qtbot: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StudioApp]:
    monkeypatch.setenv("F2TTA_STUDIO_HOME", str(tmp_path / "home"))
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    app = StudioApp(window, AppSettings(), home=tmp_path / "home", persist_settings=False)
    yield app
    if app.engine_thread.isRunning():  # pytest-qt may have closed the window, which shuts down
        with qtbot.waitSignal(app.engine_thread.finished, timeout=TIMEOUT_MS):  # type: ignore[attr-defined]
            app.shutdown()
    assert not app.engine_thread.isRunning()


def test_every_signal_of_the_worker_the_window_and_its_views_has_a_receiver(studio_app: StudioApp) -> None:
    window = studio_app.window
    views = [
        window.image_view,
        window.slide_view,
        window.table,
        window.plots,
        window.metrics,
        window.log,
        window.banners,
        window.welcome,
    ]
    objects: list[QObject] = [
        studio_app.worker,
        studio_app.link,
        studio_app.link.pdf,
        studio_app.log_bridge,
        window,
        *views,
    ]
    assert len(declared_signals(studio_app.worker)) >= 18 and len(declared_signals(window)) >= 24
    missing = [name for obj in objects for name in without_receiver(obj)]
    assert not missing, f"signals that nothing receives: {missing}"


def test_the_tables_name_each_signal_once(studio_app: StudioApp) -> None:
    """Each window and worker signal is in its table once (``closed`` ends the thread directly)."""
    c = studio_app.controller
    tables = {
        "window": (studio_app.window, window_connections(studio_app.window, c)),
        "worker": (studio_app.worker, worker_connections(studio_app.worker, c, studio_app.link.pdf)),
    }
    pdf = [getattr(studio_app.link.pdf, s) for s in declared_signals(studio_app.link.pdf)]
    for name, (source, table) in tables.items():
        listed = [signal for signal, _ in table if not any(signal == p for p in pdf)]
        declared = [getattr(source, s) for s in declared_signals(source)]
        if name == "worker":
            declared.remove(studio_app.worker.closed)
        assert len(listed) == len(declared), name
        assert all(any(s == d for d in declared) for s in listed), name
    assert [s for s, _ in app_connections(studio_app.timer, studio_app.log_bridge, c)] == [
        studio_app.timer.timeout,
        studio_app.log_bridge.recordLogged,
    ]


class _OnWorkerThread(QObject):
    """Emits a worker signal from the worker's thread (as the worker itself would)."""

    fire = Signal()

    def __init__(self, emit: Callable[[], None]) -> None:
        super().__init__()
        self._emit = emit
        self.thread_id = 0

    @Slot()
    def run(self) -> None:
        self.thread_id = threading.get_ident()
        self._emit()


def test_the_workers_answers_reach_the_controller_on_the_ui_thread(
    studio_app: StudioApp, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PySide6 would run a plain object's method on the emitting thread; the wiring queues it."""
    seen: list[tuple[str, str, int]] = []
    status = studio_app.controller.status
    monkeypatch.setattr(status, "log", lambda level, text: seen.append((level, text, threading.get_ident())))
    worker = studio_app.worker
    emitter = _OnWorkerThread(lambda: worker.previewFailed.emit(3, "from the worker thread"))
    emitter.moveToThread(studio_app.engine_thread)
    trigger = _OnWorkerThread(lambda: None)
    trigger.fire.connect(emitter.run)  # queued: emitter lives in the worker's thread
    trigger.fire.emit()
    qtbot.waitUntil(lambda: bool(seen), timeout=TIMEOUT_MS)  # type: ignore[attr-defined]
    assert emitter.thread_id not in (0, threading.get_ident()), "emitted on the worker's thread"
    assert seen == [("warning", "The image cannot be shown: from the worker thread", threading.get_ident())]
