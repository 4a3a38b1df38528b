"""What the controller asks of the engine worker and of the view timer (Qt-free protocols).

The worker lives in its own thread; :class:`app.shell.worker_link.WorkerLink` satisfies
:class:`WorkerRequests` by emitting queued signals to it (and setting its thread-safe pause and
stop flags). Its answers come back to the controller's ``on_worker_*`` methods, wired in
:mod:`app.shell.wiring`. The controller's tests satisfy both protocols with fakes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from app.core.messages import RegionRequest, SessionRequest, SourceRequest
from app.reports.files import ReportData


class WorkerRequests(Protocol):
    """The requests the controller sends the engine worker; each answer arrives later, as an event."""

    def open_session(self, request: SessionRequest) -> None:
        """Load the model, method and project (answer: session ready or failed)."""
        ...

    def open_source(self, request: SourceRequest) -> None:
        """Open a folder or a slide (answer: source ready or failed)."""
        ...

    def reset_state(self) -> None:
        """Back to the source model; the project forgets its state (answer: reset done)."""
        ...

    def rename_project(self, name: str) -> None:
        """Rename the open project, then reopen the session under ``name``."""
        ...

    def delete_project(self, home: Path | None, name: str) -> None:
        """Delete the project ``name`` of ``home`` (the open one released first; answer only when it
        fails: project failed). The next session is asked for separately."""
        ...

    def start(self) -> None:
        """Process the open source's pending images (answers: results, then run ended)."""
        ...

    def pause(self) -> None:
        """Pause after the current image (answer: paused)."""
        ...

    def resume(self) -> None: ...

    def want_prompted(self) -> None:
        """Make I-DiPT's prompted decisions of the open source behind its maps, in the run going on
        and the next ones (answers: results with ``prompted_only``)."""
        ...

    def stop(self) -> None:
        """Stop after the current image (or now, when paused) and save (answer: run ended)."""
        ...

    def load_preview(self, position: int) -> None:
        """Read an image again for display (answer: preview ready or failed)."""
        ...

    def read_region(self, request: RegionRequest) -> None:
        """Read a rectangle of the open slide (answer: region ready)."""
        ...

    def export_reports(self, directory: Path, data: ReportData) -> None:
        """Write every report into ``directory`` (answers: progress, then reports written, failed
        or cancelled); the folder changes only when all of them are written."""
        ...

    def cancel_export(self) -> None:
        """Stop the export in progress; nothing in its folder changes (answer: cancelled)."""
        ...

    def note_reports(self, directory: Path) -> None:
        """The open source's reports were written into ``directory`` (the project remembers it)."""
        ...

    def count_new_images(self) -> None:
        """Count the images copied into the open folder since it opened (answer: new images)."""
        ...


class Ticker(Protocol):
    """The timer that calls :meth:`app.control.controller.Controller.tick` while a run goes on
    (a ``QTimer`` in the app)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
