"""The applicability gate (engine.model.gate): one set of checks for f2tta run and the app."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from app_fixtures import CLASSES, make_folder
from PIL import Image
from support import TINY_CARD

from engine.cli import main as cli_main
from engine.io.sources import open_folder
from engine.model.gate import check_source
from engine.run.runner import EXIT_NOT_APPLICABLE
from tests.cli_helpers import run_argv


def _fundus_folder(root: Path, n: int = 8) -> Path:
    """Bright discs on black corners: what the image-kind judge calls fundus photographs."""
    root.mkdir(parents=True)
    yy, xx = np.mgrid[0:64, 0:64]
    disc = (yy - 32) ** 2 + (xx - 32) ** 2 < 28**2
    for i in range(n):
        img = np.zeros((64, 64, 3), np.uint8)
        img[disc] = (200 - i, 90, 40)
        Image.fromarray(img).save(root / f"eye{i}.png")
    return root


def test_each_check_fires_on_its_case_and_not_on_a_fitting_folder(tmp_path: Path) -> None:
    sorted_folder = open_folder(make_folder(tmp_path / "sorted", 24, labelled="folders"), CLASSES)
    assert [w.check for w in check_source(sorted_folder, TINY_CARD)] == ["class-sorted"]
    mixed = open_folder(sorted_folder.root, CLASSES, "interleaved", seed=0)
    assert check_source(mixed, TINY_CARD) == ()
    eyes = open_folder(_fundus_folder(tmp_path / "eyes"), CLASSES)
    warnings = check_source(eyes, TINY_CARD)  # the tiny model's classes say histology
    assert [w.check for w in warnings] == ["image-kind"] and "fundus photographs" in warnings[0].message


@pytest.mark.parametrize("accept", [False, True])
def test_f2tta_run_stops_with_code_4_unless_the_warnings_are_accepted(
    tiny_model_path: Path, tmp_path: Path, accept: bool
) -> None:
    inp = _fundus_folder(tmp_path / "eyes")
    out, state = tmp_path / "out.csv", tmp_path / "state"
    argv = run_argv(tiny_model_path, inp, out, state, *(["--accept-warnings"] if accept else []))
    code = cli_main(argv)
    if not accept:
        assert code == EXIT_NOT_APPLICABLE
        assert not out.exists() and not state.exists(), "nothing was processed or written"
        return
    assert code == 0
    config = json.loads(out.with_suffix(".config.json").read_text(encoding="utf-8"))
    assert [w["check"] for w in config["run"]["applicability_warnings"]] == ["image-kind"]
