"""``f2tta run --maps behind|inline`` (issue 28 item 4): the CSV's ``map`` column says which rows have
their map; with the maps behind the run ends with every map in the CSV, and a run stopped before
the maps are done leaves them ``pending`` until the next run makes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from support import random_images

import engine.run.stream
from engine.cli import main as cli_main
from tests.cli_helpers import before_step, read_rows, run_argv


def _folder(path: Path, n: int) -> Path:
    path.mkdir()
    for i, img in enumerate(random_images(n, size=32, seed=3)):
        Image.fromarray(img).save(path / f"img{i:02d}.png")
    return path


@pytest.mark.parametrize("maps", ["behind", "inline"])
def test_every_row_ends_with_its_map(
    tiny_model_path: Path, tmp_path: Path, maps: str, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 6)
    out = tmp_path / "p.csv"
    argv = run_argv(tiny_model_path, inp, out, tmp_path / "st", "--batch", "2", "--maps", maps)
    assert cli_main(argv) == 0
    rows = read_rows(out)
    assert [r["map"] for r in rows] == ["done"] * 6 and all(r["uncertainty"] for r in rows)
    err = capsys.readouterr().err
    assert ("uncertainty maps: 6 made behind the decisions" in err) == (maps == "behind")


def test_maps_left_pending_by_a_failed_run_are_made_by_the_next(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inp = _folder(tmp_path / "in", 6)
    out, state = tmp_path / "p.csv", tmp_path / "st"
    argv = run_argv(tiny_model_path, inp, out, state, "--batch", "2")

    def broken(session: object, images: object) -> list[object]:
        raise RuntimeError("a device error while mapping")

    monkeypatch.setattr(engine.run.stream, "map_batch", broken)
    assert cli_main(argv) == 1, "a failure of the map step fails the run"
    rows = read_rows(out)
    assert len(rows) == 6 and {r["map"] for r in rows} == {"pending"}
    assert {r["uncertainty"] for r in rows} == {""}, "no map yet"
    monkeypatch.undo()
    decisions: list[int] = []
    restore = before_step(monkeypatch, decisions.append)
    assert cli_main(argv) == 0
    restore()
    assert decisions == [], "the decisions are not made again"
    assert [r["map"] for r in read_rows(out)] == ["done"] * 6 and all(
        r["uncertainty"] for r in read_rows(out)
    )
