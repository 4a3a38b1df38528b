"""``f2tta run``: predictions as they are made, skipping bad files, Ctrl-C and resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import random_images

from engine import DEFAULT_METHOD, Predicted, Session
from engine.cli import main as cli_main
from engine.run.rows import CSV_COLUMNS
from engine.run.runner import JobOptions, open_folder_job
from engine.run.state import read_state
from engine.run.step import StepResult
from tests.cli_helpers import read_rows, run_argv

REPO = Path(__file__).resolve().parents[1]


def _folder(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(random_images(n, seed=11)):
        Image.fromarray(img).save(root / f"img{i}.png")
    return root


def _run(model: Path, inp: Path, out: Path, state: Path, *extra: str) -> int:
    return cli_main(run_argv(model, inp, out, state, *extra))


def test_run_writes_rows_skips_bad_files_and_resumes(tiny_model_path: Path, tmp_path: Path) -> None:
    inp = _folder(tmp_path / "in", 12)
    (inp / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    (inp / "empty.jpg").write_bytes(b"")
    out, state = tmp_path / "preds.csv", tmp_path / "state"
    assert _run(tiny_model_path, inp, out, state, "--save-every", "5") == 0
    rows = read_rows(out)
    assert [r["item"] for r in rows] == [f"img{i}.png" for i in range(12)]  # natural name order
    assert [r["index"] for r in rows] == [str(i) for i in range(12)]
    assert tuple(rows[0]) == CSV_COLUMNS  # the app's export columns
    skipped = read_rows(tmp_path / "preds.skipped.csv")
    assert sorted(r["item"] for r in skipped) == ["broken.png", "empty.jpg"]
    assert all(r["reason"] for r in skipped)
    _, meta = read_state(state)
    assert meta["images_seen"] == 12

    # New images arrive; the second run adapts only to them, continuing the same state.
    Image.fromarray(random_images(1, seed=99)[0]).save(inp / "zz_new.png")
    assert _run(tiny_model_path, inp, out, state) == 0
    rows = read_rows(out)
    assert [r["item"] for r in rows][-1] == "zz_new.png" and len(rows) == 13
    assert rows[-1]["index"] == "12"
    assert len(read_rows(tmp_path / "preds.skipped.csv")) == 2
    assert (tmp_path / "preds.config.json").exists()


def test_rows_after_last_save_are_recomputed_not_duplicated(tiny_model_path: Path, tmp_path: Path) -> None:
    inp = _folder(tmp_path / "in", 10)
    ref_out = tmp_path / "ref.csv"
    # One image per step throughout (a batched source pass agrees only to float precision)
    assert _run(tiny_model_path, inp, ref_out, tmp_path / "ref_state", "--batch", "1") == 0

    class Crash(Exception):
        pass

    def crash_after_six(result: StepResult, rel: str) -> None:
        if result.index == 5:  # row 6 is on disk, the last save was after image 4
            raise Crash

    out, state = tmp_path / "preds.csv", tmp_path / "state"
    job = open_folder_job(Session(tiny_model_path), inp, state, out, JobOptions(save_every=4))
    with pytest.raises(Crash):
        for outcome in job.run.outcomes():
            if isinstance(outcome, Predicted):
                crash_after_six(outcome.step, outcome.item.name)
    job.close()
    with out.open("a") as fh:
        fh.write("6,img6.p")  # a torn last line
    assert len(read_rows(out)) == 7
    assert read_state(state)[1]["images_seen"] == 4

    assert _run(tiny_model_path, inp, out, state, "--batch", "1") == 0
    final = read_rows(out)
    assert [r["item"] for r in final] == [f"img{i}.png" for i in range(10)]
    ref = read_rows(ref_out)
    assert [{**r, "seconds": ""} for r in final] == [
        {**r, "seconds": ""} for r in ref
    ]  # same as uninterrupted


def test_ctrl_c_saves_last_finished_image_and_resume_loses_nothing(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    inp = _folder(tmp_path / "in", 150)
    out, state = tmp_path / "preds.csv", tmp_path / "state"
    cmd = [
        sys.executable,
        "-m",
        "engine.cli",
        *run_argv(tiny_model_path, inp, out, state, "--save-every", "1000"),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and len(out.read_text().splitlines()) > 6:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    rows = read_rows(out)
    _, meta = read_state(state)
    assert 5 <= meta["images_seen"] == len(rows) < 150
    source_record = next(iter(meta["extra"]["sources"].values()))
    assert [r["item"] for r in rows] == source_record["processed"]

    assert _run(tiny_model_path, inp, out, state) == 0
    final = read_rows(out)
    paths = [r["item"] for r in final]
    assert len(paths) == len(set(paths)) == 150
    assert [r["index"] for r in final] == [str(i) for i in range(150)]


def test_run_reports_missing_input(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tiny_model_path, tmp_path / "nope", tmp_path / "o.csv", tmp_path / "s") == 2
    assert "input not found (a folder of images or a slide)" in capsys.readouterr().err


def test_state_of_another_method_is_refused(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 3)
    assert _run(tiny_model_path, inp, tmp_path / "o.csv", tmp_path / "s") == 0
    assert _run(tiny_model_path, inp, tmp_path / "o.csv", tmp_path / "s", "--method", "source") == 2
    assert f"method '{DEFAULT_METHOD}'" in capsys.readouterr().err
    assert np.isfinite([float(r["confidence"]) for r in read_rows(tmp_path / "o.csv")]).all()


def test_a_folder_begun_interleaved_continues_in_that_order_without_order(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """The journal records the arrival order and seed (as the app begins a project), so ``f2tta run``
    without ``--order`` continues the same shuffle, and the rows match one uninterrupted run."""
    inp = _folder(tmp_path / "in", 10)
    whole_state, whole_out = tmp_path / "whole", tmp_path / "whole.csv"
    assert (
        _run(tiny_model_path, inp, whole_out, whole_state, "--order", "interleaved", "--order-seed", "5") == 0
    )
    whole = [r["item"] for r in read_rows(whole_out)]
    assert whole != sorted(whole), "a seeded shuffle, not the name order"

    state, out = tmp_path / "state", tmp_path / "out.csv"
    session = Session(tiny_model_path, method=DEFAULT_METHOD)
    job = open_folder_job(
        session, inp, state, out, JobOptions(order="interleaved", order_seed=5, save_every=1)
    )
    try:
        for outcome in job.run.outcomes():
            if isinstance(outcome, Predicted) and outcome.row.index >= 3:
                job.run.request_stop()
    finally:
        job.journal.close()
    assert _run(tiny_model_path, inp, out, state) == 0  # no --order: the recorded one
    assert [r["item"] for r in read_rows(out)] == whole
    assert read_state(state)[1]["extra"]["sources"][str(inp.resolve())]["arrival"] == {
        "order": "interleaved",
        "seed": 5,
    }
