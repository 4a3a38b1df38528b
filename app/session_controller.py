"""What is open and how it is shown: the session, the source, the profile, the settings, the selection.

Part of the controller (:class:`app.controller.Controller` makes one and shares a
:class:`~app.state.SessionState` with it). It turns what the user asks to open or change into
requests to the engine worker, shows what comes back and what the user selects; like the
controller it only wires, and the wording lives in :mod:`app.notices`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app import notices
from app._engine import SlideSource
from app.messages import SessionInfo, SessionRequest, SourceOpened, SourceRequest
from app.profiles import ProfileError, ProfileStore, check_name
from app.rows import RowFilter
from app.run_model import RunModel, Selection, image_title
from app.settings import AppSettings, available_devices, method_fields, save_settings
from app.state import Phase, SessionState
from app.stats import segment_size_for
from app.views.main_window import MainWindow
from app.worker import EngineWorker

RELOAD_KEYS = ("model", "device", "method", "method_config", "profile", "autosave_every")


class SessionController(QObject):
    """Session, source, profile, settings and selection requests (see the module notes).

    Args:
        window: the main window (or its mock).
        model: the run model the source's rows go into.
        worker: the engine worker (its requests are queued to its thread).
        state: the state shared with the controller.
        set_phase / log: the controller's phase setter and log.
    """

    sessionChanged = Signal(object)
    sourceOpened = Signal(object)
    loadFailed = Signal(str)
    _requestSession = Signal(object)
    _requestSource = Signal(object)
    _requestReset = Signal()

    def __init__(
        self,
        window: MainWindow,
        model: RunModel,
        worker: EngineWorker,
        state: SessionState,
        set_phase: Callable[[Phase], None],
        log: Callable[[str, str], None],
    ) -> None:
        super().__init__()
        self.window, self.model, self.state = window, model, state
        self._set_phase, self._log = set_phase, log
        self._requestSession.connect(worker.open_session)
        self._requestSource.connect(worker.open_source)
        self._requestReset.connect(worker.reset_state)

    # -- the session ---------------------------------------------------------------------------
    def load_session(self) -> None:
        """(Re)load the model, method and profile from the current settings."""
        s, st = self.state.settings, self.state
        st.info = None
        self._set_phase(Phase.LOADING)
        self.window.set_model_text("loading model…")
        request = SessionRequest(s.model_path(), s.method, dict(s.method_config), s.device, s.profile)
        self._requestSession.emit(
            dataclasses.replace(
                request, home=st.home, autosave_every=s.autosave_every, state_dir=st.state_dir
            )
        )

    @Slot(object)
    def _on_worker_session_ready(self, info: SessionInfo) -> None:
        self.state.adopt(info)
        self.window.set_model_text(notices.model_line(info))
        self.window.set_profile_summary(self.state.profile_text())
        self.refresh_profiles()
        self._log("info", notices.model_loaded(info))
        self.sessionChanged.emit(info)
        if info.profile_error:
            self._log("error", info.profile_error)
            self._set_phase(Phase.EMPTY)
            self.loadFailed.emit(info.profile_error)
            return
        self._log("info", self.state.profile_text())
        source = self.model.source
        if source is not None:  # the same source again, under the new session
            self._open(source.path if isinstance(source, SlideSource) else source.root)
        else:
            self._set_phase(Phase.DONE)

    @Slot(str)
    def _on_worker_session_failed(self, message: str) -> None:
        self._log("error", message)
        if self.state.info is None:
            self.window.set_model_text("no model loaded")
        self._set_phase(Phase.DONE if self.state.info else Phase.EMPTY)
        self.loadFailed.emit(message)

    # -- sources -------------------------------------------------------------------------------
    @Slot(str)
    def open_folder(self, path: str) -> None:
        self._request_source(SourceRequest(Path(path), "folder", self.state.settings.order))

    @Slot(str)
    def open_slide(self, path: str) -> None:
        self._request_source(SourceRequest(Path(path), "slide", min_tissue=self.state.settings.min_tissue))

    def _open(self, path: Path) -> None:
        if path.is_dir():
            self.open_folder(str(path))
        else:
            self.open_slide(str(path))

    def _request_source(self, request: SourceRequest) -> None:
        if not self.state.usable:
            self._log("error", "Load a model (and a usable profile) before opening images.")
            return
        self._set_phase(Phase.LOADING)
        self._log("info", f"Opening {request.kind} {request.path} …")
        self._requestSource.emit(request)

    @Slot(str)
    def _on_worker_source_failed(self, message: str) -> None:
        self._on_worker_session_failed(message)

    @Slot(object)
    def _on_worker_source_ready(self, opened: SourceOpened) -> None:
        source, model, info = opened.source, self.model, self.state.info
        self.window.clear_results(len(source.items), segment_size_for(len(source.items)))
        if isinstance(source, SlideSource):
            footprint = source.plan.footprint * source.thumbnail.shape[1] / source.dimensions[0]
            caption = f"{source.display_name} · {source.vendor} · {source.plan.describe()}"
            self.window.show_slide(source.thumbnail, source.plan.grid, footprint, caption)
        model.open(source, opened.done, opened.restored_rows, info.card.positive_class if info else 1)
        self.window.set_progress(model.progress.progress())
        self.window.set_source_title(source.display_name)
        for level, text in notices.source_opened(source, opened, model.pending, self.state.settings.profile):
            self._log(level, text)
        hint = "Select a row to show its image" if opened.restored_rows else "Press Start to process"
        self.window.show_image(None, None, hint)
        self._set_phase(Phase.READY if model.pending else Phase.DONE)
        self.sourceOpened.emit(opened)

    # -- what the user looks at ----------------------------------------------------------------
    def show_selection(self, sel: Selection) -> None:
        """Show the image the run model selected (the newest one while following)."""
        if sel.row is not None and sel.row.tile is not None:
            self.window.highlight_tile(sel.row.tile[1], sel.row.tile[0])
        if sel.preview is None:
            self.window.show_image(None, None, f"Loading {sel.name} …")
        else:
            self.window.show_image(sel.preview, sel.overlay, image_title(sel.row), sel.keep_view, sel.levels)
        if sel.keep_view:
            self.window.scroll_to_newest()

    @Slot(int, int)
    def _on_window_tile_clicked(self, row: int, col: int) -> None:
        position = self.model.position_of_cell(row, col)
        index = self.model.row_index(position) if position is not None else None
        if position is not None and index is not None:
            self.window.select_row(index)
            self.model.select(position)

    @Slot(object)
    def _on_window_filter_changed(self, row_filter: RowFilter) -> None:
        if row_filter.mode == "uncertain":
            threshold = self.model.uncertainty_threshold()
            self.window.apply_filter(dataclasses.replace(row_filter, high_uncertainty=threshold))
        if row_filter.low_confidence != self.state.settings.low_confidence:
            self.state.settings = dataclasses.replace(
                self.state.settings, low_confidence=row_filter.low_confidence
            )
            self.model.set_low_confidence(row_filter.low_confidence)

    @Slot(float)
    def _on_window_opacity_changed(self, value: float) -> None:
        self.state.settings = dataclasses.replace(self.state.settings, overlay_opacity=value)

    # -- profiles, settings, reset -------------------------------------------------------------
    def refresh_profiles(self) -> None:
        st = self.state
        current = st.state_dir.name if st.state_dir is not None else st.settings.profile
        self.window.set_profiles(sorted({*ProfileStore(st.home).names(), current}), current)

    @Slot(str)
    def _on_window_profile_selected(self, name: str) -> None:
        self.select_profile(name)

    def select_profile(self, name: str) -> None:
        if name == self.state.settings.profile and self.state.usable and self.state.state_dir is None:
            return
        self.state.state_dir = None
        self.apply_settings(dataclasses.replace(self.state.settings, profile=name))

    @Slot(str)
    def _on_window_new_profile_requested(self, name: str) -> None:
        try:
            ProfileStore(self.state.home).open(check_name(name))
        except (ProfileError, OSError) as exc:
            self.window.show_error("New profile", str(exc))
            return
        self.select_profile(name.strip())

    def apply_settings(self, settings: AppSettings) -> None:
        """Adopt new settings; reload the session when the model, method, device or profile changed."""
        old, self.state.settings = self.state.settings, settings
        self.save_settings()
        self.window.set_order(settings.order)
        source = self.model.source
        if any(getattr(old, k) != getattr(settings, k) for k in RELOAD_KEYS) or self.state.info is None:
            self.load_session()
        elif old.order != settings.order and source is not None and not isinstance(source, SlideSource):
            self.open_folder(str(source.root))

    def save_settings(self) -> None:
        if self.state.persist_settings:
            home = self.state.home
            try:
                save_settings(self.state.settings, None if home is None else home / "settings.json")
            except OSError as exc:
                self._log("warning", f"Settings cannot be saved: {exc}")

    @Slot(str)
    def _on_window_order_changed(self, order: str) -> None:
        if order != self.state.settings.order:
            self.apply_settings(dataclasses.replace(self.state.settings, order=order))

    @Slot()
    def _on_window_reset_requested(self) -> None:
        """Reset the profile to the source model (the window asked the user to confirm)."""
        if self.state.info is not None:
            self._set_phase(Phase.LOADING)
            self._requestReset.emit()

    @Slot(object)
    def _on_worker_reset_done(self, info: SessionInfo) -> None:
        self.state.adopt(info)
        self.window.set_profile_summary(self.state.profile_text())
        self._log("info", f"Profile '{info.profile.name}' reset to the source model")
        if self.model.source is None or info.profile_error:
            self._set_phase(Phase.DONE)

    @Slot()
    def _on_window_settings_requested(self) -> None:
        new = self.window.edit_settings(self.state.settings, method_fields(), available_devices())
        if new is not None and new != self.state.settings:
            self.apply_settings(new)

    @Slot()
    def _on_window_about_requested(self) -> None:
        self.window.show_about(notices.about(self.state.info))

    # -- requests from the window named like the public API -----------------------------------
    @Slot(str)
    def _on_window_open_folder_requested(self, path: str) -> None:
        self.open_folder(path)

    @Slot(str)
    def _on_window_open_slide_requested(self, path: str) -> None:
        self.open_slide(path)
