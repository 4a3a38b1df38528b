"""read_image against hostile files (issue 13, items 1, 2 and 6): an allow-list, bounded, every failure a skip."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hostile_files import (
    encoded,
    exotic,
    huge_16bit_png,
    multipage_tiff,
    oriented_jpeg,
    postscript,
    rgb_image,
    tiff_undefined_strip_offsets,
    within,
)
from PIL import EpsImagePlugin, Image, PngImagePlugin

import engine.io.images
import engine.util.files
from engine import ImageReadError, read_image

HOUR_AGO = time.time() - 3600


def _write(path: Path, data: bytes, old: bool = True) -> Path:
    path.write_bytes(data)
    if old:  # an old file: a failure to decode it is permanent, not "still being copied"
        os.utime(path, (HOUR_AGO, HOUR_AGO))
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dev_zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _bytes(data: Callable[[], bytes]) -> Callable[[Path], Path]:
    return lambda path: _write(path, data())


def _rle_bmp_wide() -> bytes:
    """An RLE8 BMP 3 000 000 x 24 pixels, 1.1 kB: Pillow's Python decoder needs seconds for it."""
    rows = b"\x01\x05\x00\x00" * 24 + b"\x00\x01"  # per row: one pixel, then end of line
    info = struct.pack("<IiiHHIIiiII", 40, 3_000_000, 24, 1, 8, 1, len(rows), 2835, 2835, 256, 0)
    palette = bytes(1024)
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + palette + rows


# Each case was a crash, a hang, a silent decode of an exotic format or a wrong reason before.
HOSTILE = [
    pytest.param(
        _bytes(tiff_undefined_strip_offsets),
        r"not a readable TIFF image \(TypeError",
        id="tiff-undefined-strip-offsets",
    ),
    pytest.param(_bytes(lambda: exotic("IM")), r"ImageMagick IM files are not read", id="im-named-png"),
    pytest.param(
        _bytes(lambda: exotic("SPIDER")), r"not an image in a supported format", id="spider-named-png"
    ),
    pytest.param(_bytes(lambda: exotic("DDS")), r"DDS files are not read", id="dds-named-png"),
    pytest.param(_bytes(lambda: exotic("BLP")), r"BLP files are not read", id="blp-named-png"),
    pytest.param(_bytes(postscript), r"PostScript/EPS is never opened", id="postscript-named-png"),
    pytest.param(
        _bytes(lambda: b"\xc5\xd0\xd3\xc6" + bytes(28) + postscript()),
        r"PostScript/EPS",
        id="eps-binary-named-png",
    ),
    pytest.param(
        _bytes(_rle_bmp_wide), r"RLE-compressed BMP .* exceeds the limit", id="rle-bmp-slow-decoder"
    ),
    pytest.param(_fifo, r"not a regular file: it is a named pipe \(FIFO\)", id="fifo-named-png"),
    pytest.param(_dev_zero, r"not a regular file: it is a character device", id="dev-zero-named-png"),
    pytest.param(_folder, r"not a regular file: it is a folder", id="folder-named-png"),
]


