"""The applicability gate samples enough and judges the whole (issue 29, case 9).

40 fundus photographs with 8 histology images at the positions the gate read (every sixth) passed
a histology model silently (exit 0); histology tiles with a 12-px black frame were called fundus
photographs (exit 4). The gate now reads up to :data:`GATE_SAMPLES` images at stratified random
positions, reports the share that looks like another kind (a mixed folder fires too), and the
kind is judged inside any uniform frame.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import TINY_CARD

from engine.cli import main as cli_main
from engine.io.sources import open_folder
from engine.model import gate
from engine.model.card import ModelCard
from engine.model.gate import GATE_SAMPLES, check_source
from engine.model.kind import image_kind
from engine.run.runner import EXIT_NOT_APPLICABLE, EXIT_OK
from tests.cli_helpers import run_argv

CLASSES = TINY_CARD.classes
FUNDUS_CARD = ModelCard(
    arch=TINY_CARD.arch, classes=("normal", "glaucoma"), img_size=32, model_kwargs=TINY_CARD.model_kwargs
)


def _fundus(rng: np.random.Generator, size: int = 64) -> np.ndarray:
    """A bright disc on black corners."""
    yy, xx = np.mgrid[0:size, 0:size]
    disc = (yy - size / 2) ** 2 + (xx - size / 2) ** 2 < (0.45 * size) ** 2
    img = np.zeros((size, size, 3), np.uint8)
    img[disc] = (190 + rng.integers(0, 20), 90, 40)
    return img


def _histology(rng: np.random.Generator, size: int = 64, frame: int = 0) -> np.ndarray:
    """A bright pink field with purple nuclei to the edges; ``frame`` px of black around it."""
    img = np.empty((size, size, 3), np.uint8)
    img[:] = (225, 175, 205)
    img += rng.integers(0, 20, (size, size, 3), dtype=np.uint8)
    for _ in range(12):
        y, x = rng.integers(4, size - 4, 2)
        img[y - 2 : y + 2, x - 2 : x + 2] = (120, 60, 150)
    if frame:
        img[:frame], img[-frame:], img[:, :frame], img[:, -frame:] = 0, 0, 0, 0
    return img


def _folder(root: Path, kinds: list[str], frame: int = 0) -> Path:
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i, kind in enumerate(kinds):
        img = _fundus(rng) if kind == "fundus" else _histology(rng, frame=frame)
        Image.fromarray(img).save(root / f"img{i:03d}.png")
    return root


def _mixed_at_old_positions(root: Path, majority: str, minority: str) -> Path:
    """48 images, the 8 read by the old gate (every sixth, from 0) of the minority kind."""
    return _folder(root, [minority if i % 6 == 0 else majority for i in range(48)])


def test_a_fundus_folder_with_histology_at_the_old_positions_does_not_pass_a_histology_model(
    tmp_path: Path,
) -> None:
    source = open_folder(_mixed_at_old_positions(tmp_path / "mixed", "fundus", "histology"), CLASSES)
    warnings = check_source(source, TINY_CARD)
    assert [w.check for w in warnings] == ["image-kind"]
    assert "look like fundus photographs" in warnings[0].message
    assert "40 of its 48 images (83 %) look like fundus photographs" in warnings[0].message


def test_a_large_mixed_folder_is_sampled_across_and_its_share_estimated(tmp_path: Path) -> None:
    """240 images, a sixth of them (every sixth) histology: the sample's share estimates it."""
    source = open_folder(
        _folder(tmp_path / "big", ["histology" if i % 6 == 0 else "fundus" for i in range(240)]), CLASSES
    )
    judged = gate.judge_source(source)
    assert judged.judged == GATE_SAMPLES
    assert 0.05 < judged.counts["histology"] / judged.judged < 0.35, "the share estimates the folder's 17 %"
    [warning] = check_source(source, FUNDUS_CARD)
    assert f"of the {GATE_SAMPLES} images sampled across the folder" in warning.message
    assert "look like histology" in warning.message and "of its 240)" in warning.message


def test_a_mixed_folder_is_reported_with_its_share_of_another_kind(tmp_path: Path) -> None:
    """A fundus model: most images fit, a sixth look like histology. The folder is mixed."""
    source = open_folder(_mixed_at_old_positions(tmp_path / "mixed", "fundus", "histology"), CLASSES)
    warnings = check_source(source, FUNDUS_CARD)
    assert [w.check for w in warnings] == ["image-kind"]
    message = warnings[0].message
    assert "look like histology" in message and "mixed" in message and "%" in message


def test_a_folder_of_one_kind_passes(tmp_path: Path) -> None:
    eyes = open_folder(_folder(tmp_path / "eyes", ["fundus"] * 40), CLASSES)
    assert check_source(eyes, FUNDUS_CARD) == ()
    tiles = open_folder(_folder(tmp_path / "tiles", ["histology"] * 40), CLASSES)
    assert check_source(tiles, TINY_CARD) == ()


@pytest.mark.parametrize("frame", [4, 12, 16])
def test_a_frame_does_not_decide_the_kind(frame: int) -> None:
    rng = np.random.default_rng(frame)
    assert image_kind(_histology(rng, frame=frame)) == "histology"
    framed_eye = np.full(
        (64 + 2 * frame, 64 + 2 * frame, 3), 255, np.uint8
    )  # a white frame round a photograph
    framed_eye[frame:-frame, frame:-frame] = _fundus(rng)
    assert image_kind(framed_eye) == "fundus"
    assert image_kind(_fundus(rng)) == "fundus" and image_kind(_histology(rng)) == "histology"


def test_framed_histology_tiles_run_under_a_histology_model(tiny_model_path: Path, tmp_path: Path) -> None:
    inp = _folder(tmp_path / "framed", ["histology"] * 12, frame=12)
    out, state = tmp_path / "out.csv", tmp_path / "st"
    assert cli_main(run_argv(tiny_model_path, inp, out, state)) == EXIT_OK


def test_f2tta_run_stops_on_the_mixed_folder_and_says_what_share(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _mixed_at_old_positions(tmp_path / "mixed", "fundus", "histology")
    code = cli_main(run_argv(tiny_model_path, inp, tmp_path / "out.csv", tmp_path / "st"))
    assert code == EXIT_NOT_APPLICABLE
    err = capsys.readouterr().err
    assert "look like fundus photographs" in err and "%" in err and not (tmp_path / "st").exists()


def test_sampled_positions_cover_the_whole_folder() -> None:
    positions = gate.sample_positions(48, 32, seed=3)
    assert len(positions) == 32 == len(set(positions)) and positions == sorted(positions)
    strata = [p * 32 // 48 for p in positions]
    assert strata == list(range(32)), "one position in each thirty-second of the folder"
    assert gate.sample_positions(48, 32, seed=3) == positions, "seeded"
    assert gate.sample_positions(48, 32, seed=4) != positions
    assert gate.sample_positions(10, 32, seed=0) == list(range(10)), "a small folder is read whole"
