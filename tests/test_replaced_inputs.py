"""Inputs identified by their content as well as their path (issue 42, items 6 and 12).

6. A slide replaced at the same path was the same source: resumed after the replacement, one CSV
   and GeoJSON held 28 tiles of slide A and 84 of slide B; replaced during a batched run, tiles
   planned on A were read from B. Exit 0, no warning.
12. A picture changed between its decision and its map (maps behind, the run killed, the file
   replaced): the decision came from the old picture, the uncertainty map from the new one, and
   a processed image no longer in the folder made the count "120 of 119 images processed".

A slide's identity now holds its content (:attr:`SlideSource.source_id`), every tile read checks
that the path still names the file opened, and a picture's row records the content it was
decided on; a map is never made from another picture, and what changed is said.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from app_fixtures import write_pyramid
from cli_helpers import read_rows, run_argv
from PIL import Image

from engine import Journal, Session, StreamRun, open_folder, open_slide_source
from engine.cli import main as f2tta
from engine.io.slides import Slide
from engine.io.sources import same_place_other_slide
from engine.methods.idipt_plus import IDiPTPlusConfig
from engine.run.inputs import input_notes
from engine.run.outcomes import Mapped, MapSkipped, Predicted
from engine.run.stream import read_item, tile_reader

SIDE, TIFF_TILE = 512, 128
CLASSES = ("normal", "tumor")


def _slide(path: Path, seed: int) -> Path:
    """A 512-pixel slide all tissue; another ``seed`` gives other pixels at the same size."""
    rng = np.random.default_rng(seed)
    img = np.clip(np.array([170, 80, 160]) + rng.normal(0, 30, (SIDE, SIDE, 3)), 0, 255).astype(np.uint8)
    return write_pyramid(path, img, TIFF_TILE)


def _replace(path: Path, seed: int) -> None:
    """Put another slide at ``path`` as a copy would: written beside it, then renamed over it."""
    _slide(path.with_name("incoming.tif"), seed)
    os.replace(path.with_name("incoming.tif"), path)


def _run(
    session: Session, source: object, journal: Journal, stop_after: int | None = None
) -> list[Predicted]:
    got: list[Predicted] = []
    with Slide(source.path) as slide:  # type: ignore[attr-defined]
        run = StreamRun(
            session,
            source.items,  # type: ignore[attr-defined]
            tile_reader(slide, source.plan),  # type: ignore[attr-defined]
            source_id=source.source_id,  # type: ignore[attr-defined]
            journal=journal,
        )
        for outcome in run.outcomes():
            if isinstance(outcome, Predicted):
                got.append(outcome)
                if stop_after is not None and len(got) >= stop_after:
                    run.request_stop()
    return got


def test_a_replaced_slide_is_a_new_source_and_its_tiles_are_never_mixed(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    path = _slide(tmp_path / "slide.tif", 1)
    first = open_slide_source(path, 32, None, min_tissue=0.0)
    journal = Journal(tmp_path / "state")
    session = Session(tiny_model_path, method="source")
    assert len(_run(session, first, journal, stop_after=5)) == 5  # stopped: the rest is left to resume
    _replace(path, 2)
    second = open_slide_source(path, 32, None, min_tissue=0.0)
    assert second.source_id != first.source_id and same_place_other_slide(first.source_id, second.source_id)
    assert journal.rows(second.source_id) == [], "nothing of the first slide is taken as the second's"
    notes = input_notes(journal, second, [])
    assert len(notes) == 1 and "it was replaced" in notes[0] and "5 tile(s)" in notes[0]
    done = _run(session, second, journal)
    assert len(done) == len(second.items) == (SIDE // 32) ** 2
    assert len(journal.rows(first.source_id)) == 5, "the first slide's rows are kept as they were"
    journal.close()


def _confidences(model: Path, path: Path, source: object) -> dict[str, float]:
    """Each tile's source confidence, read alone from the slide at ``path``, a batch of 4."""
    with Slide(path) as slide:
        run = StreamRun(
            Session(model, method="source"), source.items, tile_reader(slide, source.plan), batch=4
        )  # type: ignore[attr-defined]
        return {o.item.key: o.row.source_confidence for o in run.outcomes() if isinstance(o, Predicted)}


