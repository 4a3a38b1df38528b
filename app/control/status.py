"""The phase, the log and the controller's events: what every part of the controller reports
through, and the :class:`ControllerContext` that hands the parts what they share.

Qt-free. The controller (:mod:`app.control.controller`) makes one :class:`Status`, one
:class:`ControllerEvents` and one :class:`ControllerContext` and hands the context to its parts
(:mod:`app.control.session_controller`, :mod:`app.control.project_actions`), so each part shows
the phase and logs the same way without reaching into the others.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

from app.control.requests import Ticker, WorkerRequests
from app.control.view import View
from app.core.messages import RunEnded, SessionInfo, SourceOpened
from app.core.open_session import OpenSession
from app.core.phase import Phase, actions_for
from app.core.run_items import Notifier
from app.core.run_model import RunModel

logger = logging.getLogger(__name__)
RUNNING = (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED, Phase.STOPPING)
TICKING = (Phase.RUNNING, Phase.PAUSING, Phase.STOPPING)  # results arrive: the views are paced by the timer
_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING}


@dataclass
class ControllerEvents:
    """What the controller announces (the scripted mode follows them; the app mirrors them as Qt
    signals, :class:`app.shell.studio_app.StudioApp`).

    Attributes:
        session_changed: a session was loaded.
        source_opened: a source was opened.
        load_failed: the model, the project's state or a source could not be opened.
        run_finished: a run ended, after its results reached the views.
        export_finished: reports were written (their paths).
        export_error: they were not (why).
        shutdown_needed: the window was closed during a run, which has now stopped and saved: end
            the worker (the window closes right after).
    """

    session_changed: Notifier[SessionInfo] = field(default_factory=Notifier)
    source_opened: Notifier[SourceOpened] = field(default_factory=Notifier)
    load_failed: Notifier[str] = field(default_factory=Notifier)
    run_finished: Notifier[RunEnded] = field(default_factory=Notifier)
    export_finished: Notifier[list[Path]] = field(default_factory=Notifier)
    export_error: Notifier[str] = field(default_factory=Notifier)
    shutdown_needed: Notifier[None] = field(default_factory=Notifier)


class Status:
    """Shows the phase (the enabled actions, the status text) and logs messages.

    Args:
        view: the window.
        state: the open session (its phase, its errors for the reports).
        model: the run model (what is pending, whether there are rows).
        ticker: the timer that paces the views; it runs while results arrive.
    """

    def __init__(self, view: View, state: OpenSession, model: RunModel, ticker: Ticker) -> None:
        self._view, self._state, self._model, self._ticker = view, state, model, ticker

    @property
    def phase(self) -> Phase:
        return self._state.phase

    def set_phase(self, phase: Phase, status: str | None = None) -> None:
        """Enter ``phase``: the window's actions and status text follow, the timer runs or stops."""
        self._state.phase = phase
        info, m = self._state.info, self._model
        actions = actions_for(phase, has_session=self._state.usable, pending=m.pending, has_rows=bool(m.rows))
        if info is not None and info.project_error:  # only a reset can make such a project usable
            actions = dataclasses.replace(actions, reset=phase in (Phase.EMPTY, Phase.DONE))
        if status is None and m.source is None and phase is Phase.DONE:
            status = "open a folder or slide"
        elif status is None and phase is Phase.READY and m.progress.done:
            status = f"ready · {m.pending} left"
        self._view.set_actions(phase, actions, status)
        if phase in TICKING:
            self._ticker.start()
        else:
            self._ticker.stop()

    def log(self, level: str, message: str) -> None:
        """Show ``message`` in the log panel (errors also in the status bar and the reports)."""
        self._view.log_message(level, message)
        logger.log(_LEVELS.get(level, logging.INFO), message)
        if level == "error":
            self._state.errors.append(message)
            self._view.show_status(message)


@dataclass(frozen=True)
class ControllerContext:
    """What the controller's parts share (one object instead of six arguments to each).

    Attributes:
        view: the window.
        worker: the engine worker's requests.
        state: the open session (settings, project, model).
        model: the run model (rows, figures, review).
        status: the phase and the log.
        events: what the controller announces.
    """

    view: View
    worker: WorkerRequests
    state: OpenSession
    model: RunModel
    status: Status
    events: ControllerEvents
