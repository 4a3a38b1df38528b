"""A slide stored in one huge tile (issue 42, item 3).

OpenSlide decodes a stored tile whole, into a buffer it allocates first. A 4 kB tiled TIFF whose
level 0 declares 65 536 x 65 536 pixels in a single tile made ``f2tta run`` and the app die with
SIGABRT ("failed to allocate 17179869184 bytes") on the first tile, with no message naming the
slide and an empty CSV left behind. The tile a read decodes is now bounded before any read.

The file is written byte by byte here (tifffile would have to write the 17 GB tile): a classic TIFF
whose first directory is the huge level (its one tile 64 bytes of deflate) and whose second is a
1 024-pixel reduced level in real tiles, from which the overview and the tissue are read.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import openslide
import pytest
from support import TINY_CARD

from app.core.messages import RegionRequest, SourceRequest
from app.worker.io import read_region
from app.worker.opening import open_source
from engine import open_slide_source
from engine.cli import main as f2tta
from engine.io.slides import MAX_TILE_PIXELS, Slide, SlideError

ROOT = Path(__file__).resolve().parents[1]
HUGE = 65_536  # level 0's side and its one tile's side
SMALL = 1_024  # the reduced level's side (downsample 64)
SMALL_TILE = 256

_RGB = (2, 3, 8, 8, 8)  # photometric RGB, 3 samples of 8 bits


def huge_tile_tiff(path: Path) -> Path:
    """A two-level tiled TIFF: level 0 one tile of :data:`HUGE` pixels a side, level 1 a pink corner."""
    img = np.full((SMALL, SMALL, 3), 242, np.uint8)
    img[:16, :16] = (170, 80, 160)  # 1 024 level-0 pixels of tissue: a plan of a few tiles
    small = [
        zlib.compress(img[y : y + SMALL_TILE, x : x + SMALL_TILE].tobytes())
        for y in range(0, SMALL, SMALL_TILE)
        for x in range(0, SMALL, SMALL_TILE)
    ]
    data = bytearray(b"II*\x00\x00\x00\x00\x00")

    def put(block: bytes) -> int:
        at = len(data)
        data.extend(block + b"\x00" * (len(block) % 2))
        return at

    huge_at = put(zlib.compress(b"\x00" * 64))
    small_at = [put(tile) for tile in small]
    bits_at = put(struct.pack("<3H", *_RGB[2:]))
    offsets_at = put(struct.pack(f"<{len(small)}I", *small_at))
    counts_at = put(struct.pack(f"<{len(small)}I", *map(len, small)))

    def directory(side: int, tile: int, subfile: int, tiles: tuple[int, int, int], following: int) -> bytes:
        count, offsets, counts = tiles
        entries = [
            (254, 4, 1, subfile),
            (256, 4, 1, side),
            (257, 4, 1, side),
            (258, 3, 3, bits_at),
            (259, 3, 1, 8),  # deflate
            (262, 3, 1, _RGB[0]),
            (277, 3, 1, _RGB[1]),
            (284, 3, 1, 1),
            (322, 4, 1, tile),
            (323, 4, 1, tile),
            (324, 4, count, offsets),
            (325, 4, count, counts),
        ]
        out = struct.pack("<H", len(entries))
        for tag, kind, n, value in entries:
            packed = struct.pack("<HH", value, 0) if kind == 3 and n == 1 else struct.pack("<I", value)
            out += struct.pack("<HHI", tag, kind, n) + packed
        return out + struct.pack("<I", following)

    first = len(data)
    second = first + 2 + 12 * 12 + 4
    data.extend(directory(HUGE, HUGE, 0, (1, huge_at, 64), second))
    data.extend(directory(SMALL, SMALL_TILE, 1, (len(small), offsets_at, counts_at), 0))
    data[4:8] = struct.pack("<I", first)
    path.write_bytes(bytes(data))
    return path


def test_the_file_is_what_the_attack_used(tmp_path: Path) -> None:
    """The control: OpenSlide opens it, reports the huge tile, and the overview level is small."""
    with openslide.OpenSlide(str(huge_tile_tiff(tmp_path / "huge.tif"))) as raw:
        assert raw.level_dimensions == ((HUGE, HUGE), (SMALL, SMALL))
        assert raw.properties["openslide.level[0].tile-width"] == str(HUGE)
    assert HUGE * HUGE > MAX_TILE_PIXELS


def test_a_slide_stored_in_one_huge_tile_is_refused_when_it_is_opened(tmp_path: Path) -> None:
    path = huge_tile_tiff(tmp_path / "huge.tif")
    with pytest.raises(SlideError) as caught:
        open_slide_source(path, 32, None)
    message = str(caught.value)
    assert str(path) in message and "65536 x 65536" in message and "smaller tiles" in message
    assert not caught.value.transient


def _limited() -> None:
    """Run the child under 8 GiB of address space, so the code before the fix aborted at once
    instead of reaching for 17 GB of this machine's memory."""
    limit = 8 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_f2tta_run_ends_with_a_message_and_leaves_nothing(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = huge_tile_tiff(tmp_path / "huge.tif")
    args = ["run", "--model", str(tiny_model_path), "--input", str(path), "--state", str(tmp_path / "state")]
    args += ["--out", str(tmp_path / "out.csv"), "--method", "source", "--no-progress", "--accept-warnings"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # In a process of its own: the code before the fix aborted the process that read the tile.
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert str(path) in done.stderr and "65536 x 65536" in done.stderr
    assert "Traceback" not in done.stderr and "failed to allocate" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.tif"], "no CSV, no state"
    assert f2tta(args) == 2, "the rerun is refused the same way: nothing was left that changes it"
    assert "65536 x 65536" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.tif"]


def test_the_apps_reader_never_decodes_the_huge_tile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's worker opens a slide through ``open_source`` and shows parts of it through
    ``read_region``: the first refuses the slide, the second returns nothing, and OpenSlide is never
    asked for a region of the huge level (which aborted the process)."""
    path = huge_tile_tiff(tmp_path / "huge.tif")
    with pytest.raises(SlideError, match="65536 x 65536"):
        open_source(SourceRequest(path, "slide"), TINY_CARD)

    levels: list[int] = []
    real = openslide.OpenSlide.read_region

    def spy(
        self: openslide.OpenSlide, location: tuple[int, int], level: int, size: tuple[int, int]
    ) -> object:
        levels.append(level)
        if level == 0:
            raise AssertionError("OpenSlide was asked to decode the 65 536-pixel tile")
        return real(self, location, level, size)

    monkeypatch.setattr(openslide.OpenSlide, "read_region", spy)
    with Slide(path) as slide:
        assert read_region(slide, RegionRequest(1, 0, 0, 512, 512, 512)) is None  # a level-0 area
        overview = read_region(slide, RegionRequest(2, 0, 0, HUGE, HUGE, 512))  # the reduced level
    assert levels == [1], levels
    assert overview is not None and overview.rgb.shape[:2] == (512, 512)
