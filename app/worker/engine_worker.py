"""The engine worker: one long-lived QObject in its own QThread that owns the session and journal.

The per-image work is the engine's stream loop (:class:`engine.StreamRun`); the worker is a thin
generator worker around it, as napari's ``thread_worker``: it pulls one outcome per turn of its
thread's event loop, so queued requests (previews, reports, pause, stop) are served between images.
Results leave as immutable dataclasses (:mod:`app.core.messages`), batched so a fast GPU does not
flood the UI thread with one event per image. What it opens (session, journal, source) is
:mod:`app.worker.opening`'s; the messages it sends are made by :mod:`app.worker.results`."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app._engine import (
    F2TTAError,
    Failed,
    FolderSource,
    Journal,
    KindTally,
    Mapped,
    MapSkipped,
    Outcome,
    Paused,
    Predicted,
    PredictionRow,
    Prompted,
    Saved,
    Session,
    Skipped,
    Slide,
    SlideSource,
    Source,
    SourceError,
    StreamRun,
    default_batch,
    read_item,
    shown,
    tile_reader,
)
from app.core.messages import (
    ItemResult,
    RegionRequest,
    RunEnded,
    SessionInfo,
    SessionRequest,
    SourceOpened,
    SourceRequest,
)
from app.core.projects import Project, ProjectError, ProjectStore
from app.core.reviews import OverlayStore
from app.reports.files import ReportData
from app.worker import opening
from app.worker.controls import RunControls
from app.worker.exporting import TabularExport
from app.worker.io import PREVIEW_SIZE, judge_kind, new_images, read_preview, read_region
from app.worker.results import item_failure, item_result, run_ended, session_info

logger = logging.getLogger(__name__)

EMIT_INTERVAL_S = 0.05  # results are sent to the UI at most this often (plus at pauses and the end)


class EngineWorker(QObject, RunControls):
    """Owns the session, the project's journal and the open slide; lives in the worker thread."""

    sessionReady = Signal(object)  # SessionInfo
    sessionFailed = Signal(str, str)  # message, cause (app.worker.opening.OpenFailed)
    sourceReady = Signal(object)  # SourceOpened
    sourceFailed = Signal(str)
    resultsReady = Signal(object)  # tuple[ItemResult, ...]
    itemFailed = Signal(object)  # ItemFailure
    paused = Signal()
    runEnded = Signal(object)  # RunEnded
    stateSaved = Signal(object)  # ProjectInfo
    saveFailed = Signal(str)
    resetDone = Signal(object)  # SessionInfo
    projectFailed = Signal(str)  # a project could not be renamed or deleted
    previewReady = Signal(int, object)  # stream position, (H, W, 3) uint8
    previewFailed = Signal(int, str)
    regionReady = Signal(object)  # RegionRead
    exportProgress = Signal(str, int, int)  # what, done, of how many
    exported = Signal(object, object)  # StagedReports, ReportData with its gallery complete
    exportFailed = Signal(str)
    exportCancelled = Signal()
    newImages = Signal(int)  # images in the open folder that were not there when it opened
    closed = Signal()

    def __init__(self) -> None:
        super().__init__()
        RunControls.__init__(self)
        self._session: Session | None = None
        self._request: SessionRequest | None = None
        self._project: Project | None = None
        self._journal: Journal | None = None
        self._project_error: str | None = None
        self._source: Source | None = None
        self._slide: Slide | None = None
        self._overlays: OverlayStore | None = None
        self._tissue: np.ndarray | None = None  # the open slide's tissue mask (thumbnail grid)
        self._judged: KindTally | None = None  # what the open source's images look like
        self._run: StreamRun | None = None
        self._outcomes: Iterator[Outcome] | None = None
        self._pending: list[ItemResult] = []
        self._last_emit = 0.0
        self._pulling = False

    # -- session -------------------------------------------------------------------------------
    @Slot(object)
    def open_session(self, request: SessionRequest) -> None:
        self._release()
        try:
            opened = opening.open_session(request)
        except opening.OpenFailed as exc:
            self.sessionFailed.emit(str(exc), exc.cause)
            return
        self._session, self._request, self._project = opened.session, request, opened.project
        self._journal, self._project_error = opened.journal, opened.error
        self.sessionReady.emit(self._info())

    @Slot(str)
    def rename_project(self, new: str) -> None:
        """Rename the open project (released first), then open the session again under the new name."""
        request, project = self._request, self._project
        if request is None or project is None or project.external:
            self.sessionFailed.emit(
                "Only projects can be renamed or deleted, not a --state directory.", "project"
            )
            return
        self._release()
        try:
            ProjectStore(request.home).rename(project.name, new)
        except (ProjectError, OSError) as exc:
            self.projectFailed.emit(shown(exc))
            self.open_session(request)  # back to the project as it was
            return
        self.open_session(dataclasses.replace(request, project=new))

    @Slot(object, str)
    def delete_project(self, home: Path | None, name: str) -> None:
        """Delete the project ``name`` (the open one released first); the controller asks for the next."""
        if self._project is not None and not self._project.external and self._project.name == name:
            self._release()
        try:
            ProjectStore(home).delete(name)
        except (ProjectError, OSError) as exc:
            self.projectFailed.emit(shown(exc))

    def _info(self) -> SessionInfo:
        assert self._session is not None and self._project is not None and self._request is not None
        return session_info(self._session, self._request, self._project, self._project_error)

    @Slot()
    def reset_state(self) -> None:
        """Back to the source model; the project forgets its state and processed images."""
        if self._session is None or self._project is None:
            return
        self._session.reset()
        try:
            if self._journal is None:
                self._journal = self._project.open_journal()
            self._journal.clear()
            self._journal.save(self._session)
            self._project.note_cleared()
            self._project_error = None
        except (OSError, F2TTAError, ProjectError) as exc:
            self.saveFailed.emit(
                shown(f"Project '{self._project.name}': the reset state cannot be written: {exc}")
            )
        self.resetDone.emit(self._info())
        if self._source is not None and self._project_error is None:
            self.sourceReady.emit(self._opened(()))

    # -- sources -------------------------------------------------------------------------------
    @Slot(object)
    def open_source(self, request: SourceRequest) -> None:
        self._prompted.clear()  # another source: its review asks for its own
        if self._session is None or self._journal is None:
            self.sourceFailed.emit("Load a model before opening images.")
            return
        slide: Slide | None = None
        try:
            source, slide, tissue = opening.open_source(
                request, self._session.card, self._project, self._journal
            )
            rows = tuple(self._journal.rows(source.source_id))
        except Exception as exc:  # never leave the UI waiting for an answer; what was open stays open
            if slide is not None:
                slide.close()
            message = str(exc)
            if not isinstance(exc, F2TTAError | SourceError | OSError):
                logger.exception("opening %s failed", request.path)
                message = f"{request.path}: cannot be opened ({type(exc).__name__}: {exc})"
            self.sourceFailed.emit(shown(message))
            return
        self._close_slide()
        self._slide, self._source, self._tissue = slide, source, tissue
        self._judged = judge_kind(source)
        self.sourceReady.emit(self._opened(rows))

    def _opened(self, rows: tuple[PredictionRow, ...]) -> SourceOpened:
        """The open source with its restored rows, their kept overlays and the review folder."""
        assert self._source is not None and self._journal is not None and self._session is not None
        if self._overlays is not None:
            self._overlays.close()
        opened, self._overlays = opening.source_opened(
            self._source,
            rows,
            self._journal,
            self._project,
            self._session.card,
            self._tissue,
            self._judged,
        )
        return opened

    def _close_slide(self) -> None:
        if self._slide is not None:
            self._slide.close()
            self._slide = None
        if self._overlays is not None:
            self._overlays.close()
            self._overlays = None

    # -- the run: pull one outcome per event-loop turn ----------------------------------------
    @Slot()
    def start(self) -> None:
        if self._session is None or self._source is None or self._journal is None:
            self.runEnded.emit(RunEnded("failed", 0, 0, False, None, "", "Nothing to process."))
            return
        self._pause.clear()
        self._stop.clear()
        every = self._request.autosave_every if self._request is not None else 0
        source, slide = self._source, self._slide
        reader = tile_reader(slide, source.plan) if isinstance(source, SlideSource) and slide else read_item
        self._run = StreamRun(
            self._session,
            source.items,
            reader,
            source_id=self._source.source_id,
            journal=self._journal,
            save_every=max(every, 0),
            batch=self._batch(),
            arrival=(source.order, source.seed) if isinstance(source, FolderSource) else None,
            maps=self._request.maps if self._request is not None else "behind",
            prompted="behind" if self._prompted.is_set() else "on-demand",  # asked for by the review
            keep_images=PREVIEW_SIZE,  # what is read ahead holds a preview, never the whole picture
        )
        self._outcomes = self._run.outcomes()
        self._schedule()

    def _batch(self) -> int:  # the setting, else chosen from the device and the method
        assert self._session is not None
        chosen = self._request.batch if self._request is not None else 0
        return chosen if chosen > 0 else default_batch(self._session.device, self._session.max_batch)

    @Slot()
    def resume(self) -> None:
        self._pause.clear()
        self._schedule()

    @Slot()
    def stop(self) -> None:
        """Finish a paused run now; a running one sees the stop flag after its current image."""
        self._stop.set()
        self._schedule()

    def _schedule(self) -> None:
        if self._outcomes is not None and not self._pulling:
            self._pulling = True
            self._last_emit = time.monotonic()
            QTimer.singleShot(0, self._pull)

    @Slot()
    def _pull(self) -> None:
        run, outcomes = self._run, self._outcomes
        if run is None or outcomes is None:
            self._pulling = False
            return
        if self._prompted.is_set():
            run.request_prompted()
        if self._stop.is_set():
            run.request_stop()
        elif self._pause.is_set():
            self._pause.clear()
            run.request_pause()
        try:
            outcome = next(outcomes)
        except StopIteration:
            self._end_run()
            return
        except Exception as exc:  # a bug in the loop must not leave the UI waiting
            logger.exception("the stream loop failed")
            self._end_run(f"internal error ({type(exc).__name__}: {exc})")
            return
        if isinstance(outcome, Paused):
            self._pulling = False
            self._flush()
            self.paused.emit()
            return
        self._handle(outcome)
        if time.monotonic() - self._last_emit >= EMIT_INTERVAL_S:
            self._flush()
        QTimer.singleShot(0, self._pull)

    def _handle(self, outcome: Outcome) -> None:
        if isinstance(outcome, Predicted | Mapped | MapSkipped | Prompted):
            self._pending.append(item_result(outcome, self._overlays))
        elif isinstance(outcome, Skipped):
            self._flush()
            self.itemFailed.emit(item_failure(outcome))
        elif isinstance(outcome, Saved):
            if outcome.error is not None:
                name = self._project.name if self._project else "?"
                self.saveFailed.emit(shown(f"Project '{name}': {outcome.error}"))
            elif self._project is not None and self._session is not None:
                opening.note_progress(self._project, self._source, self._journal)
                try:
                    self.stateSaved.emit(self._project.note_saved(self._session))
                except (ProjectError, OSError) as exc:  # the state is saved; its listing is not
                    self.saveFailed.emit(shown(f"Project '{self._project.name}': {exc}"))
        elif isinstance(outcome, Failed):
            logger.debug("run failed: %s", outcome.message)

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = tuple(self._pending), []
            self.resultsReady.emit(batch)
        self._last_emit = time.monotonic()

    def _end_run(self, error: str = "") -> None:
        run = self._run
        self._pulling = False
        self._run = self._outcomes = None
        self._flush()
        self._stop.clear()
        self._pause.clear()
        assert run is not None
        fingerprint = self._session.state_fingerprint() if self._session is not None else ""
        project = self._project.info() if self._project is not None else None
        self.runEnded.emit(run_ended(run.summary, error, fingerprint, project))

    # -- jobs between images: previews for the viewer, reports ---------------------------------
    @Slot(int)
    def load_preview(self, position: int) -> None:
        """Read an image again for display (its preview was evicted or it is from an earlier session)."""
        try:
            preview = read_preview(self._source, self._slide, position)
        except (F2TTAError, OSError) as exc:
            self.previewFailed.emit(position, shown(exc))
            return
        if preview is not None:
            self.previewReady.emit(position, preview)

    @Slot(object)
    def read_region(self, request: RegionRequest) -> None:
        """Read a rectangle of the open slide at the pyramid level that suits ``max_side`` pixels."""
        if self._slide is not None:
            read = read_region(self._slide, request)
            if read is not None:
                self.regionReady.emit(read)

    @Slot(object, object)
    def export_reports(self, directory: Path, data: ReportData) -> None:
        """The tabular reports staged in ``directory`` and the gallery's images read, in steps
        (:class:`app.worker.exporting.TabularExport`); the PDF follows on the GUI thread."""
        source, slide = self._source, self._slide
        export = TabularExport(
            Path(directory), data, lambda p: read_preview(source, slide, p), self._export_stop
        )
        failure = export.run(self.exportProgress.emit)
        if export.staged is not None:
            self.exported.emit(export.staged, export.data)
        else:
            (self.exportFailed.emit(failure) if failure else self.exportCancelled.emit())

    @Slot()
    def count_new_images(self) -> None:
        """How many images the open folder holds now that it did not hold when it opened."""
        if self._run is None and isinstance(self._source, FolderSource):
            self.newImages.emit(new_images(self._source))

    @Slot(object)
    def note_reports(self, directory: Path) -> None:
        """The open source's reports are in ``directory`` (its project's list of inputs says so)."""
        opening.note_reports(self._project, self._source, Path(directory))

    def _release(self) -> None:
        """Close the slide and the journal (its lock), forget the session."""
        self._close_slide()
        if self._journal is not None:
            self._journal.close()
        self._session = self._journal = self._source = self._run = self._outcomes = None

    @Slot()
    def close(self) -> None:
        """Release everything; ``closed`` then ends the thread (:class:`app.shell.studio_app.StudioApp`)."""
        self._release()
        self.closed.emit()
