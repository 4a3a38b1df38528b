"""Profiles, the settings dialog, the demos and the fixes offered by banners (part of the controller).

Each profile remembers its model and method (``profile.json``): selecting a profile selects them.
A new profile, a renamed or deleted one, a demo set and every banner's fix end in
:meth:`SessionController.apply_settings` or a request to the engine worker.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal, Slot

from app.core import advice
from app.core.open_session import OpenSession
from app.core.profiles import DEFAULT_PROFILE, ProfileError, ProfileStore, check_name
from app.core.run_model import RunModel
from app.core.settings import (
    DEMO_MODEL,
    DEMO_MODELS,
    DEMO_PROFILES,
    DEMO_SETS,
    AppSettings,
    available_demos,
    available_devices,
    check_model,
    method_fields,
)
from app.views.main_window import MainWindow
from app.worker.engine_worker import EngineWorker


class Sessions(Protocol):
    """What profile actions need of the session controller."""

    state: OpenSession
    window: MainWindow
    model: RunModel
    open_after_session: Path | None

    def apply_settings(self, settings: AppSettings) -> None: ...
    def save_settings(self) -> None: ...
    def open_folder(self, path: str) -> None: ...
    def request_reset(self) -> None: ...
    def log(self, level: str, message: str) -> None: ...


def model_setting(path: Path) -> str:
    """The settings' text for a model path: empty for the histology demo model."""
    return "" if path.resolve() == DEMO_MODEL.resolve() else str(path)


class ProfileActions(QObject):
    """Profile, settings, demo and banner-fix requests of the window.

    Args:
        sessions: the session controller (its state, window, model and settings).
        worker: the engine worker (renames and deletions release the profile there first).
    """

    _requestRename = Signal(str)
    _requestDelete = Signal(str)

    def __init__(self, sessions: Sessions, worker: EngineWorker) -> None:
        super().__init__()
        self.sessions = sessions
        self._requestRename.connect(worker.rename_profile)
        self._requestDelete.connect(worker.delete_profile)
        worker.profileFailed.connect(self._on_worker_profile_failed)
        sessions.window.profileSelected.connect(self.select)
        sessions.window.newProfileRequested.connect(self.create)

    def refresh(self) -> None:
        st = self.sessions.state
        current = st.state_dir.name if st.state_dir is not None else st.settings.profile
        self.sessions.window.set_profiles(sorted({*ProfileStore(st.home).names(), current}), current)
        self.sessions.window.set_demos(available_demos())

    # -- selecting, creating, renaming, deleting -----------------------------------------------
    def settings_for_profile(self, name: str) -> AppSettings:
        """The settings with ``name`` as profile, and the model and method that profile remembers."""
        st = self.sessions.state
        new = dataclasses.replace(st.settings, profile=name)
        info = ProfileStore(st.home).info(name)
        if info is None:
            return new
        if info.model_path and Path(info.model_path).is_file():
            new = dataclasses.replace(new, model=model_setting(Path(info.model_path)))
        if info.method and info.method in method_fields():
            config = info.method_config if info.method_config is not None else {}
            new = dataclasses.replace(new, method=info.method, method_config=dict(config))
        return new

    def select(self, name: str) -> None:
        st = self.sessions.state
        if name == st.settings.profile and st.usable and st.state_dir is None:
            return
        st.state_dir = None
        self.sessions.apply_settings(self.settings_for_profile(name))

    def create(self, name: str, settings: AppSettings | None = None) -> None:
        """A new profile with the current model and method (or ``settings``), selected."""
        st = self.sessions.state
        try:
            name = check_name(name)
            ProfileStore(st.home).open(name)
        except (ProfileError, OSError) as exc:
            self.sessions.window.show_error("New profile", str(exc))
            return
        st.state_dir = None
        self.sessions.apply_settings(dataclasses.replace(settings or st.settings, profile=name))

    @Slot(str)
    def _on_window_rename_profile_requested(self, name: str) -> None:
        try:
            check_name(name)
        except ProfileError as exc:
            self.sessions.window.show_error("Rename profile", str(exc))
            return
        self.sessions.state.settings = dataclasses.replace(self.sessions.state.settings, profile=name.strip())
        self.sessions.save_settings()
        self._requestRename.emit(name.strip())

    @Slot(str)
    def _on_window_delete_profile_requested(self, name: str) -> None:
        fallback = DEFAULT_PROFILE
        self.sessions.state.settings = dataclasses.replace(self.sessions.state.settings, profile=fallback)
        self.sessions.save_settings()
        self.sessions.model.close()
        self._requestDelete.emit(fallback)

    @Slot(str)
    def _on_worker_profile_failed(self, message: str) -> None:
        self.sessions.log("error", message)
        self.sessions.window.show_error("Profile", message)

    # -- settings and demos --------------------------------------------------------------------
    @Slot()
    def _on_window_settings_requested(self) -> None:
        st = self.sessions.state
        new = self.sessions.window.edit_settings(
            st.settings, method_fields(), available_devices(), check_model
        )
        if new is not None and new != st.settings:
            self.sessions.apply_settings(new)

    @Slot(str)
    def _on_window_demo_requested(self, kind: str) -> None:
        """Open a demo set with its demo model, in a profile of its own."""
        if kind not in available_demos():
            return
        self.sessions.open_after_session = DEMO_SETS[kind]
        settings = dataclasses.replace(
            self.settings_for_profile(DEMO_PROFILES[kind]), model=model_setting(DEMO_MODELS[kind])
        )
        st = self.sessions.state
        st.state_dir = None
        if settings == st.settings and st.usable:
            self.sessions.open_after_session = None
            self.sessions.open_folder(str(DEMO_SETS[kind]))
        else:
            self.sessions.apply_settings(settings)

    # -- the fixes banners offer ---------------------------------------------------------------
    @Slot(str, str)
    def _on_window_banner_action_triggered(self, key: str, action: str) -> None:
        s, st, window = self.sessions, self.sessions.state, self.sessions.window
        verb, _, arg = action.partition(":")
        if verb == "settings":
            self._on_window_settings_requested()
        elif verb == "demo-model":
            kind = arg or "histology"
            settings = dataclasses.replace(
                self.settings_for_profile(DEMO_PROFILES[kind]) if arg else st.settings,
                model=model_setting(DEMO_MODELS[kind]),
            )
            st.state_dir = None
            s.apply_settings(settings)
        elif verb == "new-profile-for-method":
            info = st.info
            method = info.method if info is not None else st.settings.method
            self.create(advice.profile_for_method(st.settings.profile, method))
        elif verb == "new-profile":
            self.create(arg)
        elif verb == "reset":
            if window.confirm(
                "Reset to source model",
                f"Reset profile '{st.settings.profile}' to the source model? Its adaptation state and "
                "record of processed images are deleted (review marks are kept).",
            ):
                s.request_reset()
        elif verb == "interleave":
            s.apply_settings(dataclasses.replace(st.settings, order="interleaved"))
        elif verb == "open":
            window.open_location(arg)
        elif verb == "show-log":
            window.show_tab("log")
