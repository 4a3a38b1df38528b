"""The engine worker: one long-lived QObject in its own QThread that owns the session.

Every engine call happens on the worker thread. Requests arrive as queued signals; pause and
stop are also thread-safe flags, so they take effect after the current image even while the
worker is busy. Results leave as immutable dataclasses (numpy arrays made read-only), batched so
a fast GPU does not flood the UI thread with one event per image.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app._engine import (
    F2TTAError,
    PredictionRow,
    Session,
    Slide,
    SlideSource,
    Source,
    SourceError,
    StateError,
    StreamItem,
    make_row,
    method_config_class,
    open_folder,
    open_slide_source,
    read_image,
)
from app.overlay import Overlay, preview_array
from app.profiles import Profile, ProfileError, ProfileInfo, ProfileRecord, ProfileStore

logger = logging.getLogger(__name__)

EMIT_INTERVAL_S = 0.05  # results are sent to the UI at most this often (plus at pauses and the end)
MAX_CONSECUTIVE_FAILURES = 25  # a run stops when this many images in a row fail
PREVIEW_SIZE = 384  # longest side of the preview kept for display, in pixels


@dataclass(frozen=True)
class SessionRequest:
    model: Path
    method: str
    method_config: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    profile: str = "default"
    home: Path | None = None  # studio home (profiles), None = default
    autosave_every: int = 100


@dataclass(frozen=True)
class SessionInfo:
    card: Any  # engine.ModelCard (frozen dataclass)
    model_path: str
    method: str
    device: str
    fingerprint: str
    state_fingerprint: str
    images_seen: int
    config: dict[str, Any]
    profile: ProfileInfo
    profile_error: str | None = None  # the profile's state could not be loaded; reset it to use it


@dataclass(frozen=True)
class SourceRequest:
    path: Path
    kind: str  # "folder" or "slide"
    order: str = "name"
    manifest: Path | None = None
    min_tissue: float = 0.25


@dataclass(frozen=True)
class SourceOpened:
    source: Source
    done_keys: frozenset[str]
    restored_rows: tuple[PredictionRow, ...]


@dataclass(frozen=True)
class ItemResult:
    row: PredictionRow
    overlay: Overlay
    preview: np.ndarray | None  # (H, W, 3) uint8, read-only
    probs: np.ndarray  # (C,) float32, read-only


@dataclass(frozen=True)
class ItemFailure:
    position: int
    name: str
    kind: str  # "read", "memory" or "engine"
    message: str


@dataclass(frozen=True)
class RunEnded:
    reason: str  # "finished", "stopped" or "failed"
    processed: int  # images processed in this run
    failed: int  # images that could not be processed in this run
    saved: bool  # the state was written to the profile
    profile: ProfileInfo | None
    state_fingerprint: str
    message: str = ""


def _frozen(array: np.ndarray | None, dtype: Any = None) -> np.ndarray | None:
    if array is None:
        return None
    out = np.array(array, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


class EngineWorker(QObject):
    """Owns the engine session; lives in the worker thread (see :class:`app.controller.Controller`)."""

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
        self._session: Any = None
        self._request: SessionRequest | None = None
        self._profile: Profile | None = None
        self._profile_error: str | None = None
        self._record = ProfileRecord()
        self._source: Source | None = None
        self._slide: Any = None
        self._queue: deque[StreamItem] = deque()
        self._pending: list[ItemResult] = []
        self._last_emit = 0.0
        self._looping = False
        self._run_processed = 0
        self._run_failed = 0
        self._consecutive_failures = 0
        self._since_save = 0

    # -- thread-safe controls (called from the UI thread) -------------------------------------
    def request_pause(self) -> None:
        self._pause.set()

    def request_stop(self) -> None:
        self._stop.set()

    # -- session -------------------------------------------------------------------------------
    @Slot(object)
    def open_session(self, request: SessionRequest) -> None:
        self._close_slide()
        self._session, self._source, self._queue = None, None, deque()
        try:
            cls = method_config_class(request.method)
            config = cls(**request.method_config) if cls is not None and request.method_config else None
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
            profile = ProfileStore(request.home).open(request.profile)
        except (ProfileError, OSError) as exc:
            self.sessionFailed.emit(f"Cannot open profile {request.profile!r}: {exc}")
            return
        self._session, self._request, self._profile = session, request, profile
        self._profile_error = None
        try:
            self._record = profile.load(session)
        except StateError as exc:
            self._record = ProfileRecord()
            self._profile_error = (
                f"The saved state of profile '{profile.name}' cannot be used: {str(exc).rstrip('.')}. "
                "Reset the profile to the source model, or choose another profile."
            )
        self.sessionReady.emit(self._info())

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
        self._record = ProfileRecord()
        self._profile_error = None
        try:
            self._profile.clear()
            self._save()
        except (OSError, F2TTAError) as exc:
            self.saveFailed.emit(f"Profile '{self._profile.name}': the reset state cannot be written: {exc}")
        self.resetDone.emit(self._info())
        if self._source is not None:
            self._queue = deque(self._source.items)
            self.sourceReady.emit(SourceOpened(self._source, frozenset(), ()))

    # -- sources -------------------------------------------------------------------------------
    @Slot(object)
    def open_source(self, request: SourceRequest) -> None:
        if self._session is None or self._profile is None:
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
        except (F2TTAError, SourceError, OSError) as exc:
            self.sourceFailed.emit(str(exc))
            return
        except Exception as exc:  # never leave the UI waiting for an answer
            logger.exception("opening %s failed", request.path)
            self.sourceFailed.emit(f"{request.path}: cannot be opened ({type(exc).__name__}: {exc})")
            return
        done = self._record.keys(source.source_id)
        self._source = source
        self._queue = deque(item for item in source.items if item.key not in done)
        restored = tuple(self._profile.read_rows(source.source_id, done)) if done else ()
        self.sourceReady.emit(SourceOpened(source, frozenset(done), restored))

    def _close_slide(self) -> None:
        if self._slide is not None:
            self._slide.close()
            self._slide = None

    # -- the run -------------------------------------------------------------------------------
    @Slot()
    def start(self) -> None:
        self._pause.clear()
        self._stop.clear()
        self._run_processed = self._run_failed = self._consecutive_failures = 0
        self._begin_loop()

    @Slot()
    def resume(self) -> None:
        self._pause.clear()
        self._begin_loop()

    @Slot()
    def stop(self) -> None:
        """Finish a paused run now; a running loop sees the stop flag after its current image."""
        self._stop.set()
        if not self._looping:
            self._end_run("stopped")

    def _begin_loop(self) -> None:
        if self._looping:
            return
        if self._session is None or self._source is None:
            self.runEnded.emit(RunEnded("failed", 0, 0, False, None, "", "Nothing to process."))
            return
        self._looping = True
        self._last_emit = time.monotonic()
        QTimer.singleShot(0, self._process_next)

    @Slot()
    def _process_next(self) -> None:
        if self._stop.is_set():
            self._end_run("stopped")
            return
        if self._pause.is_set():
            self._looping = False
            self._flush()
            self.paused.emit()
            return
        if not self._queue:
            self._end_run("finished")
            return
        item = self._queue.popleft()
        self._process(item)
        now = time.monotonic()
        if now - self._last_emit >= EMIT_INTERVAL_S:
            self._flush()
        if self._consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
            self._end_run("failed", f"{self._consecutive_failures} images in a row could not be processed")
            return
        QTimer.singleShot(0, self._process_next)

    def _read(self, item: StreamItem) -> Any:
        if item.tile is not None:
            assert isinstance(self._source, SlideSource)
            return self._slide.read_tile(self._source.plan, item.tile)
        assert item.path is not None
        return read_image(item.path)

    def _process(self, item: StreamItem) -> None:
        assert self._source is not None and self._session is not None
        try:
            image = self._read(item)
        except (F2TTAError, OSError) as exc:
            self._fail(item, "read", str(exc))
            return
        try:
            step = self._session.step(image)
        except Exception as exc:  # the run goes on: one bad image must not end a night's stream
            if _is_out_of_memory(exc):
                self._fail(item, "memory", f"{item.name}: out of memory while adapting; image skipped")
            else:
                logger.exception("engine step failed on %s", item.name)
                self._fail(item, "engine", f"{item.name}: the engine failed ({type(exc).__name__}: {exc})")
            return
        card = self._session.card
        row = make_row(item, step, card.classes, card.positive_class)
        overlay = Overlay.from_step(step.grid, step.uncertainty, step.uncertain_tokens, step.reliable_tokens)
        probs = _frozen(step.probs, np.float32)
        assert probs is not None
        self._pending.append(ItemResult(row, overlay, preview_array(image, PREVIEW_SIZE), probs))
        self._record.add(self._source.source_id, row)
        self._run_processed += 1
        self._consecutive_failures = 0
        self._since_save += 1
        every = self._request.autosave_every if self._request else 0
        if every and self._since_save >= every:
            self._save_reporting()

    def _fail(self, item: StreamItem, kind: str, message: str) -> None:
        self._run_failed += 1
        self._consecutive_failures += 1
        self._flush()
        self.itemFailed.emit(ItemFailure(item.position, item.name, kind, message))

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = tuple(self._pending), []
            self.resultsReady.emit(batch)
        self._last_emit = time.monotonic()

    def _save(self) -> ProfileInfo | None:
        if self._session is None or self._profile is None or self._profile_error:
            return None
        info = self._profile.save(
            self._session, self._record, self._session.fingerprint, self._session.method_name
        )
        self._since_save = 0
        return info

    def _save_reporting(self) -> bool:
        try:
            info = self._save()
        except (OSError, F2TTAError) as exc:
            name = self._profile.name if self._profile else "?"
            self.saveFailed.emit(f"Profile '{name}': the adaptation state cannot be written ({exc})")
            return False
        if info is not None:
            self.stateSaved.emit(info)
        return info is not None

    def _end_run(self, reason: str, message: str = "") -> None:
        self._looping = False
        self._flush()
        saved = self._save_reporting()
        self._stop.clear()
        self._pause.clear()
        fingerprint = self._session.state_fingerprint() if self._session is not None else ""
        profile = self._profile.info() if self._profile is not None else None
        self.runEnded.emit(
            RunEnded(reason, self._run_processed, self._run_failed, saved, profile, fingerprint, message)
        )

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
                image: Any = self._slide.read_area(item.tile, PREVIEW_SIZE)
            elif item.path is not None:
                image = read_image(item.path)
            else:
                return
        except (F2TTAError, OSError) as exc:
            self.previewFailed.emit(position, str(exc))
            return
        self.previewReady.emit(position, preview_array(image, PREVIEW_SIZE))

    @Slot(str, object)
    def export_reports(self, directory: str, data: Any) -> None:
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

    @Slot()
    def save_now(self) -> None:
        self._save_reporting()

    @Slot()
    def close(self) -> None:
        """Release the slide and the session; the controller quits the thread afterwards."""
        self._close_slide()
        self._session = None
        self._queue.clear()
        self.closed.emit()

    @property
    def queue_length(self) -> int:
        return len(self._queue)