@pytest.mark.filterwarnings("ignore:IM image format is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("make", "reason"), HOSTILE)
def test_hostile_file_is_a_permanent_skip_with_its_reason(
    tmp_path: Path, make: Callable[[Path], Path], reason: str
) -> None:
    path = make(tmp_path / "image.png")
    start = time.perf_counter()
    with pytest.raises(ImageReadError) as info:
        within(10, lambda: read_image(path))
    assert time.perf_counter() - start < 2.0
    assert str(info.value).startswith(f"{path}: ")
    assert info.value.reason == str(info.value)[len(f"{path}: ") :]
    assert not info.value.transient  # the same content fails the same way on every run
    assert re.search(reason, info.value.reason), info.value.reason


def test_postscript_never_reaches_ghostscript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def ghostscript(*args: object, **kwargs: object) -> None:
        calls.append(args)
        raise OSError("Ghostscript must not run")

    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", ghostscript)
    monkeypatch.setattr(subprocess, "check_call", ghostscript)
    path = _write(tmp_path / "scan.png", postscript())
    with pytest.raises(ImageReadError, match="PostScript"):
        read_image(path)
    from engine.io.images import probe_image

    with pytest.raises(ImageReadError, match="PostScript"):
        probe_image(path)
    assert calls == []


@pytest.mark.parametrize(
    "error",
    [
        TypeError("t"),
        AttributeError("a"),
        NotImplementedError("n"),
        struct.error("s"),
        KeyError("k"),
        IndexError("i"),
        ZeroDivisionError("z"),
        RecursionError("r"),
        EOFError("e"),
        RuntimeError("x"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_decoder_exception_becomes_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def broken_load(self: object) -> None:
        raise error

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", broken_load)
    path = _write(tmp_path / "x.png", encoded(rgb_image(), "PNG"))
    with pytest.raises(ImageReadError, match=f"not a readable PNG image \\({type(error).__name__}") as info:
        read_image(path)
    assert not info.value.transient


def test_memory_error_is_transient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(self: object) -> None:
        raise MemoryError

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", no_memory)
    with pytest.raises(ImageReadError, match="not enough memory") as info:
        read_image(_write(tmp_path / "x.png", encoded(rgb_image(), "PNG")))
    assert info.value.transient


@pytest.mark.parametrize(
    ("orientation", "size", "black"),
    [(1, (40, 20), "left"), (3, (40, 20), "right"), (6, (20, 40), "top"), (8, (20, 40), "bottom")],
)
def test_exif_orientation_is_applied(
    tmp_path: Path, orientation: int, size: tuple[int, int], black: str
) -> None:
    img = read_image(_write(tmp_path / "o.jpg", oriented_jpeg(orientation)))
    assert img.size == size
    arr = np.asarray(img.convert("L"), dtype=np.float64)
    h, w = arr.shape
    halves = {
        "left": (arr[:, : w // 2], arr[:, w // 2 :]),
        "right": (arr[:, w // 2 :], arr[:, : w // 2]),
        "top": (arr[: h // 2], arr[h // 2 :]),
        "bottom": (arr[h // 2 :], arr[: h // 2]),
    }
    dark, light = halves[black]
    assert dark.mean() < 30 and light.mean() > 225


def test_unreadable_exif_keeps_the_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_exif(self: object) -> None:
        raise SyntaxError("bad EXIF")

    monkeypatch.setattr(Image.Image, "getexif", broken_exif)
    img = read_image(_write(tmp_path / "bad_exif.jpg", oriented_jpeg(6)))
    assert img.size == (40, 20)  # as stored: the orientation is unknown
    assert "EXIF data unreadable (SyntaxError: bad EXIF); orientation not applied" in caplog.text


def test_multipage_tiff_gives_its_first_page_or_a_reduced_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = multipage_tiff([(16, 16), (16, 16)], [(255, 0, 0), (0, 0, 255)])
    assert read_image(_write(tmp_path / "stack.tif", stack)).getpixel((3, 3)) == (255, 0, 0)  # first page
    monkeypatch.setattr(engine.io.images, "MAX_IMAGE_PIXELS", 2000)
    pyramid = multipage_tiff(
        [(64, 64), (10, 40), (32, 32), (8, 8)], [(255, 0, 0), (0, 0, 255), (0, 255, 0), (9, 9, 9)]
    )
    img = read_image(_write(tmp_path / "pyramid.tif", pyramid))
    assert img.size == (32, 32) and img.getpixel((5, 5)) == (0, 255, 0)
    lone = multipage_tiff([(64, 64), (10, 40)], [(255, 0, 0), (0, 0, 255)])
    with pytest.raises(ImageReadError, match="64x64 pixels exceeds the limit of 2000"):
        read_image(_write(tmp_path / "lone.tif", lone))


@pytest.mark.parametrize("mode", ["RGB", "P", "I;16", "1", "F", "RGBA"])
def test_large_images_are_reduced_while_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr(engine.io.images, "WORKING_SIDE", 64)
    rng = np.random.default_rng(1)
    base = Image.fromarray(rng.integers(0, 256, (200, 300, 3), dtype=np.uint8))
    if mode == "I;16":
        img = Image.fromarray(rng.integers(0, 65535, (200, 300), dtype=np.uint16))
    elif mode == "F":
        img = Image.fromarray(rng.random((200, 300), dtype=np.float32))
    else:
        img = base.convert(mode)
    fmt = "TIFF" if mode == "F" else "PNG"
    got = read_image(_write(tmp_path / f"big.{fmt.lower()}", encoded(img, fmt)))
    assert got.size == (60, 40)  # factor ceil(300 / 64) = 5
    # Strip-wise reduction (palette, 1-bit and 16-bit images) equals reducing the whole image at once.
    widened = (
        img.convert("RGBA" if mode == "P" else "L" if mode == "1" else "I")
        if mode in ("P", "1", "I;16")
        else img
    )
    assert np.array_equal(np.asarray(got), np.asarray(engine.io.images.to_rgb(widened.reduce(5))))


def test_large_jpeg_is_decoded_at_a_reduced_scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.io.images, "WORKING_SIDE", 100)
    img = Image.fromarray(np.random.default_rng(2).integers(0, 256, (400, 1000, 3), dtype=np.uint8))
    got = read_image(_write(tmp_path / "wide.jpg", encoded(img, "JPEG")))
    assert got.size == (63, 25)  # DCT scaling 1/8 (125 x 50), then a factor of 2


def test_jpeg_with_too_many_scans_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.io.images, "MAX_JPEG_SCANS", 3)
    with pytest.raises(ImageReadError, match="more than 3 scans"):
        read_image(_write(tmp_path / "p.jpg", encoded(rgb_image(), "JPEG", progressive=True)))


def test_transient_and_permanent_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = encoded(rgb_image(), "PNG")
    cases: dict[str, tuple[Path, str]] = {
        "empty": (_write(tmp_path / "empty.png", b"", old=False), "file is empty"),
        "vanished": (tmp_path / "gone.png", "file not found"),
        "fresh truncated": (
            _write(tmp_path / "fresh.png", good[:200], old=False),
            "may still be being written",
        ),
    }
    for name, (path, reason) in cases.items():
        with pytest.raises(ImageReadError, match=reason) as info:
            read_image(path)
        assert info.value.transient, name
    with pytest.raises(ImageReadError) as info:
        read_image(_write(tmp_path / "old.png", good[:200]))
    assert not info.value.transient and "may still" not in info.value.reason

    growing = _write(tmp_path / "growing.png", good[:200])
    original_load = PngImagePlugin.PngImageFile.load

    def load_while_copying(self: PngImagePlugin.PngImageFile) -> object:
        with growing.open("ab") as fh:  # the copy goes on, but is not finished yet
            fh.write(good[200:300])
        return original_load(self)

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", load_while_copying)
    with pytest.raises(ImageReadError, match="changed while it was read") as info:
        read_image(growing)
    assert info.value.transient
    monkeypatch.undo()

    def denied(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(engine.util.files.os, "open", denied)
    with pytest.raises(ImageReadError, match="permission denied") as info:
        read_image(_write(tmp_path / "locked.png", good))
    assert info.value.transient


@pytest.fixture(scope="module")
def big16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 9 400² 16-bit grey PNG of issue 13 (here 173 kB of stripes)."""
    return _write(tmp_path_factory.mktemp("big") / "big16.png", huge_16bit_png(9400))


def test_16bit_9400px_png_converts_without_full_size_copies(big16: Path) -> None:
    """The old conversion made float64 copies of all 88 Mpx (0.7 GB each); numpy allocations are traced."""
    tracemalloc.start()
    try:
        img = read_image(big16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert img.size == (3134, 3134)  # reduced by 3 while read
    assert peak < 150 * 2**20, f"traced peak {peak / 2**20:.0f} MiB"


@pytest.mark.slow
def test_16bit_9400px_png_is_read_in_bounded_memory(big16: Path) -> None:
    """Whole-process peak: 3.4 GB before (2.6 GB above the imports), ~0.2 GB above them now."""
    path = big16
    script = textwrap.dedent(
        f"""
        import resource, time
        from engine.io.images import read_image
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        img = read_image({str(path)!r})
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(img.size[0], img.size[1], (peak - before) // 1024, round(seconds, 2))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    ).stdout.split()
    width, height, growth_mib, seconds = int(out[0]), int(out[1]), int(out[2]), float(out[3])
    assert (width, height) == (3134, 3134)  # reduced by 3 while read
    assert growth_mib < 600, f"peak grew by {growth_mib} MiB"
    assert seconds < 10
