"""The controller's project actions as a plain object: switching, deleting, making projects and
the banners' fixes, with the fake window and worker of ``tests/controller_fakes.py`` (no Qt: the
no-Qt check of ``tests/test_controller_plain.py`` runs these tests too)."""

from __future__ import annotations

from pathlib import Path

from controller_fakes import ended, folder, make, results, session_info

from app.core.phase import Phase
from app.core.projects import DEFAULT_PROJECT


def test_switching_project_reloads_the_session_and_empties_the_screen(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path, persist=True)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    c.open_folder(str(tmp_path / "site"))
    c.sessions.on_worker_source_ready(folder(tmp_path, 3))
    c.projects.select(DEFAULT_PROJECT)
    assert worker.names().count("open_session") == 1, "selecting the project in use does nothing"

    c.projects.select("Site B")
    assert c.state.settings.project == "Site B" and c.phase is Phase.LOADING and c.state.info is None
    assert worker.last("open_session")[0].project == "Site B"
    assert '"project": "Site B"' in (tmp_path / "settings.json").read_text(), "the choice is saved"
    assert c.model.source is None and c.model.rows == [] and view.last("set_source_title") == ("",)
    assert view.last("clear_results")[0] == 0 and view.last("set_inputs") == ([],)
    c.sessions.on_worker_session_ready(session_info(tmp_path, "Site B"))
    names, current, _details, entries = view.last("set_projects")
    assert current == "Site B" and "Site B" in names and set(entries) <= set(names)
    assert worker.names().count("open_source") == 1, "the other project's folder is not carried over"
    assert c.phase is Phase.DONE and view.actions().open

    c.projects.on_window_rename_project_requested("../bad")
    assert view.last("show_error")[0] == "Rename project" and "rename_project" not in worker.names()
    c.projects.on_window_rename_project_requested(" Site C ")
    assert worker.last("rename_project") == ("Site C",) and c.state.settings.project == "Site C"


def test_deleting_the_project_in_use_leaves_a_usable_session(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path, project="Site B")
    (tmp_path / "profiles" / "Site B").mkdir(parents=True)
    (tmp_path / "profiles" / DEFAULT_PROJECT).mkdir()
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path, "Site B"))
    c.open_folder(str(tmp_path / "site"))
    c.sessions.on_worker_source_ready(folder(tmp_path, 3))
    c.start()
    c.on_worker_results_ready(results(0))
    c.on_worker_run_ended(ended("stopped", 1, tmp_path))
    assert c.model.rows

    c.projects.on_window_delete_project_requested("Site B")
    assert (
        worker.last("delete_project") == (tmp_path, "Site B") and c.state.settings.project == DEFAULT_PROJECT
    )
    assert worker.names()[-2:] == ["delete_project", "open_session"], (
        "the next project opens after the deletion"
    )
    assert worker.last("open_session")[0].project == DEFAULT_PROJECT
    assert c.model.source is None and c.model.pending == 0 and not c.model.rows, (
        "the deleted project's rows are gone"
    )
    assert view.last("clear_results")[0] == 0 and "clear_banners" in view.names()
    c.sessions.on_worker_source_ready(folder(tmp_path, 3))  # a late answer for the deleted project
    assert c.model.source is None, "an answer about the deleted project is dropped"
    c.sessions.on_worker_session_ready(session_info(tmp_path, DEFAULT_PROJECT))
    assert c.state.usable and c.phase is Phase.DONE and view.actions().open and not view.actions().export
    assert view.last("set_projects")[1] == DEFAULT_PROJECT
    c.open_folder(str(tmp_path / "site"))
    assert worker.last("open_source")[0].path == tmp_path / "site" and c.phase is Phase.LOADING

    c.projects.on_worker_project_failed("Project 'x' cannot be deleted: busy")
    assert view.last("show_error") == ("Project", "Project 'x' cannot be deleted: busy")
    assert "Project 'x' cannot be deleted: busy" in view.logged("error")


def test_deleting_the_last_project_opens_a_new_empty_one_and_says_so(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path, project=DEFAULT_PROJECT)
    (tmp_path / "profiles" / DEFAULT_PROJECT).mkdir(parents=True)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    c.projects.on_window_delete_project_requested(DEFAULT_PROJECT)
    assert worker.last("delete_project") == (tmp_path, DEFAULT_PROJECT)
    assert worker.names().count("open_session") == 2, "the same name: loaded again all the same"
    banner = view.last("show_banner")[0]
    assert banner.key == "project" and "No other project was left" in banner.text
    assert ("new-project", "New project…") in banner.actions


def test_a_new_project_and_the_banners_fixes(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    c.projects.create("Site D")
    assert c.state.settings.project == "Site D" and worker.last("open_session")[0].project == "Site D"
    assert not (tmp_path / "profiles").exists(), "the worker makes the project's folder"
    c.projects.create("")
    assert view.last("show_error")[0] == "New project"
    (tmp_path / "profiles" / "Site E").mkdir(parents=True)
    c.projects.create("Site E")
    assert "exists already" in view.last("show_error")[1] and c.state.settings.project == "Site D"
    c.projects.on_window_banner_action_triggered("open", "show-log")
    assert view.last("show_tab") == ("log",)
    view.answers["confirm"] = False
    c.projects.on_window_banner_action_triggered("project", "reset")
    assert "reset_state" not in worker.names(), "the user said no"
