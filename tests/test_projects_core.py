"""Projects without Qt: the model named by its card, the project list's lines, the next project
after a deletion, the list of inputs (read strictly) and where the file dialogs start."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.core import recent
from app.core.project_lines import (
    model_choices,
    model_file_text,
    model_text,
    next_project,
    project_entry,
    project_tooltip,
)
from app.core.projects import ProjectInfo
from app.core.settings import DEMO_MODELS, AppSettings
from engine import ModelCard


def test_demo_models_are_told_apart_by_their_cards_not_their_file_names() -> None:
    histology, fundus = (model_file_text(DEMO_MODELS[k]) for k in ("histology", "fundus"))
    assert DEMO_MODELS["histology"].name == DEMO_MODELS["fundus"].name == "model.safetensors"
    assert histology.startswith("Histology · normal / tumor · ViT-Tiny, 4 blocks") and histology.endswith(
        "— site1"
    )
    assert fundus.startswith("Fundus photographs · glaucoma / normal · ViT-Tiny")
    assert "model.safetensors" not in histology + fundus
    unknown = ModelCard(arch="vit_tiny_patch16_224", classes=("a", "b"), img_size=32, source_domain="")
    assert model_text(unknown).startswith(
        "Unknown kind of image · a / b · ViT-Tiny"
    ) and "—" not in model_text(unknown)


def test_a_model_file_without_a_card_or_missing_is_said_so(tmp_path: Path) -> None:
    assert model_file_text(tmp_path / "gone.safetensors").startswith("model file missing")
    (tmp_path / "m.safetensors").write_bytes(b"x")
    (tmp_path / "m.json").write_text("{not json")
    assert model_file_text(tmp_path / "m.safetensors").startswith("no readable model card")


def test_the_new_project_dialog_offers_the_current_model_then_each_demo_once(tmp_path: Path) -> None:
    choices = model_choices(DEMO_MODELS["histology"], dict(DEMO_MODELS))
    assert [c.label for c in choices] == [
        "The histology demo model (the current project's)",
        "The fundus photographs demo model",
        "The four-class tissue demo model",
    ]
    assert choices[0].text.startswith("Histology") and choices[1].text.startswith("Fundus")
    assert "inflamed / normal / stroma / tumour" in choices[2].text
    assert [c.path for c in model_choices(None, {})] == []


def test_the_project_list_shows_model_and_images_seen(tmp_path: Path) -> None:
    info = ProjectInfo("Site B", tmp_path, images_seen=60, updated="2025-01-02T03:04:05+00:00")
    text = project_tooltip(
        ProjectInfo("Site B", tmp_path, 60, updated=info.updated, model_path=str(DEMO_MODELS["fundus"]))
    )
    assert (
        text.startswith("Fundus photographs · glaucoma / normal")
        and "60 images seen, saved 2025-01-02 03:04" in text
    )
    assert project_tooltip(info).startswith("no model chosen yet")
    fundus = ProjectInfo("Site B", tmp_path, 60, model_path=str(DEMO_MODELS["fundus"]))
    assert project_entry(fundus) == "Fundus photographs · 60 images seen"
    assert project_entry(ProjectInfo("New", tmp_path, 1)) == "no usable model · 1 image seen"


def test_after_a_deletion_the_project_saved_most_recently_opens(tmp_path: Path) -> None:
    infos = [
        ProjectInfo("default", tmp_path, updated="2025-01-01T10:00:00+00:00"),
        ProjectInfo("Site A", tmp_path, updated="2025-03-01T10:00:00+00:00"),
        ProjectInfo("Site B", tmp_path, updated="2025-04-01T10:00:00+00:00"),
        ProjectInfo("never saved", tmp_path),
    ]
    assert next_project(infos, "Site B") == "Site A"
    assert next_project(infos[:1], "default") is None
    assert next_project([ProjectInfo("b", tmp_path), ProjectInfo("a", tmp_path)], "x") == "a"


def test_inputs_are_kept_most_recent_first_with_their_image_counts(tmp_path: Path) -> None:
    folder, slide = tmp_path / "site", tmp_path / "s.svs"
    folder.mkdir()
    recent.note_opened(tmp_path, folder, "folder", when="2025-01-01T10:00:00+00:00")
    recent.note_opened(tmp_path, slide, "slide", when="2025-01-02T10:00:00+00:00")
    recent.note_images(tmp_path, folder, 12)
    inputs = recent.read_inputs(tmp_path)
    assert [(e.path, e.kind, e.images) for e in inputs] == [
        (str(slide), "slide", None),
        (str(folder), "folder", 12),
    ]
    recent.note_opened(tmp_path, folder, "folder", when="2025-01-03T10:00:00+00:00")
    inputs = recent.read_inputs(tmp_path)
    assert inputs[0].path == str(folder) and inputs[0].images == 12, "opened again: first, count kept"
    lines = recent.shown_inputs(inputs)
    assert (
        lines[0].text == "site (folder) · 12 images processed · opened 2025-01-03 10:00"
        and not lines[0].missing
    )
    assert lines[1].missing and lines[1].text.endswith("· missing"), "the slide is not there"
    assert "· nothing processed · opened" in lines[1].text, "opened, never run: said (issue 38)"
    assert not list(tmp_path.glob("*.tmp")), "written atomically"
    for k in range(recent.MAX_INPUTS + 5):
        recent.note_opened(tmp_path, tmp_path / f"f{k}", "folder")
    assert len(recent.read_inputs(tmp_path)) == recent.MAX_INPUTS


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[1, 2]",
        b'{"inputs": "x"}',
        b'{"inputs": [' + b'{"path": "/a", "kind": "folder", "opened": "t"},' * 20000 + b"{}]}",
        b"\xff\xfe",
    ],
)
def test_a_damaged_list_of_inputs_is_ignored_with_a_log_line(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / recent.INPUTS_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert recent.read_inputs(tmp_path) == ()
    assert "inputs" in caplog.text


def test_entries_of_the_wrong_shape_are_left_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = {"path": "/a", "kind": "folder", "opened": "2025-01-01T00:00:00", "images": 3}
    bad = [
        {**good, "kind": "zip"},
        {**good, "path": 7},
        {**good, "images": -1},
        {**good, "images": True},
        {**good, "opened": None},
        "text",
    ]
    (tmp_path / recent.INPUTS_FILE).write_text(json.dumps({"inputs": [good, *bad]}))
    with caplog.at_level(logging.WARNING):
        assert [e.path for e in recent.read_inputs(tmp_path)] == ["/a"]
    assert "6 entries of the wrong shape" in caplog.text


def test_file_dialogs_remember_where_they_were_per_kind() -> None:
    settings = (
        AppSettings().remember_folder("folder", Path("/data/site")).remember_folder("export", Path("/out"))
    )
    assert settings.start_folders() == {"folder": "/data/site", "export": "/out"}
    loaded = AppSettings.from_json(
        {**settings.to_json(), "folders": {"folder": "/x", "bogus": "/y", "slide": 3}}
    )
    assert loaded.start_folders() == {"folder": "/x"}
    assert AppSettings.from_json({"folders": ["not", "a", "dict"]}).start_folders() == {}


def test_a_projects_input_remembers_where_its_reports_went(tmp_path: Path) -> None:
    project, folder, reports = tmp_path / "p", tmp_path / "site", tmp_path / "out"
    project.mkdir()
    folder.mkdir()
    recent.note_opened(project, folder, "folder", when="2026-11-27T01:00:00")
    recent.note_images(project, folder, 60)
    assert recent.note_reports(project, tmp_path / "elsewhere", reports) == recent.read_inputs(project)
    recent.note_reports(project, folder, reports, when="2026-11-27T01:18:00")
    (line,) = recent.shown_inputs(recent.read_inputs(project))
    assert line.reports is None and "reports" not in line.text, "a reports folder that is gone is not offered"
    reports.mkdir()
    (line,) = recent.shown_inputs(recent.read_inputs(project))
    assert line.reports == str(reports) and line.text.endswith("· reports 2026-11-27 01:18")
    recent.note_opened(project, folder, "folder", when="2026-11-27T02:00:00")  # opened again
    (entry,) = recent.read_inputs(project)
    assert (entry.images, entry.reports, entry.opened) == (60, str(reports), "2026-11-27T02:00:00")


def test_a_reports_entry_of_the_wrong_type_is_left_out(tmp_path: Path) -> None:
    good = {"path": "/a", "kind": "folder", "opened": "2026-11-27T01:00:00"}
    (tmp_path / recent.INPUTS_FILE).write_text(
        json.dumps({"inputs": [{**good, "reports": 5}, {**good, "path": "/b", "reported": ["x"]}, good]})
    )
    assert [e.path for e in recent.read_inputs(tmp_path)] == ["/a"]
