"""A fake window, a fake engine worker and a fake timer for the plain controller, and the worker's
answers as the tests play them (Qt-free: ``tests/test_controller_plain.py`` checks that nothing here
loads PySide6)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from app_fixtures import CLASSES, sample_row

from app.control.controller import Controller
from app.control.requests import WorkerRequests
from app.control.view import View
from app.core.messages import ItemResult, RunEnded, SessionInfo, SourceOpened
from app.core.open_session import OpenSession
from app.core.overlay import Overlay
from app.core.projects import DEFAULT_PROJECT, ProjectInfo
from app.core.settings import AppSettings
from engine import FolderSource, ModelCard, PredictionRow, StreamItem

CARD = ModelCard(
    arch="vit_tiny_patch16_224",
    classes=CLASSES,
    img_size=32,
    model_kwargs={"depth": 2, "patch_size": 8},
    source_domain="test",
)
W = TypeVar("W")


def _members(protocol: type) -> set[str]:
    """The names a protocol declares (methods, properties and attributes)."""
    return {n for n in vars(protocol) if not n.startswith("_")} | set(protocol.__annotations__)


class _Recorder:
    """Records each call of the protocol's methods; any other name is an error, as with a spec'd mock."""

    _protocol: type = object

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.answers: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _members(self._protocol):
            raise AttributeError(f"{self._protocol.__name__} has no {name!r}: the controller may not ask it")

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args))
            answer = self.answers.get(name)
            if isinstance(answer, Exception):
                raise answer
            return answer

        return record

    def of(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.calls if called == name]

    def last(self, name: str) -> tuple[Any, ...]:
        found = self.of(name)
        assert found, f"{name} was never called"
        return found[-1]

    def names(self) -> list[str]:
        return [called for called, _ in self.calls]


class FakeView(_Recorder):
    """The window: records what the controller shows; ``answers`` are its replies to questions."""

    _protocol = View

    def __init__(self) -> None:
        super().__init__()
        self.close_allowed = True
        self.following = True
        self.answers = {"plot_png": b"png", "confirm": True, "edit_settings": None}

    def actions(self) -> Any:
        return self.last("set_actions")[1]

    def logged(self, level: str) -> list[str]:
        return [text for lvl, text in self.of("log_message") if lvl == level]


class FakeWorker(_Recorder):
    """The engine worker: records the requests; the tests play its answers."""

    _protocol = WorkerRequests


class FakeTicker:
    def __init__(self) -> None:
        self.running = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False


def make(
    home: Path, persist: bool = False, **settings: Any
) -> tuple[Controller, FakeView, FakeWorker, FakeTicker]:
    view, worker, ticker = FakeView(), FakeWorker(), FakeTicker()
    state = OpenSession(AppSettings(**settings), home, persist_settings=persist)
    controller = Controller(view, worker, state, ticker)  # type: ignore[arg-type]
    return controller, view, worker, ticker


def session_info(home: Path, project: str = DEFAULT_PROJECT, error: str | None = None) -> SessionInfo:
    return SessionInfo(
        CARD,
        "tiny.safetensors",
        "idipt",
        "cpu",
        "model-fp",
        "state-fp",
        0,
        {},
        project_info(home, project),
        error,
    )


def project_info(home: Path, project: str = DEFAULT_PROJECT, seen: int = 0) -> ProjectInfo:
    return ProjectInfo(project, home / "profiles" / project, images_seen=seen)


def folder(home: Path, n: int, review: bool = True) -> SourceOpened:
    root = home / "site"
    root.mkdir(parents=True, exist_ok=True)
    items = tuple(StreamItem(i, f"k{i}", f"img{i}.png", path=root / f"img{i}.png") for i in range(n))
    review_dir = home / "profiles" / DEFAULT_PROJECT / "review" if review else None
    return SourceOpened(FolderSource(root, "name", items), 0, (), review_dir=review_dir)


def shown(qtbot: object, widget: W, width: int, height: int) -> W:
    """``widget`` handed to ``qtbot``, ``width``×``height``, shown and on screen."""
    qtbot.addWidget(widget)  # type: ignore[attr-defined]
    widget.resize(width, height)  # type: ignore[attr-defined]
    widget.show()  # type: ignore[attr-defined]
    qtbot.waitExposed(widget)  # type: ignore[attr-defined]
    return widget


def window_on_folder(qtbot: object, home: Path, n: int, wired: bool = False) -> Controller:
    """The real main window (shown, 1280×800) with its controller, a fake worker and a fake timer,
    a labelled folder of ``n`` images open (PySide6 is loaded only when this is called); ``wired``:
    the window's requests connected to the controller as the app wires them."""
    from app.shell.wiring import window_connections
    from app.views.main_window import MainWindow

    window = shown(qtbot, MainWindow(), 1280, 800)
    state = OpenSession(AppSettings(), home, persist_settings=False)
    c = Controller(window, FakeWorker(), state, FakeTicker())  # type: ignore[arg-type]
    for signal, handler in window_connections(window, c) if wired else ():
        signal.connect(handler)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    c.sessions.on_worker_source_ready(folder(home, n))
    return c


