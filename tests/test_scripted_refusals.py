"""A scripted app run that cannot start ends with exit 1 (issue 42, item 4).

``f2tta-studio PATH --project P --run --quit-when-done`` on a project it cannot use -- its
``profile.json`` damaged, 200 kB long or deeply nested, or its model moved away -- logged the reason
and then never ended (killed at 150-600 s): the project was refused while the session loaded, before
Qt's event loop ran, and the request to quit made then was lost. The run now ends with exit 1 and
the reason on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_fixtures import make_folder

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 120  # seconds; the app ends in a few (Qt and torch load), before the fix it never did


def _profile(home: Path, name: str) -> Path:
    folder = home / "profiles" / name
    folder.mkdir(parents=True)
    return folder / "profile.json"


def _scripted(home: Path, folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "app", str(folder), "--home", str(home), "--project", "p"]
    argv += ["--method", "source", "--run", "--quit-when-done", *extra]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEADLINE)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("[" * 60_000, id="nested", marks=pytest.mark.slow),  # each case starts the app: 13 s
        pytest.param("[" * 200_000, id="nested-200kB"),
        pytest.param("x" * 200_000, id="200kB", marks=pytest.mark.slow),
        pytest.param("{not json", id="damaged"),
    ],
)
def test_a_scripted_run_on_a_damaged_project_ends_with_exit_1(
    tmp_path: Path, model: Path, content: str
) -> None:
    home = tmp_path / "home"
    _profile(home, "p").write_text(content)
    folder = make_folder(tmp_path, 2)
    done = _scripted(home, folder, "--model", str(model))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "profile.json of project 'p'" in done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert _profile_text(home) == content, "the project file is left as it was"


def _profile_text(home: Path) -> str:
    return (home / "profiles" / "p" / "profile.json").read_text()


def test_a_scripted_run_whose_project_model_moved_away_ends_with_exit_1(tmp_path: Path, model: Path) -> None:
    home = tmp_path / "home"
    moved = tmp_path / "gone" / "model.safetensors"  # where the project's model was
    profile = {"name": "p", "images_seen": 12, "model_path": str(moved), "model_sha256": "0" * 64}
    _profile(home, "p").write_text(json.dumps(profile))
    folder = make_folder(tmp_path, 2)
    done = _scripted(home, folder)
    assert done.returncode == 1, done.stderr[-3000:]
    assert str(moved) in done.stderr
    assert json.loads(_profile_text(home)) == profile
