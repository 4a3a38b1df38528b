"""The engine worker behind the controller's request interface (the Qt side of
:class:`app.control.requests.WorkerRequests`), with the export's PDF job
(:class:`~app.shell.pdf_job.PdfJob`), which the controller sees as part of the export.

:class:`WorkerLink` lives on the UI thread; each request is a queued signal to the
:class:`~app.worker.engine_worker.EngineWorker`'s slot in its own thread, so the request is served
between images. Pause and stop also set the worker's thread-safe flags at once, so a running image
loop sees them without waiting for its turn of the event loop.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.core.messages import RegionRequest, SessionRequest, SourceRequest
from app.reports.files import ReportData
from app.shell.pdf_job import PdfJob
from app.worker.engine_worker import EngineWorker


class WorkerLink(QObject):
    """Sends the controller's requests to ``worker`` (see the module notes)."""

    _openSession = Signal(object)  # SessionRequest
    _openSource = Signal(object)  # SourceRequest
    _resetState = Signal()
    _renameProject = Signal(str)
    _deleteProject = Signal(object, str)  # the studio home (Path | None), the project
    _start = Signal()
    _resume = Signal()
    _stop = Signal()
    _loadPreview = Signal(int)
    _readRegion = Signal(object)  # RegionRequest
    _exportReports = Signal(object, object)  # Path (a str signal cuts a name that is not UTF-8), ReportData
    _noteReports = Signal(object)  # Path
    _countNewImages = Signal()
    _close = Signal()

    def __init__(self, worker: EngineWorker) -> None:
        super().__init__()
        self._worker = worker
        self.pdf = PdfJob(self)  # the export's PDF, written here on the UI thread after the worker's part
        for request, slot in (
            (self._openSession, worker.open_session),
            (self._openSource, worker.open_source),
            (self._resetState, worker.reset_state),
            (self._renameProject, worker.rename_project),
            (self._deleteProject, worker.delete_project),
            (self._start, worker.start),
            (self._resume, worker.resume),
            (self._stop, worker.stop),
            (self._loadPreview, worker.load_preview),
            (self._readRegion, worker.read_region),
            (self._exportReports, worker.export_reports),
            (self._noteReports, worker.note_reports),
            (self._countNewImages, worker.count_new_images),
            (self._close, worker.close),
        ):
            request.connect(slot)

    def open_session(self, request: SessionRequest) -> None:
        self._openSession.emit(request)

    def open_source(self, request: SourceRequest) -> None:
        self._openSource.emit(request)

    def reset_state(self) -> None:
        self._resetState.emit()

    def rename_project(self, name: str) -> None:
        self._renameProject.emit(name)

    def delete_project(self, home: Path | None, name: str) -> None:
        self._deleteProject.emit(home, name)

    def start(self) -> None:
        self._start.emit()

    def pause(self) -> None:
        self._worker.request_pause()  # thread-safe: the run pauses after its current image

    def want_prompted(self) -> None:
        self._worker.request_prompted()  # thread-safe: the run sees it between batches

    def resume(self) -> None:
        self._resume.emit()

    def stop(self) -> None:
        self._worker.request_stop()  # a running loop sees it after its current image
        self._stop.emit()  # a paused run is finished by the worker's slot

    def load_preview(self, position: int) -> None:
        self._loadPreview.emit(position)

    def read_region(self, request: RegionRequest) -> None:
        self._readRegion.emit(request)

    def export_reports(self, directory: Path, data: ReportData) -> None:
        self._worker.request_export_cancel(False)
        self.pdf.expect()
        self._exportReports.emit(directory, data)

    def cancel_export(self) -> None:
        """Stop the export in progress, wherever it is (the worker's part or the PDF)."""
        self._worker.request_export_cancel()  # thread-safe: seen before the worker's next step
        self.pdf.cancel()

    def note_reports(self, directory: Path) -> None:
        self._noteReports.emit(directory)

    def count_new_images(self) -> None:
        self._countNewImages.emit()

    def close(self) -> None:
        """Release the session and journal; the worker emits ``closed`` and its thread ends."""
        self._close.emit()
