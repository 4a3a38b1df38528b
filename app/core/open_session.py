"""What the window knows of the open session: its project, settings and model (Qt-free)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.messages import RunEnded, SessionInfo
from app.core.phase import Phase
from app.core.projects import ProjectInfo
from app.core.settings import AppSettings


@dataclass
class OpenSession:
    """What the controller's parts share about the open session (owned by the UI thread).

    Attributes:
        settings: the user's settings in force.
        home: the studio home (projects, settings.json); None for the default.
        state_dir: a journal directory used instead of a project (``f2tta-studio --state``).
        persist_settings: settings changed in the dialog are saved to disk.
        model_chosen: the settings' model was chosen for this session (see the field).
        info: the loaded session, None while none is.
        latest_project: the project's listing as last saved.
        last_run: how the last run ended.
        images_seen: the session's live count (unsaved images included).
        errors: every error shown in this session (for the reports).
        phase: where the app is.
    """

    settings: AppSettings
    home: Path | None = None
    state_dir: Path | None = None
    persist_settings: bool = True
    #: The model was chosen for this session (``--model``, the Settings dialog, a located model):
    #: it is loaded even where the project remembers another. Otherwise the project's own is.
    model_chosen: bool = False
    #: The chosen model is the project's own, moved or renamed (located by the user): it is loaded
    #: only when its content is the one the project was made with.
    model_located: bool = False
    #: Sources (paths) the user chose to run although the applicability gate flags them (each in a
    #: project of its own, so the question is asked once), and whether a run starts once the source
    #: opens (the new project's).
    gate_accepted: set[str] = field(default_factory=set)
    run_after_open: bool = False
    info: SessionInfo | None = None
    latest_project: ProjectInfo | None = None
    last_run: RunEnded | None = None
    images_seen: int = 0
    errors: list[str] = field(default_factory=list)
    phase: Phase = Phase.EMPTY

    def adopt(self, info: SessionInfo) -> None:
        """A session (re)loaded or reset: its counts replace the live ones."""
        self.info, self.latest_project, self.images_seen, self.last_run = (
            info,
            info.project,
            info.images_seen,
            None,
        )

    def change_settings(self, settings: AppSettings | None = None, **changes: Any) -> AppSettings:
        """``settings`` (the current ones when None) with ``changes`` become the settings in force:
        the one place they change. Returns the settings they replace."""
        old = self.settings
        self.settings = dataclasses.replace(settings or old, **changes)
        return old

    @property
    def usable(self) -> bool:
        """A session is loaded and its project's state can be used."""
        return self.info is not None and not self.info.project_error

    def project_text(self) -> str:
        return "" if self.latest_project is None else self.latest_project.summary(self.images_seen)
