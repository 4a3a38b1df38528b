"""The app while the maps follow the decisions (issue 28 item 4), without a display: a map replaces
its image's row and brings its overlay, the table's words and the caption say which images have
theirs, the status line counts them, and the worker's messages carry them."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from app.core.messages import ItemResult
from app.core.overlay import Overlay
from app.core.run_items import image_title
from app.core.run_maps import MapsCount
from app.core.run_model import RunModel
from app.worker.results import item_result
from engine import FolderSource, Mapped, MapSkipped, PredictionRow, StreamItem
from engine.run.maps import MapResult
from engine.run.rows import MAP_PENDING

CLASSES = ("normal", "tumor")


def _rows(n: int) -> list[PredictionRow]:
    return [
        PredictionRow(
            i,
            i,
            f"k{i}",
            f"img{i}.png",
            1,
            "tumor",
            0.9,
            0.9,
            1,
            "tumor",
            0.9,
            math.nan,
            None,
            None,
            0.01,
            map_status=MAP_PENDING,
        )
        for i in range(n)
    ]


def _model(tmp_path: Path, n: int) -> RunModel:
    items = tuple(StreamItem(i, f"k{i}", f"img{i}.png", path=tmp_path / f"img{i}.png") for i in range(n))
    model = RunModel()
    model.open(FolderSource(tmp_path, "name", items), 0, (), 1, CLASSES)
    return model


def _map(row: PredictionRow, value: float) -> MapResult:
    return MapResult(np.full((2, 2), value), np.array([0]), np.array([3]), (2, 2), prompted=0)


def test_a_map_replaces_its_row_and_brings_its_overlay(tmp_path: Path) -> None:
    model = _model(tmp_path, 4)
    empty = Overlay.from_step((2, 2), None, None, None)
    decided = [ItemResult(r, empty, None, np.zeros(2, np.float32)) for r in _rows(4)]
    count = MapsCount()
    model.add_results(decided)
    count.add(decided)
    model.select(1)
    assert count.text() == "maps: 0 of 4"
    assert "not made yet" in image_title(model.row_at(1))
    seen: list[object] = []
    model.selection_changed.connect(seen.append)
    mapped_row = dataclasses.replace(_rows(2)[1], uncertainty=0.25, prompted_prediction=0, map_status="")
    result = item_result(
        Mapped(StreamItem(1, "k1", "img1.png"), mapped_row, _map(mapped_row, 0.25), None), None
    )
    assert result.map_only and result.overlay.uncertainty is not None
    model.add_results([result])
    count.add([result])
    assert len(model.rows) == 4, "the map replaces the row, it adds none"
    assert model.row_at(1) == mapped_row and model.raw_rows[1] == mapped_row
    assert model.overlays[1].uncertainty is not None and model.heat_levels is not None
    assert seen and seen[-1].overlay is model.overlays[1], "the image on show gets its overlay at once"
    assert count.text() == "maps: 1 of 4"
    assert "mean uncertainty 0.2500" in image_title(model.row_at(1))
    unreadable = dataclasses.replace(_rows(3)[2], map_status="unreadable")
    skipped = item_result(MapSkipped(StreamItem(2, "k2", "img2.png"), unreadable, "truncated"), None)
    model.add_results([skipped])
    count.add([skipped])
    assert model.row_at(2) == unreadable and "could not be read again" in image_title(unreadable)
    assert count.text() == "maps: 2 of 4"


def test_the_count_starts_from_the_rows_of_earlier_runs() -> None:
    """A run resumed after a stop with only maps left counts the maps of the earlier decisions."""
    rows = _rows(5)
    rows[0] = dataclasses.replace(rows[0], map_status="", uncertainty=0.1)
    count = MapsCount(rows)
    assert count.text() == "maps: 1 of 5"
    mapped = dataclasses.replace(rows[1], map_status="", uncertainty=0.2)
    count.add([ItemResult(mapped, Overlay.from_step((2, 2), None, None, None), None, np.zeros(0), True)])
    assert count.text() == "maps: 2 of 5"


def test_a_source_whose_maps_are_pending_still_has_work(tmp_path: Path) -> None:
    """A run stopped after its decisions, before its maps: Start stays possible (the maps are left)."""
    items = tuple(StreamItem(i, f"k{i}", f"img{i}.png", path=tmp_path / f"img{i}.png") for i in range(4))
    rows = _rows(4)
    rows[0] = dataclasses.replace(rows[0], map_status="", uncertainty=0.1)
    model = RunModel()
    model.open(FolderSource(tmp_path, "name", items), 4, tuple(rows), 1, CLASSES)
    assert model.pending == 3, "every image decided, three maps left"
    mapped = dataclasses.replace(rows[1], map_status="", uncertainty=0.2)
    model.add_results(
        [ItemResult(mapped, Overlay.from_step((2, 2), None, None, None), None, np.zeros(0), True)]
    )
    assert model.pending == 2


def test_the_run_line_counts_the_maps(tmp_path: Path) -> None:
    from app.core.messages import RunEnded
    from app.core.notices import run_ended

    ended = RunEnded("stopped", 0, 0, True, None, "", "", (1200, 1, 800))
    line = run_ended(ended, _model(tmp_path, 1))
    assert line.startswith("Run stopped: 0 images processed, 1200 uncertainty maps made behind the decisions")
    assert "(1 images could not be read again for theirs)" in line and "800 maps pending" in line


def test_a_map_in_the_same_batch_as_its_decision_reaches_the_row(tmp_path: Path) -> None:
    """The worker sends results every 50 ms: a fast map can travel with its own decision."""
    model = _model(tmp_path, 2)
    row = _rows(1)[0]
    decided = ItemResult(row, Overlay.from_step((2, 2), None, None, None), None, np.zeros(2, np.float32))
    mapped_row = dataclasses.replace(row, uncertainty=0.25, prompted_prediction=0, map_status="")
    mapped = item_result(
        Mapped(StreamItem(0, "k0", "img0.png"), mapped_row, _map(mapped_row, 0.25), None), None
    )
    model.add_results([decided, mapped])
    assert model.rows == [mapped_row] and model.overlays[0].uncertainty is not None
    assert model.pending == 1, "one image left to decide, no map left"
