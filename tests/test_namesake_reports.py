"""Reports are owned by the project's identity, not its name (issue 42, item 10).

Two homes exporting a project of the same name (both the default project) into one folder: the
second replaced the first's ``predictions.csv``, ``report.pdf`` and ``run_config.json`` without a
question, ownership being the project's name and the source's path. A project now has an identity,
made once and kept in its ``profile.json`` (through renames), recorded in ``run_config.json``; a
namesake's reports are replaced only when the user says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from app_fixtures import make_folder
from app_studio import Studio, exported

from app.core.projects import ProjectStore
from app.reports.ownership import FolderReports, reports_in


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_namesake_projects_reports_are_not_replaced_without_a_question(
    qtbot: object, model: Path, tmp_path: Path
) -> None:
    folder = make_folder(tmp_path, 6, labelled="csv")
    out = tmp_path / "reports"
    first = Studio(qtbot, tmp_path / "home-a", model)
    second = Studio(qtbot, tmp_path / "home-b", model)
    try:
        a = first.processed(folder)  # the default project of one home
        assert exported(a, out, qtbot, ask=False)[0]
        theirs = _files(out)
        written = json.loads(theirs["run_config.json"])["project"]
        assert written["name"] == "default" and len(written["id"]) == 32

        b = second.processed(folder)  # the default project of another home, the same folder
        assert b.controller.state.info.project.project_id != written["id"]
        ok, message = exported(b, out, qtbot, ask=False)
        assert not ok and "not replaced" in str(message) and _files(out) == theirs
        assert written["id"][:12] in str(message), "the question tells the namesakes apart"
        assert exported(a, out, qtbot, ask=False)[0], (
            "the first project's own reports are replaced without a question"
        )
    finally:
        for studio in (first, second):
            for app in studio.apps:
                studio.close(app)


def test_a_project_keeps_its_identity_through_a_rename(tmp_path: Path) -> None:
    store = ProjectStore(tmp_path)
    made = store.open("site")
    identity = made.info().project_id
    assert identity and len(identity) == 32
    renamed = store.rename("site", "site-a")
    assert renamed.info().project_id == identity and store.open("site-a").info().project_id == identity


def test_a_project_made_before_identities_gets_one_when_it_opens(tmp_path: Path) -> None:
    folder = tmp_path / "profiles" / "old"
    folder.mkdir(parents=True)
    (folder / "profile.json").write_text(json.dumps({"name": "old", "images_seen": 3}))
    project = ProjectStore(tmp_path).open("old")
    data = json.loads((folder / "profile.json").read_text())
    assert data["images_seen"] == 3 and project.info().project_id == data["id"]


def test_reports_without_an_identity_are_owned_by_name_as_before(tmp_path: Path) -> None:
    """The control: reports written before projects had an identity."""
    legacy = FolderReports(("predictions.csv",), project="default", source="/data/a")
    assert legacy.owned_by("default", "/data/a", "a" * 32)
    assert not legacy.owned_by("other", "/data/a", "a" * 32)
    known = FolderReports(("predictions.csv",), project="default", source="/data/a", project_id="b" * 32)
    assert not known.owned_by("default", "/data/a", "a" * 32) and known.owned_by("x", "/data/a", "b" * 32)
    assert reports_in(tmp_path) is None
