"""Projects on the real window (pytest-qt, offscreen): deleting, switching and creating a project
resets everything on screen to the project that is then current (issue 20, item 1)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import make_folder, make_model
from app_studio import RUN_TIMEOUT_MS, Studio, table_keys

from app.core.profiles import ProfileStore
from app.shell.studio_app import StudioApp


def _new_project(studio: Studio, c: StudioApp, name: str, model: Path) -> None:
    """A project created with its own model (what the New project dialog sends)."""
    with studio.qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        settings = dataclasses.replace(c.controller.state.settings, model=str(model))
        c.controller.profiles.create(name, settings)


def test_deleting_the_project_in_use_leaves_a_working_app(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    """The issue's sequence: a project with its own model, a folder run to the end, then deleted."""
    default_folder = make_folder(tmp_path / "a", 4, labelled="none")
    c = studio.processed(default_folder)  # "default" has 4 images seen with the studio's model
    other_model = make_model(tmp_path / "m", mpp=None, img_size=32, favour=1)
    _new_project(studio, c, "Site B", other_model)
    folder = make_folder(tmp_path / "b", 6, labelled="none", seed=3)
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    w = c.window
    assert len(table_keys(c)) == 6 and c.controller.state.settings.model == str(other_model)

    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        w.deleteProfileRequested.emit("Site B")
    qtbot.wait(50)  # type: ignore[attr-defined]
    st = c.controller.state
    assert "Site B" not in ProfileStore(studio.home).names()
    assert st.settings.profile == "default" and st.usable, "the app is usable on the remaining project"
    assert st.settings.model == str(studio.model), "the remaining project's own model is loaded"
    assert st.info is not None and not st.info.profile_error and st.info.images_seen == 4
    assert table_keys(c) == [] and c.controller.model.rows == [], "the deleted project's rows are gone"
    assert c.controller.model.source is None
    assert "4 images seen" in w.profile_label.full_text()
    assert "no model" not in w.phase_label.text()
    assert not w.banners.items, f"no stale banners: {list(w.banners.items)}"
    assert w.open_folder_action.isEnabled() and w.open_slide_action.isEnabled()
    assert not w.export_action.isEnabled(), "nothing to export"
    assert w.left.currentWidget() is w.welcome, "the welcome page, not the deleted project's images"
    assert w.profile_combo.currentText() == "default"

    studio.open_folder(c, folder)  # a further open and run works
    studio.run_to_end(c)
    assert len(table_keys(c)) == 6 and st.info is not None and st.images_seen == 10
