"""``f2tta run --state PROJECT`` continues an app project as the app does (issue 38, finding 10): in
the arrival order the project began the folder in, with the model the project records. It refused
a folder of class sub-folders the project had interleaved with exit code 4 ("sorted by class":
the gate looked at the name order before the journal said which order the folder continues in),
and it needed a ``--model`` the project records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from support import random_images

from engine import DEFAULT_METHOD, Predicted, Session
from engine.cli import main as cli_main
from engine.run.runner import EXIT_NOT_APPLICABLE, EXIT_USAGE, JobOptions, open_folder_job
from tests.cli_helpers import read_rows


def _classes_folder(root: Path, per_class: int = 6) -> Path:
    """``normal/`` then ``tumor/``: in name order the images arrive class by class."""
    for k, name in enumerate(("normal", "tumor")):
        (root / name).mkdir(parents=True)
        for i, img in enumerate(random_images(per_class, seed=20 + k)):
            Image.fromarray(img).save(root / name / f"img{i}.png")
    return root


def _project(tmp_path: Path, model: Path, inp: Path) -> Path:
    """An app project (``profile.json`` with its model, ``state/``) that began ``inp`` interleaved."""
    project = tmp_path / "Site A"
    project.mkdir()
    (project / "profile.json").write_text(json.dumps({"name": "Site A", "model_path": str(model)}))
    session = Session(model, method=DEFAULT_METHOD)
    options = JobOptions(order="interleaved", save_every=1)
    job = open_folder_job(session, inp, project / "state", tmp_path / "app.csv", options)
    try:
        for outcome in job.run.outcomes():
            if isinstance(outcome, Predicted) and outcome.row.index >= 3:
                job.run.request_stop()
    finally:
        job.close()
    return project


def _run(*args: str) -> int:
    return cli_main(["run", "--no-progress", *args])


def test_a_project_continues_in_its_order_with_its_model(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _classes_folder(tmp_path / "site")
    project = _project(tmp_path, tiny_model_path, inp)
    out = tmp_path / "out.csv"
    assert (
        _run("--model", str(tiny_model_path), "--input", str(inp), "--state", str(project), "--out", str(out))
        == 0
    )
    assert "sorted by class" not in capsys.readouterr().err
    items = [r["item"] for r in read_rows(out)]
    assert len(items) == 12 and items != sorted(items), "in the project's interleaved order"

    again = tmp_path / "again.csv"  # no --model: the project's
    assert _run("--input", str(inp), "--state", str(project / "state"), "--out", str(again)) == 0
    assert [r["item"] for r in read_rows(again)] == items


def test_a_folder_arriving_class_by_class_is_still_refused(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check moved, it did not go: a state that begins the folder in name order refuses it."""
    inp = _classes_folder(tmp_path / "site")
    state, out = tmp_path / "state", tmp_path / "out.csv"
    assert _run(
        "--model", str(tiny_model_path), "--input", str(inp), "--state", str(state), "--out", str(out)
    ) == (EXIT_NOT_APPLICABLE)
    other = _classes_folder(tmp_path / "other")
    assert (
        _run(
            "--model",
            str(tiny_model_path),
            "--input",
            str(other),
            "--state",
            str(state),
            "--out",
            str(out),
            "--order",
            "interleaved",
        )
        == 0
    )
    capsys.readouterr()
    # the state exists now; the first folder has no recorded order: refused in name order, nothing written
    assert _run(
        "--model",
        str(tiny_model_path),
        "--input",
        str(inp),
        "--state",
        str(state),
        "--out",
        str(tmp_path / "x.csv"),
    ) == (EXIT_NOT_APPLICABLE)
    assert "sorted by class" in capsys.readouterr().err and not (tmp_path / "x.csv").exists()


def test_without_a_project_the_model_is_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inp = _classes_folder(tmp_path / "site")
    code = _run("--input", str(inp), "--state", str(tmp_path / "state"), "--out", str(tmp_path / "o.csv"))
    assert code == EXIT_USAGE and "--model is needed" in capsys.readouterr().err
