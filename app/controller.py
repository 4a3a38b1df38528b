"""The controller: wires the passive views to the engine worker and keeps the Qt-free run state.

The worker lives in one long-lived QThread. Requests go to it as queued signals; its results
come back as signals carrying immutable dataclasses, are buffered, and reach the views on a
timer (``flush_interval_ms``) so the UI redraws a few times a second however fast the engine is.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QEventLoop,
    QIODevice,
    QObject,
    Qt,
    QThread,
    QTimer,
    Signal,
    Slot,
)

from app import APP_NAME
from app._engine import SlideSource
from app.log_bridge import LogBridge
from app.overlay import Overlay, widen_levels
from app.profiles import ProfileError, ProfileInfo, ProfileStore, check_name
from app.reports import ReportData
from app.rows import PredictionRow, RowFilter
from app.settings import AppSettings, available_devices, method_fields, save_settings
from app.state import LruCache, MessageThrottle, Phase, ProgressMeter, actions_for
from app.stats import RunStatistics, segment_size_for
from app.views.main_window import MainWindow
from app.worker import (
    EngineWorker,
    ItemFailure,
    ItemResult,
    RunEnded,
    SessionInfo,
    SessionRequest,
    SourceOpened,
    SourceRequest,
)

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ITEM_ERRORS = 3  # the run completed, but some images could not be processed


@dataclass(frozen=True)
class ScriptOptions:
    """What ``f2tta-studio PATH --run --export DIR --quit-when-done`` asks for."""

    path: Path | None = None
    run: bool = False
    export: Path | None = None
    quit_when_done: bool = False


class Controller(QObject):
    """Connects :class:`MainWindow` to an :class:`EngineWorker` in its own thread.

    Signals:
        sessionChanged(object): a session was loaded (:class:`SessionInfo`).
        sourceOpened(object): a source was opened (:class:`SourceOpened`).
        runFinished(object): a run ended (:class:`RunEnded`), after its results reached the views.
        exportFinished(object): reports were written (list of paths).
        scriptFinished(int): a scripted session is over; the argument is the exit code.
    """

    sessionChanged = Signal(object)
    sourceOpened = Signal(object)
    runFinished = Signal(object)
    exportFinished = Signal(object)
    exportError = Signal(str)
    scriptFinished = Signal(int)

    # requests to the worker (queued: the worker lives in another thread)
    _requestSession = Signal(object)
    _requestSource = Signal(object)
    _requestStart = Signal()
    _requestResume = Signal()
    _requestStop = Signal()
    _requestReset = Signal()
    _requestPreview = Signal(int)
    _requestExport = Signal(str, object)
    _requestClose = Signal()

    def __init__(
        self,
        window: MainWindow,
        settings: AppSettings,
        home: Path | None = None,
        script: ScriptOptions | None = None,
        flush_interval_ms: int = 250,
        persist_settings: bool = True,
    ) -> None:
        super().__init__()
        self.window = window
        self.settings = settings
        self.home = home
        self.script = script or ScriptOptions()
        self.persist_settings = persist_settings
        self.phase = Phase.EMPTY
        self.info: SessionInfo | None = None
        self.source: Any = None
        self.pending = 0  # images of the source not processed yet
        self.stats = RunStatistics(low_confidence=settings.low_confidence)
        self.progress = ProgressMeter()
        self.overlays: dict[int, Overlay] = {}
        self.previews = LruCache(256)
        self.errors: list[str] = []
        self.notes: list[str] = []
        self._buffer: list[ItemResult] = []
        self._row_of_position: dict[int, int] = {}
        self._row_of_cell: dict[tuple[int, int], int] = {}
        self._selected: int | None = None  # stream position shown in the image view
        self._run_failures = 0
        self._run_guard_events = 0
        self._run_skipped_updates = 0
        self._exit_code = EXIT_OK
        self._script_stage = "session" if self.script.path else "idle"
        self._closing = False
        self.images_seen = 0  # live count of the session, shown next to the profile
        self.last_run: RunEnded | None = None
        self._cells: list[tuple[int, int, float]] = []  # slide heat-map cells not drawn yet
        self._newest: int | None = None  # newest stream position in the table
        self._unshown_rows: list[PredictionRow] = []  # processed, not in the table yet
        self._plots_dirty = False
        self._images_dirty = False
        self._tick = 0
        self.heat_levels: tuple[float, float] | None = None  # heat-map range shared by the stream
        self.latest_profile: ProfileInfo | None = None

        self.engine_thread = QThread()
        self.engine_thread.setObjectName("f2tta-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        self._connect_worker()
        self._connect_views()
        self.log_bridge = LogBridge("engine")
        self.log_bridge.recordLogged.connect(self._on_engine_logged)
        self._throttle = MessageThrottle()
        self._skip_throttle = MessageThrottle()  # a NaN storm must not flood the log
        self.flush_timer = QTimer(self)
        self.flush_timer.setInterval(flush_interval_ms)
        self.flush_timer.timeout.connect(self.flush)
        self.engine_thread.start()
        window.image_view.set_opacity(settings.overlay_opacity)
        window.table.threshold_spin.setValue(settings.low_confidence)
        window.set_order(settings.order)
        self._refresh_profiles()
        self._set_phase(Phase.EMPTY)

    # -- wiring -------------------------------------------------------------------------------
    def _connect_worker(self) -> None:
        w = self.worker
        self._requestSession.connect(w.open_session)
        self._requestSource.connect(w.open_source)
        self._requestStart.connect(w.start)
        self._requestResume.connect(w.resume)
        self._requestStop.connect(w.stop)
        self._requestReset.connect(w.reset_state)
        self._requestPreview.connect(w.load_preview)
        self._requestExport.connect(w.export_reports)
        self._requestClose.connect(w.close)
        # Direct: quit() is called on the worker thread right after close(), which is thread-safe.
        w.closed.connect(self.engine_thread.quit, Qt.ConnectionType.DirectConnection)
        w.sessionReady.connect(self._on_worker_session_ready)
        w.sessionFailed.connect(self._on_worker_session_failed)
        w.sourceReady.connect(self._on_worker_source_ready)
        w.sourceFailed.connect(self._on_worker_source_failed)
        w.resultsReady.connect(self._on_worker_results_ready)
        w.itemFailed.connect(self._on_worker_item_failed)
        w.paused.connect(self._on_worker_paused)
        w.runEnded.connect(self._on_worker_run_ended)
        w.stateSaved.connect(self._on_worker_state_saved)
        w.saveFailed.connect(self._on_worker_save_failed)
        w.resetDone.connect(self._on_worker_reset_done)
        w.previewReady.connect(self._on_worker_preview_ready)
        w.previewFailed.connect(self._on_worker_preview_failed)
        w.exported.connect(self._on_worker_exported)
        w.exportFailed.connect(self._on_worker_export_failed)

    def _connect_views(self) -> None:
        win = self.window
        win.openFolderRequested.connect(self.open_folder)
        win.openSlideRequested.connect(self.open_slide)
        win.orderChanged.connect(self._on_window_order_changed)
        win.startRequested.connect(self.start)
        win.pauseRequested.connect(self.pause)
        win.resumeRequested.connect(self.resume)
        win.stopRequested.connect(self.stop)
        win.resetRequested.connect(self.reset_to_source)
        win.exportRequested.connect(self.export)
        win.settingsRequested.connect(self._on_window_settings_requested)
        win.aboutRequested.connect(self._on_window_about_requested)
        win.profileSelected.connect(self.select_profile)
        win.newProfileRequested.connect(self._on_window_new_profile_requested)
        win.closeRequested.connect(self._on_window_close_requested)
        win.table.rowSelected.connect(self._on_table_row_selected)
        win.table.filterChanged.connect(self._on_table_filter_changed)
        win.slide_view.tileClicked.connect(self._on_slide_tile_clicked)
        win.image_view.opacityChanged.connect(self._on_image_opacity_changed)

    # -- phase & messages ---------------------------------------------------------------------
    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        actions = actions_for(
            phase,
            has_session=self.info is not None and not self.info.profile_error,
            pending=self.pending,
            has_rows=self.window.table.model.rowCount() > 0,
        )
        if self.info is not None and self.info.profile_error:
            actions = dataclasses.replace(actions, reset=phase in (Phase.EMPTY, Phase.DONE))
        status = "open a folder or slide" if phase is Phase.DONE and self.source is None else None
        self.window.set_actions(phase, actions, status)
        running = phase in (Phase.RUNNING, Phase.PAUSING, Phase.STOPPING)
        if running and not self.flush_timer.isActive():
            self.flush_timer.start()
        elif not running:
            self.flush_timer.stop()

    def log(self, level: str, message: str) -> None:
        self.window.log.add(level, message)
        getattr(logger, "warning" if level == "warning" else level if level == "error" else "info")(message)
        if level == "error":
            self.errors.append(message)
            self.window.statusBar().showMessage(message, 8000)

    @Slot(str, str)
    def _on_engine_logged(self, level: str, message: str) -> None:
        shown = self._throttle.admit(message)
        if shown is not None:
            self.window.log.add(level, f"engine: {shown}")

    # -- session ------------------------------------------------------------------------------
    def load_session(self) -> None:
        """(Re)load the model, method and profile from the current settings."""
        s = self.settings
        self.info = None
        self._set_phase(Phase.LOADING)
        self.window.model_label.setText("loading model…")
        self._requestSession.emit(
            SessionRequest(
                model=s.model_path(),
                method=s.method,
                method_config=dict(s.method_config),
                device=s.device,
                profile=s.profile,
                home=self.home,
                autosave_every=s.autosave_every,
            )
        )

    @Slot(object)
    def _on_worker_session_ready(self, info: SessionInfo) -> None:
        self.info = info
        self.latest_profile = info.profile
        self.images_seen = info.images_seen
        self.last_run = None
        card = info.card
        self.window.model_label.setText(
            f"{Path(info.model_path).name} · {card.arch} · {info.method} · {info.device}"
        )
        self.window.set_profile_summary(self._profile_text())
        self._refresh_profiles()
        self.log(
            "info",
            f"Model {info.model_path} loaded ({info.method} on {info.device}, {len(card.classes)} classes)",
        )
        if info.profile_error:
            self.log("error", info.profile_error)
            self._set_phase(Phase.EMPTY)
            self.sessionChanged.emit(info)
            self._script_fail()
            return
        self.log("info", self._profile_text())
        self.sessionChanged.emit(info)
        reopen = self.script.path if self._script_stage == "session" else self._source_path()
        if self._script_stage == "session":
            self._script_stage = "source"
        if reopen is not None:
            self._open(Path(reopen))
        else:
            self._set_phase(Phase.DONE)

    @Slot(str)
    def _on_worker_session_failed(self, message: str) -> None:
        self.log("error", message)
        self.window.model_label.setText("no model loaded")
        self._set_phase(Phase.EMPTY)
        self._script_fail()

    def _source_path(self) -> Path | None:
        if self.source is None:
            return None
        return self.source.path if isinstance(self.source, SlideSource) else self.source.root

    # -- sources ------------------------------------------------------------------------------
    @Slot(str)
    def open_folder(self, path: str) -> None:
        self._request_source(SourceRequest(Path(path), "folder", self.settings.order))

    @Slot(str)
    def open_slide(self, path: str) -> None:
        self._request_source(SourceRequest(Path(path), "slide", min_tissue=self.settings.min_tissue))

    def _open(self, path: Path) -> None:
        if path.is_dir():
            self.open_folder(str(path))
        else:
            self.open_slide(str(path))

    def _request_source(self, request: SourceRequest) -> None:
        if self.info is None:
            self.log("error", "Load a model before opening images (Settings…).")
            return
        self._set_phase(Phase.LOADING)
        self.log("info", f"Opening {request.kind} {request.path} …")
        self._requestSource.emit(request)

    @Slot(object)
    def _on_worker_source_ready(self, opened: SourceOpened) -> None:
        source = opened.source
        self.source = source
        self._clear_results()
        total = len(source.items)
        self.pending = total - len(opened.done_keys)
        self.stats = RunStatistics(
            positive_class=self.info.card.positive_class if self.info else 1,
            segment_size=segment_size_for(total),
            low_confidence=self.settings.low_confidence,
        )
        win = self.window
        win.plots.set_extent(total, self.stats.segment_size)
        if isinstance(source, SlideSource):
            plan = source.plan
            thumb_w = source.thumbnail.shape[1]
            win.slide_view.set_slide(
                source.thumbnail,
                plan.grid,
                plan.footprint * thumb_w / source.dimensions[0],
                f"{source.display_name} · {source.vendor} · {plan.describe()}",
            )
            win.show_slide_panel(True)
        else:
            win.show_slide_panel(False)
        win.table.follow_box.setChecked(True)
        self._append_rows(list(opened.restored_rows))
        self.progress.start(total - self.pending, total)
        win.set_progress(self.progress.progress())
        self.window.setWindowTitle(f"{source.display_name} — {APP_NAME}")
        labels = f", ground truth from {source.label_origin}" if source.label_origin else ", no ground truth"
        self.log("info", f"Opened {source.display_name}: {total} images{labels}; {self.pending} to process")
        if opened.restored_rows:
            self.log(
                "info",
                f"{len(opened.restored_rows)} images were processed in an earlier session (profile '{self.settings.profile}')",
            )
        self.notes = list(source.notes)
        for note in source.notes:
            self.log("warning", note)
        self.image_view_message(
            "Select a row to show its image" if opened.restored_rows else "Press Start to process"
        )
        self._set_phase(Phase.READY if self.pending else Phase.DONE)
        self.sourceOpened.emit(opened)
        if self._script_stage == "source":
            self._script_stage = "run"
            if self.script.run and self.pending:
                self.start()
            else:
                self._script_after_run()

    @Slot(str)
    def _on_worker_source_failed(self, message: str) -> None:
        self.log("error", message)
        self._set_phase(Phase.DONE if self.info else Phase.EMPTY)
        if self._script_stage == "source":
            self._script_fail()

    def image_view_message(self, text: str) -> None:
        self.window.image_view.clear(text)

    def _clear_results(self) -> None:
        self._buffer.clear()
        self.window.table.model.clear()
        self.overlays.clear()
        self.previews.clear()
        self._row_of_position.clear()
        self._row_of_cell.clear()
        self._selected = None
        self._cells = []
        self._newest = None
        self.heat_levels = None
        self._unshown_rows = []
        self._plots_dirty = self._images_dirty = False
        self.window.plots.set_data(None)
        self.window.slide_view.reset_values() if self.window.slide_view.values.size else None

    # -- running ------------------------------------------------------------------------------
    @Slot()
    def start(self) -> None:
        if self.info is None or self.source is None or not self.pending:
            return
        self._run_failures = 0
        self._run_guard_events = self._run_skipped_updates = 0
        self.progress.start(self.progress.done, self.progress.total)
        self._set_phase(Phase.RUNNING)
        self.log("info", f"Run started: {self.pending} images")
        self._requestStart.emit()

    @Slot()
    def pause(self) -> None:
        if self.phase is Phase.RUNNING:
            self.worker.request_pause()
            self._set_phase(Phase.PAUSING)

    @Slot()
    def resume(self) -> None:
        if self.phase is Phase.PAUSED:
            self.progress.start(self.progress.done, self.progress.total)
            self._set_phase(Phase.RUNNING)
            self._requestResume.emit()

    @Slot()
    def stop(self) -> None:
        if self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED):
            self.worker.request_stop()
            self._set_phase(Phase.STOPPING)
            self._requestStop.emit()

    @Slot(object)
    def _on_worker_results_ready(self, batch: tuple[ItemResult, ...]) -> None:
        self._buffer.extend(batch)

    @Slot()
    def flush(self, force: bool = False) -> None:
        """Move buffered results into the views, one group of views per timer tick.

        Progress is updated on every tick; the table, the plots and the images take turns (or all
        at once when ``force``), so no single repaint has to redraw the whole window while the
        engine competes for the same CPU cores.
        """
        if self._buffer:
            batch, self._buffer = self._buffer, []
            for result in batch:
                self.overlays[result.row.position] = result.overlay
                self.heat_levels = widen_levels(self.heat_levels, result.overlay)
                if result.preview is not None:
                    self.previews.put(result.row.position, result.preview)
                self._note_events(result.row)
            self._unshown_rows.extend(r.row for r in batch)
            self.pending = max(self.pending - len(batch), 0)
            self.images_seen += len(batch)
            self.progress.add(len(batch))
        self.window.set_progress(self.progress.progress())
        groups = (self._flush_table, self._flush_plots, self._flush_images)
        if force:
            for group in groups:
                group()
        else:
            groups[self._tick % len(groups)]()
            self._tick += 1

    def _note_events(self, row: PredictionRow) -> None:
        """Log the collapse guard's actions and skipped updates as their images arrive."""
        if row.guard_message:
            self._run_guard_events += 1
            text = f"{row.name}: {row.guard_message}"
            self.log("warning", text)
            self.window.statusBar().showMessage(text, 8000)
        if row.update_skipped:
            self._run_skipped_updates += 1
            shown = self._skip_throttle.admit(
                f"{row.name}: non-finite loss or gradient on image {row.index}, update skipped "
                "(the adaptation keeps its last good state)",
                key="update skipped",
            )
            if shown is not None:
                self.log("warning", shown)

    def _flush_table(self) -> None:
        if self._unshown_rows:
            rows, self._unshown_rows = self._unshown_rows, []
            self._append_rows(rows, redraw=False)
            self._newest = rows[-1].position
            self._plots_dirty = self._images_dirty = True

    def _flush_plots(self) -> None:
        if self._plots_dirty:
            self._plots_dirty = False
            self.window.set_profile_summary(self._profile_text())
            self.window.plots.set_data(self.stats.plot_data())

    def _flush_images(self) -> None:
        if not self._images_dirty:
            return
        self._images_dirty = False
        if self._cells:
            self.window.slide_view.set_values(self._cells)
            self._cells = []
        if self.window.table.follow and self._newest is not None:
            self.show_position(self._newest, keep_view=True)
            self.window.table.scroll_to_newest()

    def _append_rows(self, rows: list[PredictionRow], redraw: bool = True) -> None:
        if not rows:
            return
        model = self.window.table.model
        first = model.rowCount()
        for offset, row in enumerate(rows):
            self._row_of_position[row.position] = first + offset
            if row.tile is not None:
                self._row_of_cell[(row.tile[1], row.tile[0])] = first + offset
                self._cells.append((row.tile[1], row.tile[0], row.positive_prob))
        model.append_rows(rows)
        self.stats.extend(rows)
        if redraw:
            self.window.plots.set_data(self.stats.plot_data())
            self.window.slide_view.set_values(self._cells)
            self._cells = []

    @Slot(object)
    def _on_worker_item_failed(self, failure: ItemFailure) -> None:
        self._run_failures += 1
        self.log(
            "error",
            failure.message if failure.name in failure.message else f"{failure.name}: {failure.message}",
        )

    @Slot()
    def _on_worker_paused(self) -> None:
        self.flush(force=True)
        self.progress.pause()
        if self.phase is Phase.PAUSING:
            self._set_phase(Phase.PAUSED)
            self.log("info", f"Paused after {self.progress.done} of {self.progress.total} images")

    @Slot(object)
    def _on_worker_run_ended(self, ended: RunEnded) -> None:
        self.flush(force=True)
        self.progress.pause()
        self.window.set_progress(self.progress.progress())
        self.last_run = ended
        if ended.profile is not None:
            self.latest_profile = ended.profile
            self.window.set_profile_summary(self._profile_text())
        text = f"Run {ended.reason}: {ended.processed} images processed"
        if ended.failed:
            text += f", {ended.failed} could not be processed"
        if self._run_guard_events:
            text += f", collapse guard acted {_times(self._run_guard_events)}"
        if self._run_skipped_updates:
            text += f", update skipped {_times(self._run_skipped_updates)} (non-finite loss)"
        if ended.message:
            text += f" ({ended.message})"
        text += "; state saved" if ended.saved else "; state NOT saved"
        self.log("error" if ended.reason == "failed" else "info", text)
        self._set_phase(Phase.READY if self.pending else Phase.DONE)
        self.runFinished.emit(ended)
        if self._closing:
            self._finish_close()
        elif self._script_stage == "run":
            if ended.reason == "failed" or not ended.saved:
                self._exit_code = EXIT_FAILED
            elif ended.failed and self._exit_code == EXIT_OK:
                self._exit_code = EXIT_ITEM_ERRORS
            self._script_after_run()

    @Slot(object)
    def _on_worker_state_saved(self, info: ProfileInfo) -> None:
        self.latest_profile = info
        self.window.set_profile_summary(self._profile_text())

    def _profile_text(self) -> str:
        info = self.latest_profile
        return "" if info is None else info.summary(self.images_seen)

    @Slot(str)
    def _on_worker_save_failed(self, message: str) -> None:
        self.log("error", message)

    # -- showing images -----------------------------------------------------------------------
    def show_position(self, position: int, keep_view: bool = False) -> None:
        """Show the image at stream ``position`` with its overlay (loading it if needed)."""
        if self.source is None or not 0 <= position < len(self.source.items):
            return
        self._selected = position
        row_index = self._row_of_position.get(position)
        row = self.window.table.model.row_at(row_index) if row_index is not None else None
        if row is not None and row.tile is not None:
            self.window.slide_view.highlight(row.tile[1], row.tile[0])
        preview = self.previews.get(position)
        if preview is None:
            self.window.image_view.clear(f"Loading {self.source.items[position].name} …")
            self._requestPreview.emit(position)
            return
        self.window.image_view.show_image(
            preview, self.overlays.get(position), self._title(row), keep_view, self.heat_levels
        )

    @staticmethod
    def _title(row: PredictionRow | None) -> str:
        if row is None:
            return ""
        text = f"<b>#{row.index}</b> {row.name} — <b>{row.prediction_label}</b> ({row.confidence:.2f})"
        text += f", source: {row.source_label} ({row.source_confidence:.2f})"
        if row.truth_label:
            text += f", truth: {row.truth_label}"
        if math.isfinite(row.uncertainty):
            text += f", mean uncertainty {row.uncertainty:.4f}"
        if row.restored:
            text += " <i>(earlier session: no overlay)</i>"
        return text

    @Slot(int, object)
    def _on_worker_preview_ready(self, position: int, image: np.ndarray) -> None:
        self.previews.put(position, image)
        if position == self._selected:
            self.show_position(position)

    @Slot(int, str)
    def _on_worker_preview_failed(self, position: int, message: str) -> None:
        self.log("error", message)
        if position == self._selected:
            self.window.image_view.clear(f"Cannot show this image: {message}")

    @Slot(int)
    def _on_table_row_selected(self, source_row: int) -> None:
        self.show_position(self.window.table.model.row_at(source_row).position)

    @Slot(int, int)
    def _on_slide_tile_clicked(self, row: int, col: int) -> None:
        table_row = self._row_of_cell.get((row, col))
        if table_row is None:
            return
        self.window.table.follow_box.setChecked(False)
        self.window.table.select_source_row(table_row)
        self.show_position(self.window.table.model.row_at(table_row).position)

    @Slot(object)
    def _on_table_filter_changed(self, row_filter: RowFilter) -> None:
        if row_filter.mode == "uncertain":
            values = np.array([r.uncertainty for r in self.window.table.model.rows], dtype=float)
            values = values[np.isfinite(values)]
            threshold = float(np.quantile(values, 0.9)) if values.size else math.nan
            self.window.table.set_filter(dataclasses.replace(row_filter, high_uncertainty=threshold))
        if row_filter.low_confidence != self.settings.low_confidence:
            self.settings = dataclasses.replace(self.settings, low_confidence=row_filter.low_confidence)

    @Slot(float)
    def _on_image_opacity_changed(self, value: float) -> None:
        self.settings = dataclasses.replace(self.settings, overlay_opacity=value)

    # -- profiles, settings, reset ------------------------------------------------------------
    def _refresh_profiles(self) -> None:
        names = ProfileStore(self.home).names()
        if self.settings.profile not in names:
            names = sorted([*names, self.settings.profile])
        self.window.set_profiles(names, self.settings.profile)

    @Slot(str)
    def select_profile(self, name: str) -> None:
        if name == self.settings.profile and self.info is not None and not self.info.profile_error:
            return
        self.apply_settings(dataclasses.replace(self.settings, profile=name))

    @Slot(str)
    def _on_window_new_profile_requested(self, name: str) -> None:
        try:
            ProfileStore(self.home).open(check_name(name))
        except (ProfileError, OSError) as exc:
            self.window.show_error("New profile", str(exc))
            return
        self.select_profile(name.strip())

    def apply_settings(self, settings: AppSettings) -> None:
        """Adopt new settings; reload the session when the model, method, device or profile changed."""
        old, self.settings = self.settings, settings
        if self.persist_settings:
            try:
                save_settings(settings, None if self.home is None else self.home / "settings.json")
            except OSError as exc:
                self.log("warning", f"Settings cannot be saved: {exc}")
        self.window.set_order(settings.order)
        keys = ("model", "device", "method", "method_config", "profile", "autosave_every")
        if any(getattr(old, k) != getattr(settings, k) for k in keys) or self.info is None:
            self.load_session()
        elif (
            old.order != settings.order
            and self.source is not None
            and not isinstance(self.source, SlideSource)
        ):
            self._open(self.source.root)

    @Slot(str)
    def _on_window_order_changed(self, order: str) -> None:
        if order != self.settings.order:
            self.apply_settings(dataclasses.replace(self.settings, order=order))

    @Slot()
    def reset_to_source(self) -> None:
        """Reset the profile to the source model (the window asked the user to confirm)."""
        if self.info is None:
            return
        self._set_phase(Phase.LOADING)
        self._requestReset.emit()

    @Slot(object)
    def _on_worker_reset_done(self, info: SessionInfo) -> None:
        self.info = info
        self.latest_profile = info.profile
        self.images_seen = info.images_seen
        self.last_run = None
        self.window.set_profile_summary(self._profile_text())
        self.log("info", f"Profile '{info.profile.name}' reset to the source model")
        if self.source is None:
            self._set_phase(Phase.DONE)

    @Slot()
    def _on_window_settings_requested(self) -> None:
        from app.views.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, method_fields(), available_devices(), self.window)
        if dialog.exec():
            new = dialog.result_settings()
            if new != self.settings:
                self.apply_settings(new)

    @Slot()
    def _on_window_about_requested(self) -> None:
        from app.views.about_dialog import AboutDialog

        summary = ""
        if self.info is not None:
            card = self.info.card
            summary = (
                f"{card.arch}, classes {', '.join(card.classes)}, trained on {card.source_domain or 'n/a'}"
            )
        AboutDialog(summary, self.window).exec()

    # -- export -------------------------------------------------------------------------------
    @Slot(str)
    def export(self, directory: str) -> None:
        """Write every report kind into ``directory`` (on the worker thread)."""
        try:
            data = self.report_data()
        except Exception as exc:  # a report must never leave a scripted run waiting forever
            logger.exception("collecting the report data failed")
            self._on_worker_export_failed(f"Reports cannot be prepared: {type(exc).__name__}: {exc}")
            return
        if data is None:
            self._on_worker_export_failed("Nothing to export: open images and process them first.")
            return
        self.log("info", f"Exporting reports to {directory} …")
        self._requestExport.emit(directory, data)

    def report_data(self) -> ReportData | None:
        from app.report_data import collect_report_data

        return collect_report_data(self)

    @Slot(object)
    def _on_worker_exported(self, paths: list[Path]) -> None:
        self.log("info", "Reports written: " + ", ".join(str(p) for p in paths))
        self.exportFinished.emit(paths)
        if self._script_stage == "export":
            self._script_done()

    @Slot(str)
    def _on_worker_export_failed(self, message: str) -> None:
        self.log("error", message)
        self.exportError.emit(message)
        if self._script_stage == "export":
            self._exit_code = EXIT_FAILED
            self._script_done()

    # -- scripting ----------------------------------------------------------------------------
    def _script_after_run(self) -> None:
        if self.script.export is not None:
            self._script_stage = "export"
            self.export(str(self.script.export))
        else:
            self._script_done()

    def _script_fail(self) -> None:
        if self._script_stage != "idle":
            self._exit_code = EXIT_FAILED
            self._script_done()

    def _script_done(self) -> None:
        self._script_stage = "idle"
        if self.script.quit_when_done:
            self.scriptFinished.emit(self._exit_code)

    @property
    def exit_code(self) -> int:
        return self._exit_code

    # -- shutdown -----------------------------------------------------------------------------
    @Slot()
    def _on_window_close_requested(self) -> None:
        if self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED, Phase.STOPPING):
            # Finish the current image and save the state first; the window closes when the run ends.
            self._closing = True
            self.window.close_allowed = False
            self.stop()
            return
        self.shutdown()

    def _finish_close(self) -> None:
        self.shutdown()
        self.window.close_allowed = True
        self.window.close()

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Stop any run (saving the state), release the session and end the worker thread."""
        if not self.engine_thread.isRunning():
            return
        if self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED, Phase.STOPPING):
            loop = QEventLoop()
            self.runFinished.connect(loop.quit)
            QTimer.singleShot(timeout_ms, loop.quit)
            if self.phase is not Phase.STOPPING:
                self.stop()
            loop.exec()
        self.flush_timer.stop()
        self.log_bridge.detach()
        self._requestClose.emit()  # the worker releases the session, then quits its thread
        if not self.engine_thread.wait(timeout_ms):
            logger.error("the engine thread did not end within %d ms", timeout_ms)
        if self.persist_settings:
            try:
                save_settings(self.settings, None if self.home is None else self.home / "settings.json")
            except OSError:
                logger.warning("settings could not be saved at exit")


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def plot_png(window: MainWindow) -> bytes:
    """The plots panel rendered to PNG bytes (immutable, so it may cross to the worker thread)."""
    image = window.plots.grab().toImage()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]
    buffer.close()
    return bytes(data.data())
