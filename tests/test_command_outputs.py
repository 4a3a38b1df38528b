"""Every command checks every file it will write before any work (issue 29, case 2, beyond ``run``).

``f2tta bench-suite --out R.json --review-budgets ...`` wrote ``R.reviews.png`` after hours of
work, ``f2tta bench --json R.json`` wrote ``R.png`` after its jobs, and ``f2tta train-source
--out M.safetensors`` wrote ``M.json`` and ``M.reference.safetensors`` after training: a FIFO or
a device at any of them was found only then (or, for a FIFO, replaced by a regular file). Each is
now refused, and left as it was, before anything is made.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest
from bench_fixtures import TINY_RECIPE, write_dataset
from support import TINY_CARD

from engine.cli import main as cli
from engine.model.card import save_model

RECIPE = TINY_RECIPE | {"mixes": [0.5], "methods": ["source", "idipt+"]}


def _is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("which", ["R.json", "R.reviews.png"])
def test_bench_suite_refuses_an_output_that_is_not_a_regular_file_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(RECIPE), encoding="utf-8")
    os.mkfifo(tmp_path / which)
    work = tmp_path / "work"
    args = ["bench-suite", str(recipe), "--work", str(work), "--out", str(tmp_path / "R.json")]
    assert cli([*args, "--review-budgets", "0,3"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert _is_fifo(tmp_path / which) and not work.exists(), "nothing was made"


def test_bench_refuses_a_figure_that_is_not_a_regular_file_before_the_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data", per_class=2)
    model = tmp_path / "tiny.safetensors"
    card = dataclasses.replace(TINY_CARD, source_domain="site1")
    save_model(card.build(), card, model)
    os.mkfifo(tmp_path / "R.png")
    args = ["bench", "--data", str(data), "--model", str(model), "--methods", "source", "--no-progress"]
    assert cli([*args, "--json", str(tmp_path / "R.json"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and "jobs" not in err, "refused before the jobs were planned to run"
    assert _is_fifo(tmp_path / "R.png") and not (tmp_path / "R.json").exists()


@pytest.mark.parametrize("which", ["M.json", "M.reference.safetensors"])
def test_train_source_refuses_a_companion_that_is_not_a_regular_file_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    data = write_dataset(tmp_path / "data")  # enough to train on
    os.mkfifo(tmp_path / which)
    out = tmp_path / "M.safetensors"
    args = ["train-source", "--data", str(data), "--source", "site1", "--out", str(out), "--epochs", "1"]
    args += ["--img-size", "32", "--model-kwargs", '{"depth": 1, "patch_size": 8}']
    assert cli(args) == 1
    assert "not a regular file" in capsys.readouterr().err
    assert _is_fifo(tmp_path / which) and not out.exists(), "refused before training"
