"""What is open and how it is shown: the session, the source, the profile, the settings, the selection.

Part of the controller (:class:`app.control.controller.Controller` makes one and shares a
:class:`~app.core.open_session.OpenSession` with it). It turns what the user asks to open or change into
requests to the engine worker, shows what comes back (failures as banners with their fixes, see
:mod:`app.core.advice`) and checks that the model applies to what was opened. Profile management and
the banners' fixes are :class:`~app.control.profile_actions.ProfileActions`'s; like the controller it
only wires, and the wording lives in :mod:`app.core.notices` and :mod:`app.core.advice`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app._engine import FolderSource, SlideSource
from app.control.profile_actions import ProfileActions
from app.core import advice, notices
from app.core.applicability import model_kind, subfolder_warning
from app.core.arrival import class_sorted_warning
from app.core.filters import RowFilter
from app.core.messages import SessionInfo, SessionRequest, SourceOpened, SourceRequest
from app.core.open_session import OpenSession
from app.core.phase import Phase
from app.core.reviews import ReviewStore
from app.core.run_items import Selection, image_title
from app.core.run_model import RunModel
from app.core.settings import DEMO_MODEL, AppSettings, available_demos, save_settings
from app.core.stats import segment_size_for
from app.views.main_window import MainWindow
from app.worker.engine_worker import EngineWorker

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
        state: OpenSession,
        set_phase: Callable[[Phase], None],
        log: Callable[[str, str], None],
    ) -> None:
        super().__init__()
        self.window, self.model, self.state = window, model, state
        self._set_phase, self._log = set_phase, log
        self.open_after_session: Path | None = None  # a source to open once the session is ready (demos)
        self._requestSession.connect(worker.open_session)
        self._requestSource.connect(worker.open_source)
        self._requestReset.connect(worker.reset_state)
        # The window's requests that are public methods here (reset: the window asked to confirm).
        window.openFolderRequested.connect(self.open_folder)
        window.openSlideRequested.connect(self.open_slide)
        window.resetRequested.connect(self.request_reset)
        self.profiles = ProfileActions(self, worker)

    def log(self, level: str, message: str) -> None:
        self._log(level, message)

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
        self.window.set_classes(tuple(info.card.classes))
        self.window.set_profile_summary(self.state.profile_text())
        self.window.dismiss_banner("model")
        self.window.dismiss_banner("profile")
        self.refresh_profiles()
        self._log("info", notices.model_loaded(info))
        self.sessionChanged.emit(info)
        if info.profile_error:
            self._log("error", info.profile_error)
            self.window.show_banner(
                advice.profile_refused(info.profile.name, info.method, info.profile_error)
            )
            self._set_phase(Phase.EMPTY)
            self.loadFailed.emit(info.profile_error)
            return
        self._log("info", self.state.profile_text())
        after, self.open_after_session = self.open_after_session, None
        source = self.model.source
        if after is not None:
            self._open(after)
        elif source is not None:  # the same source again, under the new session
            self._open(source.path if isinstance(source, SlideSource) else source.root)
        else:
            self._set_phase(Phase.DONE)

    @Slot(str)
    def _on_worker_session_failed(self, message: str) -> None:
        self._log("error", message)
        if self.state.info is None:
            self.window.set_model_text("no model loaded")
            using_demo = self.state.settings.model_path().resolve() == DEMO_MODEL.resolve()
            self.window.show_banner(advice.model_failed(message, using_demo))
        self._set_phase(Phase.DONE if self.state.info else Phase.EMPTY)
        self.loadFailed.emit(message)

    # -- sources -------------------------------------------------------------------------------
    @Slot(str)
    def open_folder(self, path: str) -> None:
        s = self.state.settings
        self._request_source(SourceRequest(Path(path), "folder", s.order, seed=s.order_seed))

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
            message = "Load a model (and a usable profile) before opening images."
            self._log("error", message)
            self.window.show_banner(advice.source_failed(message, None))
            return
        self._set_phase(Phase.LOADING)
        self._log("info", f"Opening {request.kind} {request.path} …")
        self._requestSource.emit(request)

    @Slot(str)
    def _on_worker_source_failed(self, message: str) -> None:
        self._log("error", message)
        self.window.show_banner(advice.source_failed(message, self.model.source))
        self._set_phase(Phase.READY if self.model.source is not None and self.model.pending else Phase.DONE)
        self.loadFailed.emit(message)

    @Slot(object)
    def _on_worker_source_ready(self, opened: SourceOpened) -> None:
        source, model, info = opened.source, self.model, self.state.info
        labelled = any(it.ground_truth is not None for it in source.items)
        self.window.clear_results(len(source.items), segment_size_for(len(source.items)), labelled)
        self.window.clear_banners(advice.SOURCE_KEYS)
        self.window.dismiss_banner("open")
        if isinstance(source, SlideSource):
            caption = f"{source.display_name} · {source.vendor} · {source.plan.describe()}"
            self.window.show_slide(
                source.thumbnail,
                source.dimensions,
                source.plan.grid,
                source.plan.footprint,
                caption,
                opened.tissue,
            )
        reviews = ReviewStore(opened.review_dir, source.source_id) if opened.review_dir is not None else None
        classes = tuple(info.card.classes) if info else ()
        positive = info.card.positive_class if info else 1
        model.open(source, opened.done, opened.restored_rows, positive, classes, opened.overlays, reviews)
        if model.marks:
            self.window.set_reviews(
                {i: model.review_of(r.position) for i, r in enumerate(model.rows) if r.key in model.marks}
            )
        self.window.set_progress(model.progress.progress(running=False))
        self.window.set_source_title(source.display_name)
        for level, text in notices.source_opened(source, opened, model.pending, self.state.settings.profile):
            self._log(level, text)
        self._check_source(opened)
        hint = "Select a row to show its image" if opened.restored_rows else "Press Start (F5) to process"
        self.window.show_image(None, None, hint)
        self._set_phase(Phase.READY if model.pending else Phase.DONE)
        self.sourceOpened.emit(opened)

    def _check_source(self, opened: SourceOpened) -> None:
        """Does the model apply? Sub-folder names, class-sorted order, resolution, a new site."""
        source, info = opened.source, self.state.info
        if info is None:
            return
        classes = tuple(info.card.classes)
        if isinstance(source, FolderSource):
            folders = subfolder_warning(source, classes)
            if folders:
                self._log("warning", folders)
                self.model.checks.append(folders)
                looks = opened.looks_like if opened.looks_like in ("histology", "fundus") else None
                self.window.show_banner(
                    advice.subfolders(folders, looks, model_kind(info.card), available_demos())  # type: ignore[arg-type]
                )
            ordered = class_sorted_warning(source, classes)
            if ordered:
                self._log("warning", ordered)
                self.model.checks.append(ordered)
                self.window.show_banner(advice.class_sorted(ordered))
        elif source.plan.warning:
            self.model.checks.append(source.plan.warning)
            self.window.show_banner(advice.resolution(source.plan.warning))
        if opened.other_sources and not opened.done and self.state.state_dir is None:
            self.window.show_banner(
                advice.new_source_in_profile(
                    info.profile.name, source, opened.other_images, opened.other_sources
                )
            )

    # -- what the user looks at ----------------------------------------------------------------
    def show_selection(self, sel: Selection) -> None:
        """Show the image the run model selected (the newest one while following)."""
        if sel.row is not None and sel.row.tile is not None:
            self.window.highlight_tile(sel.row.tile[1], sel.row.tile[0])
        if sel.preview is None:
            self.window.show_image(None, None, f"Loading {sel.name} …")
        else:
            title = image_title(sel.row, sel.overlay is not None, sel.review)
            self.window.show_image(sel.preview, sel.overlay, title, sel.keep_view, sel.levels)
        if sel.keep_view:
            self.window.scroll_to_newest()

    @Slot(int, str)
    def _on_worker_preview_failed(self, position: int, message: str) -> None:
        """An image chosen for display cannot be read again: say so instead of "Loading …"."""
        self._log("warning", f"The image cannot be shown: {message}")
        if position == self.model.selected:
            self.window.show_image(None, None, f"Cannot be shown: {message}")

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

    # -- settings ------------------------------------------------------------------------------
    def refresh_profiles(self) -> None:
        self.profiles.refresh()

    def apply_settings(self, settings: AppSettings) -> None:
        """Adopt new settings; reload the session when the model, method, device or profile changed."""
        old, self.state.settings = self.state.settings, settings
        self.save_settings()
        self.window.set_order(settings.order)
        source = self.model.source
        if any(getattr(old, k) != getattr(settings, k) for k in RELOAD_KEYS) or self.state.info is None:
            self.load_session()
        elif (old.order, old.order_seed) != (settings.order, settings.order_seed) and isinstance(
            source, FolderSource
        ):
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

    def request_reset(self) -> None:
        if self.state.info is not None:
            self._set_phase(Phase.LOADING)
            self._requestReset.emit()

    @Slot(object)
    def _on_worker_reset_done(self, info: SessionInfo) -> None:
        self.state.adopt(info)
        self.window.set_profile_summary(self.state.profile_text())
        self.window.dismiss_banner("profile")
        self._log("info", f"Profile '{info.profile.name}' reset to the source model")
        if self.model.source is None or info.profile_error:
            self._set_phase(Phase.DONE)

    @Slot()
    def _on_window_about_requested(self) -> None:
        self.window.show_about(notices.about(self.state.info))
