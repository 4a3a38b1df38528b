"""A project's own model, checked before its session loads (part of the controller, Qt-free).

A project remembers its model -- the file and its content (SHA-256) -- and reopens with it, unless
another was chosen for this session. A project whose model file is gone, whose own file is
damaged, or that has adapted another model than the one chosen is not loaded: what is wrong is
named with the choices (locate the model, its own model, a new project), never the demo model in
its place and never a reset (issue 29, case 3). The content is checked by the engine worker, which
reads the file (:mod:`app.worker.opening`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.core import advice
from app.core.notices import Banner
from app.core.open_session import OpenSession
from app.core.projects import ProjectStore
from app.core.settings import DEMO_MODEL


def project_model(st: OpenSession, refuse: Callable[[Banner, str], None]) -> str | None:
    """The content the project's model must have ("" : none known), after its own model was put
    in the settings of ``st``; None when the project cannot be loaded (``refuse`` shows why)."""
    name = st.settings.project
    project = ProjectStore(st.home).info(name)
    if project is not None and project.damaged:
        refuse(advice.project_damaged(name, project.damaged), project.damaged)
        return None
    if project is None or not project.model_path:
        return ""
    own = Path(project.model_path)
    if not st.model_chosen and not same_file(st.settings.model_path(), own):
        st.change_settings(model=model_setting(own))
    if st.model_located:  # the project's own model at another place: its content decides
        return project.model_sha256 or ""
    if same_file(st.settings.model_path(), own):
        if not own.is_file():
            banner = advice.model_missing(name, own)
            refuse(banner, banner.text)
            return None
        return project.model_sha256 or ""
    if project.images_seen:
        banner = advice.other_model(name, own, st.settings.model_path())
        refuse(banner, banner.text)
        return None
    return ""  # a project that has seen no image takes the model chosen for it


def model_setting(path: Path) -> str:
    """The settings' text for a model path: empty for the histology demo model."""
    return "" if same_file(path, DEMO_MODEL) else str(path)


def same_file(a: Path, b: Path) -> bool:
    """The same path once resolved (a model file that is gone compares by its path)."""
    try:
        return a.expanduser().resolve() == b.expanduser().resolve()
    except (OSError, RuntimeError):
        return a == b
