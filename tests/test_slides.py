"""engine.io.slides: OpenSlide wrapper, tissue detection, tile planning at the model's resolution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from app_fixtures import make_slide
from hostile_files import within
from PIL import Image

from engine.errors import F2TTAError
from engine.io.slides import Slide, SlideError, otsu_threshold, tissue_mask


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_slide(tmp_path_factory.mktemp("slide") / "s.tif", size=(768, 512), mpp=0.5)


def test_generic_tiff_is_read_with_mpp(slide_path: Path) -> None:
    with Slide(slide_path) as slide:
        assert slide.format == "generic-tiff"
        assert slide.dimensions == (768, 512) and slide.level_count == 3
        assert slide.mpp == pytest.approx(0.5)
        thumb = slide.thumbnail(256)
        assert thumb.dtype == np.uint8 and max(thumb.shape[:2]) == 256


def test_tiles_match_the_training_resolution(slide_path: Path) -> None:
    with Slide(slide_path) as slide:
        plan = slide.plan_tiles(32, target_mpp=1.0)
        assert plan.matched and plan.warning is None
        assert plan.level == 1 and plan.downsample == pytest.approx(2.0) and plan.footprint == 64
        assert plan.effective_mpp == pytest.approx(1.0)
        keys = [(t.row, t.col) for t in plan.tiles]
        assert keys == sorted(keys), "tiles come in reading order"
        assert all(t.x % 64 == 0 and t.y % 64 == 0 for t in plan.tiles)
        assert 0 < len(plan.tiles) < plan.grid[0] * plan.grid[1], "glass tiles are left out"
        tile = slide.read_tile(plan, plan.tiles[0])
        assert tile.shape == (32, 32, 3) and tile.dtype == np.uint8
        # Between two levels: read the finer level and resample.
        odd = slide.plan_tiles(32, target_mpp=1.5)
        assert odd.matched and odd.level == 1 and odd.footprint == 96
        assert slide.read_tile(odd, odd.tiles[0]).shape == (32, 32, 3)


@pytest.mark.parametrize(
    ("target", "expected"),
    [(None, "does not record"), (0.2, "coarser than the model")],
)
def test_unmatched_resolution_warns(slide_path: Path, target: float | None, expected: str) -> None:
    with Slide(slide_path) as slide:
        plan = slide.plan_tiles(32, target_mpp=target)
        assert not plan.matched and expected in (plan.warning or "")
        assert plan.level == 0 and plan.footprint == 32


def test_slide_without_mpp_warns(tmp_path: Path) -> None:
    import tifffile

    img = np.full((256, 256, 3), 240, np.uint8)
    img[64:192, 64:192] = (160, 60, 150)
    tifffile.imwrite(tmp_path / "nompp.tif", img, tile=(128, 128), photometric="rgb")
    with Slide(tmp_path / "nompp.tif") as slide:
        assert slide.mpp is None
        plan = slide.plan_tiles(32, target_mpp=0.5)
        assert not plan.matched and "does not report microns-per-pixel" in (plan.warning or "")


def test_unsupported_files_raise_a_clear_error(tmp_path: Path) -> None:
    Image.new("RGB", (64, 64), "white").save(tmp_path / "plain.png")
    with pytest.raises(SlideError, match="not a slide format") as info:
        Slide(tmp_path / "plain.png")
    assert isinstance(info.value, F2TTAError)
    with pytest.raises(SlideError, match="not found"):
        Slide(tmp_path / "missing.svs")


def test_tissue_detection() -> None:
    img = np.full((100, 100, 3), 245, np.uint8)
    img[20:60, 30:80] = (170, 80, 160)
    mask, threshold = tissue_mask(img)
    assert mask[40, 50] and not mask[5, 5] and mask.sum() == 40 * 50
    assert threshold >= 20
    assert otsu_threshold(np.array([10] * 50 + [200] * 50, dtype=np.uint8)) in range(10, 200)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_non_regular_slide_is_refused_with_the_right_reason(tmp_path: Path, kind: str) -> None:
    import os

    path = tmp_path / "slide.svs"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    expected = r"it is a named pipe \(FIFO\)" if kind == "fifo" else "it is a folder"
    with pytest.raises(SlideError, match=rf"not a regular file: {expected}"):  # "not found" before
        within(10, lambda: Slide(path))


def test_a_tiles_name_counts_rows_and_columns_from_one() -> None:
    """The table's "#" starts at 1; a tile's grid position in its name does too (the key stays
    the level-0 pixel position, so journals written before still match)."""
    from engine.io.tile_plan import Tile

    tile = Tile(index=0, col=0, row=2, x=0, y=512, width=256, height=256, tissue=1.0)
    assert tile.label == "tile r3 c1 (0, 512)" and tile.key == "0,512"


def test_an_opaque_region_is_converted_as_the_composite_on_white_gives_it() -> None:
    from engine.io.slides import _flatten_rgba

    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, (24, 24, 4), dtype=np.uint8)
    opaque = rgba.copy()
    opaque[..., 3] = 255
    region = Image.fromarray(opaque, "RGBA")
    white = Image.new("RGBA", region.size, (255, 255, 255, 255))
    composite = np.asarray(Image.alpha_composite(white, region).convert("RGB"))
    assert np.array_equal(np.asarray(_flatten_rgba(region)), composite)
    partly = Image.fromarray(rgba, "RGBA")  # transparent pixels (outside the scan) go white
    expected = np.asarray(Image.alpha_composite(white, partly).convert("RGB"))
    assert np.array_equal(np.asarray(_flatten_rgba(partly)), expected)