def test_a_slide_replaced_during_a_batched_run_is_never_read_from_the_new_file(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    path = _slide(tmp_path / "slide.tif", 1)
    source = open_slide_source(path, 32, None, min_tissue=0.0)
    _slide(tmp_path / "b.tif", 2)
    first, other = (
        _confidences(tiny_model_path, path, source),
        _confidences(tiny_model_path, tmp_path / "b.tif", source),
    )
    close = 1e-5  # a batch's composition moves the last bits; the other slide's tiles differ by far more
    assert sum(abs(first[k] - other[k]) > 100 * close for k in first) >= 0.9 * len(first)
    rows: dict[str, float] = {}
    skipped: list[str] = []
    with Slide(path) as slide:
        session = Session(tiny_model_path, method="source")
        run = StreamRun(
            session, source.items, tile_reader(slide, source.plan), batch=4, readers=2, read_ahead=8
        )
        for outcome in run.outcomes():
            if isinstance(outcome, Predicted):
                rows[outcome.item.key] = outcome.row.source_confidence
                if len(rows) == 8:
                    _replace(path, 2)
            elif hasattr(outcome, "reason"):
                assert outcome.transient and "changed since it was opened" in outcome.reason  # type: ignore[attr-defined]
                skipped.append(outcome.item.key)  # type: ignore[attr-defined]
    assert len(rows) >= 8 and skipped, (len(rows), len(skipped))
    assert len(rows) + len(skipped) == len(source.items)
    wrong = [k for k, v in rows.items() if abs(v - first[k]) > close]
    assert not wrong, f"{len(wrong)} of {len(rows)} tiles were read from the other slide"


def test_f2tta_run_says_the_slide_was_replaced_and_changes_nothing(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _slide(tmp_path / "slide.tif", 1)
    out, state = tmp_path / "out.csv", tmp_path / "state"
    argv = run_argv(
        tiny_model_path, path, out, state, "--method", "source", "--accept-warnings", "--min-tissue", "0"
    )
    assert f2tta(argv) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and p.name.startswith("out")}
    _replace(path, 2)
    capsys.readouterr()
    assert f2tta(argv) == 2
    assert "another slide (replaced)" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before
    other = tmp_path / "other.csv"  # the new slide under another --out, the same state: a new input
    assert f2tta(run_argv(tiny_model_path, path, other, state, *argv[argv.index("--method") :])) == 0
    assert "it was replaced" in capsys.readouterr().err
    assert len(read_rows(other)) == len(read_rows(out)) == (SIDE // 32) ** 2


def _pictures(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(4)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(folder / f"img{i:03d}.png")
    return folder


def _idipt_plus(model: Path) -> Session:
    return Session(model, method="idipt+", method_config=IDiPTPlusConfig(mc_passes=2), seed=1)


def test_a_picture_changed_between_its_decision_and_its_map_gets_no_map(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    folder = _pictures(tmp_path / "site", 6)
    source = open_folder(folder, CLASSES)
    journal = Journal(tmp_path / "state")
    run = StreamRun(
        _idipt_plus(tiny_model_path), source.items, read_item, source_id=source.source_id, journal=journal,
        batch=2, maps="behind",
    )  # fmt: skip
    for outcome in run.outcomes():
        if isinstance(outcome, Predicted) and outcome.item.key == "img005.png":
            run.request_stop()  # every decision made, no map yet (as a run killed between them)
    assert run.summary.maps_pending == 6
    journal.close()
    Image.fromarray(np.full((40, 40, 3), 200, np.uint8)).save(folder / "img003.png")  # another picture

    journal = Journal(tmp_path / "state")
    session = _idipt_plus(tiny_model_path)
    journal.restore(session)
    notes = input_notes(journal, source, journal.rows(source.source_id))
    assert any("1 image(s) changed since their decisions" in n and "img003.png" in n for n in notes), notes
    again = StreamRun(
        session, source.items, read_item, source_id=source.source_id, journal=journal, maps="behind"
    )
    outcomes = list(again.outcomes())
    skipped = [o for o in outcomes if isinstance(o, MapSkipped)]
    assert [o.item.key for o in skipped] == ["img003.png"]
    assert "changed since its decision" in skipped[0].reason
    assert sorted(o.item.key for o in outcomes if isinstance(o, Mapped)) == [
        f"img{i:03d}.png" for i in (0, 1, 2, 4, 5)
    ]
    journal.close()


def test_the_count_and_the_notes_say_what_changed_in_the_folder(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _pictures(tmp_path / "site", 6)
    argv = run_argv(tiny_model_path, folder, tmp_path / "out.csv", tmp_path / "state", "--method", "source")
    assert f2tta([*argv, "--accept-warnings"]) == 0
    (folder / "img005.png").unlink()  # processed, then gone
    Image.fromarray(np.full((40, 40, 3), 90, np.uint8)).save(
        folder / "img001.png"
    )  # processed, then replaced
    capsys.readouterr()
    assert f2tta([*argv, "--accept-warnings"]) == 0
    err = capsys.readouterr().err
    assert "5 of 5 images processed (0 now, 5 before)" in err, err
    assert "1 image(s) changed since their decisions (replaced or rewritten): img001.png" in err
    assert "1 processed image(s) are no longer in site" in err


def test_the_app_says_what_changed_in_a_folder_it_reopens(studio: object, tmp_path: Path) -> None:
    folder = _pictures(tmp_path / "site", 6)
    app = studio.processed(folder)  # type: ignore[attr-defined]
    Image.fromarray(np.full((40, 40, 3), 90, np.uint8)).save(folder / "img002.png")
    (folder / "img004.png").unlink()
    studio.open_folder(app, folder)  # type: ignore[attr-defined]
    model = app.controller.model
    assert any("changed since their decisions" in n and "img002.png" in n for n in model.notes), model.notes
    assert any("1 processed image(s) are no longer in site" in n for n in model.notes), model.notes
    assert (model.progress.done, model.progress.total) == (5, 5)
