"""Hostile project files cannot be turned against the user (issue 29, cases 1, 10 and 15).

1. One deeply nested JSON file -- ``profile.json``, ``inputs.json``, ``settings.json``, a line of
   ``marks.jsonl`` -- raised RecursionError: one such ``profile.json`` in any project stopped the
   app at start-up whatever project was asked for. Every file is now read bounded in size and
   nesting (``engine.read_json_file``; the line reader bounds each line) and checked field by
   field; a damaged project file disables that project only, with a message naming the file.
10. A 300 MB ``profile.json`` or ``settings.json`` was read whole, and every project's
    ``profile.json`` whenever the project list was built: each is read only up to its limit.
15. A project folder named ``evil\\n`` (made by hand) was listed, and opening it opened ``evil``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_fixtures import make_folder
from controller_fakes import make, session_info

from app.core import recent
from app.core.advice import SESSION_KEYS
from app.core.projects import ProjectStore
from app.core.settings import AppSettings, load_settings, save_settings
from engine.review.marks import MarkStore, ReviewMark
from engine.util.jsonlines import KeyedJsonLines

DEEP = "[" * 200_000  # 200 kB: json.loads recursed once a level
DEEP_SMALL = "[" * 60_000  # under profile.json's size limit: refused for its depth


def _project(home: Path, name: str, **fields: object) -> Path:
    folder = home / "profiles" / name
    folder.mkdir(parents=True)
    (folder / "profile.json").write_text(json.dumps({"name": name, "images_seen": 0, **fields}))
    return folder


def test_a_deep_profile_json_disables_that_project_only(tmp_path: Path) -> None:
    _project(tmp_path, "good")
    (_project(tmp_path, "evil") / "profile.json").write_text(DEEP_SMALL)
    infos = {i.name: i for i in ProjectStore(tmp_path).infos()}
    assert infos["good"].damaged is None
    damaged = infos["evil"].damaged
    assert damaged is not None and "profile.json of project 'evil'" in damaged and "nested" in damaged
    assert "Repair or remove that file" in damaged
    with pytest.raises(Exception, match=r"profile\.json of project 'evil'"):
        ProjectStore(tmp_path).open("evil")
    assert ProjectStore(tmp_path).open("good").name == "good"

    c, view, worker, _ = make(tmp_path, project="evil")
    c.load_session()
    assert not worker.of("open_session"), "the damaged project is not opened"
    banner = view.last("show_banner")[0]
    assert banner.key in SESSION_KEYS and "profile.json of project 'evil'" in banner.text
    names, _, _, entries = view.last("set_projects")
    assert "good" in names and "evil" in names, "the other projects stay on offer"
    assert entries["evil"].startswith("damaged")
    c.projects.select("good")
    assert worker.last("open_session")[0].project == "good"
    c.sessions.on_worker_session_ready(session_info(tmp_path, "good"))
    assert c.state.usable
    c.projects.select("evil")  # chosen from the list: said, and the open project stays
    assert "profile.json of project 'evil'" in view.last("show_error")[1]
    assert c.state.usable and c.state.settings.project == "good"


@pytest.mark.parametrize(
    "content",
    [DEEP_SMALL, "x" * (70 * 1024), json.dumps({"images_seen": "many"}), json.dumps({"method_config": [1]})],
    ids=["deep", "too-large", "wrong-type", "wrong-shape"],
)
def test_every_damaged_profile_json_is_named_never_read_past_its_limit(tmp_path: Path, content: str) -> None:
    (_project(tmp_path, "p") / "profile.json").write_text(content)
    info = ProjectStore(tmp_path).info("p")
    assert info is not None and info.damaged is not None and "profile.json of project 'p'" in info.damaged


def test_a_huge_profile_json_is_refused_by_its_size_alone(tmp_path: Path) -> None:
    """A 300 MB profile.json (here a sparse file) is refused from its size: nothing is read."""
    folder = _project(tmp_path, "big")
    with open(folder / "profile.json", "r+b") as fh:
        fh.truncate(300 << 20)
    info = ProjectStore(tmp_path).info("big")
    assert info is not None and info.damaged is not None and "exceeds the limit" in info.damaged


def test_deep_inputs_settings_and_marks_lines_are_skipped_with_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = _project(tmp_path, "p")
    (project / "inputs.json").write_text(DEEP)
    with caplog.at_level(logging.WARNING):
        assert recent.read_inputs(project) == ()
    assert "inputs.json of project 'p'" in caplog.text

    settings = tmp_path / "settings.json"
    settings.write_text(DEEP)
    with caplog.at_level(logging.WARNING):
        assert load_settings(settings) == AppSettings()
    assert "settings.json" in caplog.text and "nested" in caplog.text
    save_settings(AppSettings(project="kept"), settings)
    assert load_settings(settings).project == "kept"

    review = project / "review"
    store = MarkStore(review, "source-1", 2)
    store.put(ReviewMark("a", 1, 0, "2025-01-01T10:00:00+00:00", "me"))
    store.close()
    with open(store.path, "a", encoding="utf-8") as fh:
        fh.write(DEEP + "\n")
    store = MarkStore(review, "source-1", 2)
    assert list(store.load().marks) == ["a"], "the deep line is skipped; the mark before it is kept"
    store.close()
    lines = KeyedJsonLines(tmp_path / "rows.jsonl", key="key")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"key": "k", "v": [[1]]}) + "\n" + "{" * 50_000 + "\n")
    assert lines.read()[0] == {"k": {"key": "k", "v": [[1]]}}


def test_a_deep_model_card_or_export_marker_breaks_nothing(tmp_path: Path) -> None:
    from app.core.project_lines import card_of, project_lines
    from app.reports.export import MARKER, recover
    from app.worker.io import card_checksum

    (tmp_path / "m.safetensors").write_bytes(b"x")
    (tmp_path / "m.json").write_text(DEEP)
    assert card_of(tmp_path / "m.safetensors") is None and card_checksum(tmp_path / "m.safetensors") == ""
    info = ProjectStore(tmp_path).open("p").info()
    entry, _ = project_lines(
        info.__class__(**{**info.__dict__, "model_path": str(tmp_path / "m.safetensors")})
    )
    assert "no usable model" in entry
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text(DEEP)
    recover(out, ["report.pdf"])
    assert not (out / MARKER).exists()


def test_a_project_folder_with_a_line_break_in_its_name_is_not_listed(tmp_path: Path) -> None:
    _project(tmp_path, "evil\n")
    _project(tmp_path, "fine")
    store = ProjectStore(tmp_path)
    assert store.names() == ["fine"]
    assert store.info("evil\n") is None


def test_the_app_starts_whatever_project_file_is_damaged(tmp_path: Path, model: Path) -> None:
    """f2tta-studio on a good project runs and exports while another project's profile.json is
    200 000 brackets deep (it stopped the app at start-up: RecursionError, exit 1, no reports)."""
    home = tmp_path / "home"
    (_project(home, "evil") / "profile.json").write_text(DEEP)
    (home / "settings.json").write_text(json.dumps({"project": "evil"}))
    folder = make_folder(tmp_path, 4, labelled="csv")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(root)}
    argv = [sys.executable, "-m", "app", str(folder), "--home", str(home), "--project", "good"]
    argv += ["--model", str(model), "--method", "source", "--run", "--export", str(tmp_path / "out")]
    done = subprocess.run(
        [*argv, "--quit-when-done"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "report.pdf").is_file()
    assert "RecursionError" not in done.stderr
