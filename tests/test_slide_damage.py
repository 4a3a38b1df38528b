"""Slides that are damaged, huge or without a small level (issue 21, case 2 and "also seen").

One failed read left the OpenSlide handle in its error state, so every later tile of the slide
failed too and was recorded as skipped for good; a sparse 200 000-pixel slide planned 2.76 M tiles
with no limit; a slide without a small level said "cannot read the slide overview ()".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from app_fixtures import make_slide, write_pyramid

import engine.io.slides as slides
from engine import Journal, Session, StreamRun, open_slide_source
from engine.io.slides import Slide, SlideError
from engine.run.stream import skip_for, tile_reader

SIDE = 2048  # level-0 side of the generated slide (its overview is read from level 1)
TIFF_TILE = 128  # its TIFF tiles
DAMAGED = 5  # index of the level-0 TIFF tile whose bytes are overwritten


def _damaged_slide(path: Path) -> Path:
    """A 3-level deflate-compressed tiled TIFF whose level-0 tile :data:`DAMAGED` cannot be decoded."""
    import tifffile

    rng = np.random.default_rng(5)
    img = np.clip(np.array([170, 80, 160]) + rng.normal(0, 20, (SIDE, SIDE, 3)), 0, 255).astype(np.uint8)
    write_pyramid(path, img, TIFF_TILE, compression="zlib")
    with tifffile.TiffFile(path) as tf:
        offset = tf.pages[0].dataoffsets[DAMAGED]
        count = tf.pages[0].databytecounts[DAMAGED]
    data = bytearray(path.read_bytes())
    data[offset : offset + count] = b"\xff" * count
    path.write_bytes(bytes(data))
    return path


def test_one_damaged_tile_does_not_poison_the_slide(tmp_path: Path) -> None:
    path = _damaged_slide(tmp_path / "damaged.tif")
    source = open_slide_source(path, TIFF_TILE, None, min_tissue=0.0)
    assert len(source.items) == (SIDE // TIFF_TILE) ** 2

    # What a fresh handle per tile reads: the reference.
    damaged_alone = set()
    for item in source.items:
        with Slide(path) as fresh:
            try:
                tile_reader(fresh, source.plan)(item)
            except SlideError:
                damaged_alone.add(item.key)
    assert damaged_alone == {source.items[DAMAGED].key}, "only the tile over the damaged TIFF tile"

    # One handle for the whole run, as the app's worker keeps it.
    with Slide(path) as slide:
        read = tile_reader(slide, source.plan)
        failed = {}
        for item in source.items:
            try:
                read(item)
            except Exception as exc:
                failed[item.key] = skip_for(item, exc)
    assert set(failed) == damaged_alone, f"{len(failed)} tiles failed, {len(damaged_alone)} are damaged"
    assert all(not skip.transient and "damaged" in skip.reason for skip in failed.values())


def test_a_run_over_a_damaged_slide_skips_only_the_damaged_tile(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    path = _damaged_slide(tmp_path / "damaged.tif")
    source = open_slide_source(path, 2 * TIFF_TILE, None, min_tissue=0.0)  # 8 x 8 tiles
    journal = Journal(tmp_path / "state")
    try:
        with Slide(path) as slide:
            run = StreamRun(
                Session(tiny_model_path, method="source"),
                source.items,
                tile_reader(slide, source.plan),
                source_id=source.source_id,
                journal=journal,
            )
            list(run.outcomes())
        assert [s.item.key for s in run.summary.skipped] == ["512,0"], "the tile over the damaged TIFF tile"
        assert run.summary.processed == len(source.items) - 1 and run.summary.remaining == 0
    finally:
        journal.close()


def test_a_slide_that_cannot_be_opened_again_is_a_transient_skip(tmp_path: Path) -> None:
    path = _damaged_slide(tmp_path / "damaged.tif")
    source = open_slide_source(path, TIFF_TILE, None, min_tissue=0.0)
    bad = source.items[DAMAGED]  # plan tiles and TIFF tiles coincide, both in reading order
    with Slide(path) as slide:
        path.rename(tmp_path / "moved.tif")  # the share went away after the slide was opened
        with pytest.raises(SlideError) as info:
            tile_reader(slide, source.plan)(bad)
    skip = skip_for(bad, info.value)
    assert skip.transient and "cannot be opened again" in skip.reason


def test_tile_count_is_limited_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_slide(tmp_path / "s.tif", size=(768, 512), mpp=0.5)
    plan = open_slide_source(path, 32, 1.0).plan
    assert len(plan.tiles) > 10
    monkeypatch.setattr(slides, "MAX_TILES", 10, raising=False)
    with pytest.raises(SlideError, match=rf"{len(plan.tiles)} tissue tiles .* more than the limit of 10"):
        open_slide_source(path, 32, 1.0)
    monkeypatch.setattr(slides, "MAX_TILES", 10_000, raising=False)
    monkeypatch.setattr(slides, "MAX_GRID_CELLS", 50, raising=False)
    with pytest.raises(SlideError, match=r"grid of .* more than the limit of 50"):
        open_slide_source(path, 32, 1.0)


def test_vectorised_plan_keeps_the_tiles_of_the_cell_by_cell_rule(tmp_path: Path) -> None:
    """The plan's tissue shares are those of the per-cell mean over the thumbnail (the rule before)."""
    import math

    path = make_slide(tmp_path / "s.tif", size=(700, 450), mpp=0.5)
    with Slide(path) as slide:
        thumb = slide.thumbnail()
        plan = slide.plan_tiles(32, 1.0, min_tissue=0.25, thumbnail=thumb)
        mask, _ = slides.tissue_mask(thumb)
        width, height = slide.dimensions
    fp = plan.footprint
    sx, sy = mask.shape[1] / width, mask.shape[0] / height
    expected = []
    for r in range(math.ceil(height / fp)):
        for c in range(math.ceil(width / fp)):
            x, y = c * fp, r * fp
            tw, th = min(fp, width - x), min(fp, height - y)
            x0, y0 = int(x * sx), int(y * sy)
            x1, y1 = max(x0 + 1, math.ceil((x + tw) * sx)), max(y0 + 1, math.ceil((y + th) * sy))
            covered = float(mask[y0:y1, x0:x1].mean()) * (tw * th) / (fp * fp)
            if covered >= 0.25 and covered > 0:
                expected.append((c, r, covered))
    assert [(t.col, t.row, t.tissue) for t in plan.tiles] == expected


def test_slide_without_a_small_level_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tifffile

    img = np.full((1024, 1024, 3), 240, np.uint8)
    img[200:800, 200:800] = (170, 80, 160)
    tifffile.imwrite(tmp_path / "flat.tif", img, tile=(128, 128), photometric="rgb")  # one level only
    monkeypatch.setattr(slides, "MAX_OVERVIEW_PIXELS", 512 * 512, raising=False)
    with Slide(tmp_path / "flat.tif") as slide, pytest.raises(SlideError) as info:
        slide.thumbnail()
    message = str(info.value)
    assert "no reduced level small enough" in message and "1024 x 1024" in message

    # An overview OpenSlide cannot make (it raised MemoryError, whose message is empty): the
    # reason still says something.
    monkeypatch.setattr(slides, "MAX_OVERVIEW_PIXELS", 1 << 40, raising=False)
    with Slide(tmp_path / "flat.tif") as slide:

        def no_memory(size: tuple[int, int]) -> None:
            raise MemoryError

        monkeypatch.setattr(slide._slide, "get_thumbnail", no_memory)
        with pytest.raises(SlideError, match=r"cannot read the slide overview \(MemoryError\)"):
            slide.thumbnail()
