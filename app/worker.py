"""The engine worker: one long-lived QObject in its own QThread that owns the session and journal.

The per-image work is the engine's stream loop (:class:`engine.StreamRun`); the worker is a thin
generator worker around it, as napari's ``thread_worker``: it pulls one outcome per turn of its
thread's event loop, so queued requests (previews, reports, pause, stop) are served between
images. Results leave as immutable dataclasses (:mod:`app.messages`), batched so a fast GPU does
not flood the UI thread with one event per image.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app import notices
from app._engine import (
    F2TTAError,
    Failed,
    Journal,
    Outcome,
    Paused,
    Picture,
    Predicted,
    Saved,
    Session,
    SettingsMismatchError,
    Skipped,
    Slide,
    SlideSource,
    Source,
    SourceError,
    StateError,
    StreamRun,
    build_config,
    method_config_class,
    open_folder,
    open_slide_source,
    read_image,
    read_item,
    tile_reader,
)
from app.messages import (
    ItemFailure,
    ItemResult,
    RunEnded,
    RunReason,
    SessionInfo,
    SessionRequest,
    SourceOpened,
    SourceRequest,
)
from app.overlay import Overlay, preview_array
from app.profiles import Profile, ProfileError, ProfileStore
from app.reports import ReportData

logger = logging.getLogger(__name__)

EMIT_INTERVAL_S = 0.05  # results are sent to the UI at most this often (plus at pauses and the end)
PREVIEW_SIZE = 384  # longest side of the preview kept for display, in pixels


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, dtype=np.float32, copy=True)
    out.setflags(write=False)
    return out


class EngineWorker(QObject):
    """Owns the session, the profile's journal and the open slide; lives in the worker thread."""

    sessionReady = Signal(object)  # SessionInfo
    sessionFailed = Signal(str)
    sourceReady = Signal(object)  # SourceOpened
    sourceFailed = Signal(str)
    resultsReady = Signal(object)  # tuple[ItemResult, ...]
    itemFailed = Signal(object)  # ItemFailure
    paused = Signal()
    runEnded = Signal(object)  # RunEnded
    stateSaved = Signal(object)  # ProfileInfo
    saveFailed = Signal(str)
    resetDone = Signal(object)  # SessionInfo
    previewReady = Signal(int, object)  # stream position, (H, W, 3) uint8
    previewFailed = Signal(int, str)
    exported = Signal(object)  # list[Path]
    exportFailed = Signal(str)
    closed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._pause = threading.Event()
        self._stop = threading.Event()
        self._session: Session | None = None
        self._request: SessionRequest | None = None
        self._profile: Profile | None = None
        self._journal: Journal | None = None
        self._profile_error: str | None = None
        self._source: Source | None = None
        self._slide: Slide | None = None
        self._run: StreamRun | None = None
        self._outcomes: Iterator[Outcome] | None = None
        self._pending: list[ItemResult] = []
        self._last_emit = 0.0
        self._pulling = False

    # -- thread-safe controls (called from the UI thread) -------------------------------------
    def request_pause(self) -> None:
        self._pause.set()

    def request_stop(self) -> None:
        self._stop.set()

    # -- session -------------------------------------------------------------------------------
    @Slot(object)
    def open_session(self, request: SessionRequest) -> None:
        self._release()
        try:
            cls = method_config_class(request.method)
            config = build_config(cls, request.method_config) if cls is not None else None
            session = Session(
                request.model,
                method=request.method,
                method_config=config,
                device=None if request.device in ("", "auto") else request.device,
            )
        except Exception as exc:  # ModelLoadError, unknown method, bad settings, unavailable device, ...
            if not isinstance(exc, F2TTAError | KeyError | ValueError | TypeError | OSError | RuntimeError):
                logger.exception("loading %s failed", request.model)
            self.sessionFailed.emit(f"Cannot load the model {request.model}: {exc}")
            return
        try:
            if request.state_dir is not None:
                profile = Profile(request.state_dir, external=True)
            else:
                profile = ProfileStore(request.home).open(request.profile)
        except (ProfileError, OSError) as exc:
            self.sessionFailed.emit(f"Cannot open profile {request.profile!r}: {exc}")
            return
        self._session, self._request, self._profile = session, request, profile
        self._profile_error = self._open_journal(profile, session)
        self.sessionReady.emit(self._info())

    def _open_journal(self, profile: Profile, session: Session) -> str | None:
        """Open and restore the profile's journal; the user-facing reason when it cannot be used."""
        try:
            journal = profile.open_journal()
        except (StateError, OSError) as exc:
            return notices.profile_unusable(profile.name, exc)
        try:
            journal.restore(session)
            journal.check_space(session)
        except SettingsMismatchError as exc:
            journal.close()
            return notices.settings_differ(profile.name, exc.differences)
        except StateError as exc:
            self._journal = journal  # kept open (locked): a reset replaces the state
            return notices.state_unusable(profile.name, exc)
        self._journal = journal
        return None

    def _info(self) -> SessionInfo:
        assert self._session is not None and self._profile is not None and self._request is not None
        s = self._session
        return SessionInfo(
            card=s.card,
            model_path=str(self._request.model),
            method=s.method_name,
            device=str(s.device),
            fingerprint=s.fingerprint,
            state_fingerprint=s.state_fingerprint(),
            images_seen=int(s.images_seen),
            config=s.config_dict(),
            profile=self._profile.info(),
            profile_error=self._profile_error,
        )

    @Slot()
    def reset_state(self) -> None:
        """Back to the source model; the profile forgets its state and processed images."""
        if self._session is None or self._profile is None:
            return
        self._session.reset()
        try:
            if self._journal is None:
                self._journal = self._profile.open_journal()
            self._journal.clear()
            self._journal.save(self._session)
            self._profile.note_cleared()
            self._profile_error = None
        except (OSError, F2TTAError) as exc:
            self.saveFailed.emit(f"Profile '{self._profile.name}': the reset state cannot be written: {exc}")
        self.resetDone.emit(self._info())
        if self._source is not None and self._profile_error is None:
            self.sourceReady.emit(SourceOpened(self._source, 0, ()))

    # -- sources -------------------------------------------------------------------------------
    @Slot(object)
    def open_source(self, request: SourceRequest) -> None:
        if self._session is None or self._journal is None:
            self.sourceFailed.emit("Load a model before opening images.")
            return
        self._close_slide()
        card = self._session.card
        try:
            source: Source
            if request.kind == "slide":
                source = open_slide_source(request.path, card.img_size, card.mpp, request.min_tissue)
                self._slide = Slide(request.path)
            else:
                source = open_folder(request.path, card.classes, request.order, request.manifest)
            rows = tuple(self._journal.rows(source.source_id))
        except (F2TTAError, SourceError, OSError) as exc:
            self.sourceFailed.emit(str(exc))
            return
        except Exception as exc:  # never leave the UI waiting for an answer
            logger.exception("opening %s failed", request.path)
            self.sourceFailed.emit(f"{request.path}: cannot be opened ({type(exc).__name__}: {exc})")
            return
        self._source = source
        done = len(self._journal.source(source.source_id).done())
        self.sourceReady.emit(SourceOpened(source, done, rows))

    def _close_slide(self) -> None:
        if self._slide is not None:
            self._slide.close()
            self._slide = None

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
        )
        self._outcomes = self._run.outcomes()
        self._schedule()

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
        if isinstance(outcome, Predicted):
            step = outcome.step
            overlay = Overlay.from_step(
                step.grid, step.uncertainty, step.uncertain_tokens, step.reliable_tokens
            )
            preview = preview_array(outcome.image, PREVIEW_SIZE)
            self._pending.append(ItemResult(outcome.row, overlay, preview, _frozen(step.probs)))
        elif isinstance(outcome, Skipped):
            self._flush()
            item = outcome.item
            text = f"{item.name}: {outcome.reason}" if item.name not in outcome.reason else outcome.reason
            if outcome.transient:
                text += " (tried again next run)"
            self.itemFailed.emit(ItemFailure(item.position, item.name, text, outcome.transient))
        elif isinstance(outcome, Saved):
            if outcome.error is not None:
                name = self._profile.name if self._profile else "?"
                self.saveFailed.emit(f"Profile '{name}': {outcome.error}")
            elif self._profile is not None and self._session is not None:
                self.stateSaved.emit(self._profile.note_saved(self._session))
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
        s = run.summary
        message = error or (s.failure.message if s.failure else s.save_error or "")
        reason: RunReason = "failed" if error or s.failed else "stopped" if s.stopped else "finished"
        fingerprint = self._session.state_fingerprint() if self._session is not None else ""
        profile = self._profile.info() if self._profile is not None else None
        failed = len(s.skipped)
        self.runEnded.emit(RunEnded(reason, s.processed, failed, s.saved, profile, fingerprint, message))

    # -- jobs between images: previews for the viewer, reports ---------------------------------
    @Slot(int)
    def load_preview(self, position: int) -> None:
        """Read an image again for display (its preview was evicted or it is from an earlier session)."""
        source = self._source
        if source is None or not 0 <= position < len(source.items):
            return
        item = source.items[position]
        try:
            if item.tile is not None and self._slide is not None:
                image: Picture = self._slide.read_area(item.tile, PREVIEW_SIZE)
            elif item.path is not None:
                image = read_image(item.path)
            else:
                return
        except (F2TTAError, OSError) as exc:
            self.previewFailed.emit(position, str(exc))
            return
        self.previewReady.emit(position, preview_array(image, PREVIEW_SIZE))

    @Slot(str, object)
    def export_reports(self, directory: str, data: ReportData) -> None:
        from app.pdf_report import write_pdf
        from app.reports import PDF_NAME, write_tabular_reports

        target = Path(directory)
        try:
            written = write_tabular_reports(target, data)
            written.append(write_pdf(target / PDF_NAME, data))
        except Exception as exc:  # the scripted mode waits for one of the two answers
            if not isinstance(exc, OSError):
                logger.exception("writing reports failed")
            self.exportFailed.emit(f"Reports cannot be written to {target}: {exc}")
            return
        self.exported.emit(written)

    def _release(self) -> None:
        """Close the slide and the journal (its lock), forget the session."""
        self._close_slide()
        if self._journal is not None:
            self._journal.close()
        self._session = self._journal = self._source = self._run = self._outcomes = None

    @Slot()
    def close(self) -> None:
        """Release everything; the controller quits the thread afterwards."""
        self._release()
        self.closed.emit()
