"""Scripted use: ``f2tta-studio PATH --run --export DIR --quit-when-done`` (smoke checks, batch use).

:class:`ScriptedRun` drives a :class:`~app.control.controller.Controller` through its public API and
its events -- load the session, open PATH, run, export, quit -- and ends with an exit code. A plain
object, like the controller.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from app.control.controller import Controller
from app.core.messages import RunEnded, SessionInfo, SourceOpened
from app.core.run_items import Notifier

EXIT_OK = 0
EXIT_FAILED = 1  # the model, project, source, state or reports could not be used
EXIT_ITEM_ERRORS = 3  # the run completed, but some images could not be processed
EXIT_GATE = 4  # the model may not apply (as f2tta run): nothing was run without --accept-warnings


@dataclass(frozen=True)
class ScriptOptions:
    """What the command line asks for."""

    path: Path | None = None
    run: bool = False
    export: Path | None = None
    quit_when_done: bool = False
    accept_warnings: bool = False  # run what the applicability gate flags (in a project of its own)


class Stage(enum.Enum):
    SESSION = "loading the session"
    SOURCE = "opening the source"
    RUN = "running"
    EXPORT = "exporting"
    DONE = "done"


class ScriptedRun:
    """Follows the controller's events from the session to the export; ``finished(code)`` at the end.

    ``finished`` is emitted only with ``quit_when_done``; :attr:`exit_code` is kept either way.
    """

    def __init__(self, controller: Controller, options: ScriptOptions) -> None:
        self.controller, self.options = controller, options
        self.finished: Notifier[int] = Notifier()
        self.exit_code = EXIT_OK
        self.stage = Stage.SESSION if options.path is not None else Stage.DONE
        events = controller.events
        events.session_changed.connect(self.on_session_changed)
        events.source_opened.connect(self.on_source_opened)
        events.load_failed.connect(self.on_load_failed)
        events.run_finished.connect(self.on_run_finished)
        events.export_finished.connect(self.on_export_finished)
        events.export_error.connect(self.on_export_error)

    def on_session_changed(self, info: SessionInfo) -> None:
        if self.stage is Stage.SESSION and not info.project_error and self.options.path is not None:
            self.stage = Stage.SOURCE
            path = self.options.path
            if path.is_dir():
                self.controller.open_folder(str(path))
            else:
                self.controller.open_slide(str(path))

    def on_source_opened(self, opened: SourceOpened) -> None:
        if self.stage is not Stage.SOURCE:
            return
        self.stage = Stage.RUN
        model = self.controller.model
        if self.options.run and model.pending and model.gate and not self.options.accept_warnings:
            for warning in model.gate:
                self.controller.log("error", warning)
            self.controller.log(
                "error", "Nothing was run: the model may not apply (--accept-warnings runs it)."
            )
            self._finish(EXIT_GATE)
        elif self.options.run and model.pending:
            self.controller.start(ask=False)  # flagged images run in a project of their own
        else:
            self._after_run()

    def on_load_failed(self, message: str) -> None:
        if self.stage in (Stage.SESSION, Stage.SOURCE):
            self._finish(EXIT_FAILED)

    def on_run_finished(self, ended: RunEnded) -> None:
        if self.stage is not Stage.RUN:
            return
        if ended.reason == "failed" or not ended.saved:
            self.exit_code = EXIT_FAILED
        elif ended.failed and self.exit_code == EXIT_OK:
            self.exit_code = EXIT_ITEM_ERRORS
        self._after_run()

    def _after_run(self) -> None:
        if self.options.export is not None:
            self.stage = Stage.EXPORT
            self.controller.export(self.options.export, ask=False)  # nobody to ask: refused
        else:
            self._finish(self.exit_code)

    def on_export_finished(self, paths: list[Path]) -> None:
        if self.stage is Stage.EXPORT:
            self._finish(self.exit_code)

    def on_export_error(self, message: str) -> None:
        if self.stage is Stage.EXPORT:
            self._finish(EXIT_FAILED)

    def _finish(self, code: int) -> None:
        self.stage = Stage.DONE
        self.exit_code = code
        if self.options.quit_when_done:
            self.finished.emit(code)