def labelled_folder(home: Path, truths: Sequence[int | None], origin: str) -> SourceOpened:
    """:func:`folder` of ``len(truths)`` images whose dataset labels them ``truths`` (None: not
    labelled), the labels read from ``origin``."""
    opened = folder(home, len(truths))
    items = tuple(
        dataclasses.replace(it, ground_truth=t) for it, t in zip(opened.source.items, truths, strict=True)
    )
    labelled = dataclasses.replace(opened.source, items=items, label_origin=origin)  # type: ignore[arg-type]
    return dataclasses.replace(opened, source=labelled)


def results(*positions: int) -> tuple[ItemResult, ...]:
    overlay = Overlay.from_step((2, 2), np.full((2, 2), 0.5), np.array([0]), np.array([3]))
    preview = np.zeros((4, 4, 3), np.uint8)
    return tuple(
        ItemResult(sample_row(i), overlay, preview, np.array([0.1, 0.9], np.float32)) for i in positions
    )


def ended(reason: str, processed: int, home: Path, saved: bool = True) -> RunEnded:
    return RunEnded(reason, processed, 0, saved, project_info(home, seen=processed), "state-fp")  # type: ignore[arg-type]


def opened(
    home: Path, n: int = 6, review: bool = True
) -> tuple[Controller, FakeView, FakeWorker, FakeTicker]:
    """A controller with a session loaded and a folder of ``n`` images open (the worker's answers played)."""
    c, view, worker, ticker = make(home)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    c.sessions.on_worker_source_ready(folder(home, n, review))
    return c, view, worker, ticker


def events_seen(c: Controller) -> dict[str, list[Any]]:
    """What the controller announced, by event (``run_finished``: the ``RunEnded`` values, ...)."""
    seen: dict[str, list[Any]] = {}
    for event in dataclasses.fields(c.events):
        seen[event.name] = []
        getattr(c.events, event.name).connect(seen[event.name].append)
    return seen


def results_of(rows: list[PredictionRow]) -> tuple[ItemResult, ...]:
    """The worker's results for these rows."""
    overlay = Overlay.from_step((2, 2), np.full((2, 2), 0.5), np.array([0]), np.array([3]))
    return tuple(ItemResult(r, overlay, None, np.array([0.1, 0.9], np.float32)) for r in rows)


def reopened(
    home: Path, rows: list[PredictionRow], n: int
) -> tuple[Controller, FakeView, FakeWorker, FakeTicker]:
    """A new controller (a restart) on the same project, the folder open with ``rows`` restored from
    the journal (``n`` images in the folder)."""
    c, view, worker, ticker = make(home)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    restored = tuple(dataclasses.replace(r, restored=True) for r in rows)
    c.sessions.on_worker_source_ready(
        dataclasses.replace(folder(home, n), done=len(rows), restored_rows=restored)
    )
    return c, view, worker, ticker
