"""Projects on the real window (pytest-qt, offscreen): deleting, switching and creating a project
resets everything on screen to the project that is then current (issue 20, item 1)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import make_folder, make_model
from app_studio import RUN_TIMEOUT_MS, Studio, drain_worker, table_keys
from PySide6.QtCore import Qt

from app.core.project_lines import ModelChoice
from app.core.projects import ProjectStore
from app.shell.studio_app import StudioApp


def _new_project(studio: Studio, c: StudioApp, name: str, model: Path) -> None:
    """A project created with its own model (what the New project dialog sends)."""
    with studio.qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        settings = dataclasses.replace(c.controller.state.settings, model=str(model))
        c.controller.projects.create(name, settings)


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
        w.deleteProjectRequested.emit("Site B")
    drain_worker(c)
    st = c.controller.state
    assert "Site B" not in ProjectStore(studio.home).names()
    assert st.settings.project == "default" and st.usable, "the app is usable on the remaining project"
    assert st.settings.model == str(studio.model), "the remaining project's own model is loaded"
    assert st.info is not None and not st.info.project_error and st.info.images_seen == 4
    assert table_keys(c) == [] and c.controller.model.rows == [], "the deleted project's rows are gone"
    assert c.controller.model.source is None
    assert "4 images seen" in w.status_parts.project_label.full_text()
    assert "no model" not in w.status_parts.phase_label.text()
    assert not w.banners.items, f"no stale banners: {list(w.banners.items)}"
    assert w.commands.open_folder.isEnabled() and w.commands.open_slide.isEnabled()
    assert not w.commands.export.isEnabled(), "nothing to export"
    assert w.panes.left.currentWidget() is w.welcome, "the welcome page, not the deleted project's images"
    assert w.commands.project_combo.current_name() == "default"

    drain_worker(c)  # whatever was queued about the deleted project has been served
    assert not (studio.home / "profiles" / "Site B").exists(), "nothing wrote into it after the deletion"
    studio.open_folder(c, folder)  # a further open and run works
    studio.run_to_end(c)
    assert len(table_keys(c)) == 6 and st.info is not None and st.images_seen == 10


def test_switching_projects_shows_each_ones_inputs_and_resumes_them(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    """A switch empties the screen; the welcome page and File ▸ Open recent list the project's own
    folders, and Resume opens one with the rows it has."""
    folder = make_folder(tmp_path / "a", 4, labelled="none")
    c = studio.processed(folder, project="Site A")
    w = c.window
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        w.projectSelected.emit("default")
    assert table_keys(c) == [] and w.panes.left.currentWidget() is w.welcome and not w.banners.items
    assert not w.commands.export.isEnabled() and w.commands.open_folder.isEnabled()
    assert w.welcome.input_rows == [] and "No folders or slides" in w.welcome.inputs_heading.text()
    assert [a.text() for a in w.commands.recent_menu.actions()] == [
        "No folders or slides opened in this project yet"
    ]
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        w.projectSelected.emit("Site A")
    assert table_keys(c) == [], "nothing opens by itself"
    (label, button), *_ = w.welcome.input_rows
    assert label.text().startswith("site (folder) · 4 images processed") and button.text() == "Resume"
    assert (
        w.commands.recent_menu.actions()[0].text() == label.text()
        and w.commands.recent_menu.actions()[0].isEnabled()
    )
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        button.click()
    assert len(table_keys(c)) == 4 and c.controller.model.pending == 0, "the rows it has, nothing left"


def test_the_model_is_shown_by_its_card_and_each_project_by_its_model(studio: Studio, tmp_path: Path) -> None:
    c = studio.open(project="Site A")
    w = c.window
    assert w.status_parts.model_label.full_text().startswith(
        "Histology · normal / tumor · ViT-Tiny, 2 blocks, 8-px patches"
    )
    assert studio.model.name not in w.status_parts.model_label.full_text()
    assert (
        "Project 'Site A'" in w.welcome.project_label.text() and "Histology" in w.welcome.project_label.text()
    )
    index = w.commands.project_combo.findData("Site A")
    tip = w.commands.project_combo.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert "Histology · normal / tumor" in tip and "0 images seen" in tip
    assert w.commands.project_combo.itemText(index) == "Site A — Histology · 0 images seen", (
        "the list names the kind"
    )
    assert w.commands.project_combo.current_name() == "Site A"


def test_a_new_project_takes_the_model_chosen_for_it(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = studio.open(project="Site A")
    fundus_like = make_model(tmp_path / "m", mpp=None, img_size=32)
    asked: list[tuple[list[ModelChoice], list[str]]] = []

    def answer(
        choices: list[ModelChoice], taken: list[str], describe: object, name: str = ""
    ) -> tuple[str, str]:
        asked.append((choices, taken))
        return "Site B", str(fundus_like)

    monkeypatch.setattr(c.window, "ask_new_project", answer)
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.commands.new_project.trigger()
    choices, taken = asked[0]
    assert choices[0].path == str(studio.model) and "Site A" in taken
    st = c.controller.state
    assert st.settings.project == "Site B" and st.settings.model == str(fundus_like) and st.usable
    info = ProjectStore(studio.home).info("Site B")
    assert info is not None and info.model_path == str(fundus_like), (
        "profile.json records the project's model"
    )
    assert st.settings.start_folders()["model"] == str(fundus_like.parent)


def test_the_new_project_dialog_describes_the_model_and_refuses_a_taken_name(
    qtbot: object, tmp_path: Path
) -> None:
    from app.core.project_lines import model_choices, model_file_text
    from app.core.settings import DEMO_MODELS
    from app.views.project_dialog import NewProjectDialog

    dialog = NewProjectDialog(model_choices(None, dict(DEMO_MODELS)), ["Site A"], model_file_text)
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    ok = dialog.buttons.button(dialog.buttons.StandardButton.Ok)
    assert dialog.model_text.text().startswith("Histology · normal / tumor") and not ok.isEnabled()
    dialog.model_combo.setCurrentIndex(1)
    assert dialog.model_text.text().startswith("Fundus photographs")
    dialog.name_edit.setText("site a")
    assert not ok.isEnabled() and "exists already" in dialog.problem.text()
    dialog.name_edit.setText("Site C")
    assert ok.isEnabled() and dialog.answer() == ("Site C", str(DEMO_MODELS["fundus"]))
    dialog.add_model_file(str(tmp_path / "gone.safetensors"))
    assert not ok.isEnabled() and "model file missing" in dialog.problem.text()


def test_file_dialogs_start_where_that_kind_of_file_was_last_chosen(
    studio: Studio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PySide6.QtWidgets import QFileDialog

    from app.core.settings import load_settings
    from app.views import _prompts

    folder = make_folder(tmp_path / "data", 2, labelled="none")
    c = studio.open()
    started: list[str] = []

    def choose(parent: object, title: str, start: str = "") -> str:
        started.append(start)
        return str(folder)

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", choose)
    with studio.qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        _prompts.open_folder(c.window)
    _prompts.open_folder(c.window)
    assert started[0] != str(folder.parent) and started[1] == str(folder.parent)
    assert load_settings(studio.home / "settings.json").start_folders()["folder"] == str(folder.parent)


def test_renaming_the_project_opens_its_folder_again_under_the_new_name(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path / "a", 4, labelled="none")
    c = studio.processed(folder, project="Old name")
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.renameProjectRequested.emit("New name")
    assert len(table_keys(c)) == 4 and c.controller.model.pending == 0
    assert (
        c.window.commands.project_combo.current_name() == "New name"
        and "Old name" not in ProjectStore(studio.home).names()
    )
    assert not (studio.home / "profiles" / "Old name").exists()
    (label, _button), *_ = c.window.welcome.input_rows
    assert label.text().startswith("site (folder) · 4 images processed"), "its list of inputs moved with it"


def test_a_project_lists_where_each_inputs_reports_were_written(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project binds its reports too: the welcome page offers the folder an input's reports
    were last written into, beside Resume."""
    folder = make_folder(tmp_path / "a", 4, labelled="none")
    c = studio.processed(folder, project="Site A")
    w = c.window
    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    for project in ("default", "Site A"):
        with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            w.projectSelected.emit(project)
    (label, _resume), *_ = w.welcome.input_rows
    assert "· reports " in label.text()
    (reports,) = w.welcome.report_buttons
    opened: list[str] = []
    monkeypatch.setattr(w, "open_location", opened.append)
    w.welcome.reportsClicked.disconnect()
    w.welcome.reportsClicked.connect(w.open_location)
    reports.click()
    assert opened == [str(out)]
