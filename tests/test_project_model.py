"""A project remembers its model -- where it is and its content -- and reopens with it (issue 29,
case 3). A project made with model M, reopened with ``--project P`` and no ``--model`` (M still in
place), loaded the demo model and refused the project with "Reset the project to the source
model" -- advice that would destroy it; with M deleted, the demo model was loaded silently.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from controller_fakes import make, session_info

from app.core.messages import SessionRequest
from app.worker import opening


def _project(home: Path, model: Path, seen: int = 12) -> Path:
    folder = home / "profiles" / "P"
    folder.mkdir(parents=True)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    record = {
        "name": "P",
        "images_seen": seen,
        "model_path": str(model),
        "model_sha256": sha,
        "method": "idipt",
    }
    (folder / "profile.json").write_text(json.dumps(record))
    return folder


def _model_copy(tmp_path: Path, tiny_model_path: Path, name: str = "m") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    model = folder / "model.safetensors"
    shutil.copy(tiny_model_path, model)
    shutil.copy(tiny_model_path.with_suffix(".json"), model.with_suffix(".json"))
    return model


def _actions(banner: object) -> list[str]:
    return [verb for verb, _ in banner.actions]  # type: ignore[attr-defined]


def test_a_project_reopens_with_its_own_model(tmp_path: Path, tiny_model_path: Path) -> None:
    model = _model_copy(tmp_path, tiny_model_path)
    _project(tmp_path, model)
    c, _, worker, _ = make(
        tmp_path, project="P"
    )  # the settings name the demo model, as after another project
    c.load_session()
    request = worker.last("open_session")[0]
    assert (
        request.model == model and request.expected_sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    )


def test_a_missing_model_is_named_with_the_choices_never_replaced(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    model = _model_copy(tmp_path, tiny_model_path)
    _project(tmp_path, model)
    model.unlink()
    c, view, worker, _ = make(tmp_path, project="P")
    c.load_session()
    assert not worker.of("open_session"), "no model is loaded in its place (the demo model was)"
    banner = view.last("show_banner")[0]
    assert str(model) in banner.text and "not there any more" in banner.text
    assert _actions(banner) == ["locate-model", "new-project"], "never 'reset', never the demo model"

    moved = _model_copy(tmp_path, tiny_model_path, "moved")
    view.answers["ask_model_file"] = str(moved)
    c.projects.on_window_banner_action_triggered(banner.key, "locate-model")
    request = worker.last("open_session")[0]
    assert request.model == moved and request.expected_sha256, "the located file is checked by its content"
    view.answers["ask_model_file"] = str(moved.with_name("model.reference.safetensors"))
    c.projects.locate_model()
    assert "source reference" in view.last("show_error")[1]


def test_another_model_for_a_project_that_adapted_its_own_is_named(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    model = _model_copy(tmp_path, tiny_model_path)
    other = _model_copy(tmp_path, tiny_model_path, "other")
    _project(tmp_path, model)
    c, view, worker, _ = make(tmp_path, project="P", model=str(other))
    c.state.model_chosen = True  # f2tta-studio --project P --model other
    c.load_session()
    assert not worker.of("open_session")
    banner = view.last("show_banner")[0]
    assert str(model) in banner.text and str(other) in banner.text and "reset" not in banner.text.lower()
    assert _actions(banner) == ["own-model", "new-project"]
    c.projects.on_window_banner_action_triggered(banner.key, "own-model")
    assert worker.last("open_session")[0].model == model


def test_a_model_whose_content_changed_is_refused_with_the_choices(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    model = _model_copy(tmp_path, tiny_model_path)
    _project(tmp_path, model)
    request = SessionRequest(model, "source", home=tmp_path, project="P", expected_sha256="0" * 64)
    with pytest.raises(opening.OpenFailed) as failed:
        opening.open_session(request)
    assert failed.value.cause == "model-changed" and "content changed" in str(failed.value)
    c, view, _, _ = make(tmp_path, project="P")
    c.load_session()
    c.sessions.on_worker_session_failed(str(failed.value), failed.value.cause)
    banner = view.last("show_banner")[0]
    assert "content changed" in banner.text and _actions(banner) == ["locate-model", "new-project"]


def test_the_project_remembers_where_its_model_is_and_its_content(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    model = _model_copy(tmp_path, tiny_model_path)
    opened = opening.open_session(SessionRequest(model, "source", home=tmp_path, project="Q"))
    opened.project.read_info()
    record = json.loads((tmp_path / "profiles" / "Q" / "profile.json").read_text())
    assert record["model_path"] == str(model) and len(record["model_sha256"]) == 64
    if opened.journal is not None:
        opened.journal.close()
    c, _, worker, _ = make(tmp_path, project="Q")
    c.load_session()
    assert worker.last("open_session")[0].expected_sha256 == record["model_sha256"]
    c.sessions.on_worker_session_ready(session_info(tmp_path, "Q"))
