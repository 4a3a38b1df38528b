"""Hostile and broken image files: each is processed correctly or reported by path and skipped."""

from __future__ import annotations

import csv
import io
import os
import stat
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from hostile_files import exotic, oriented_jpeg, postscript, tiff_undefined_strip_offsets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from engine import ImageReadError, Session, list_images, read_image
from engine.cli import main as cli_main
from engine.io.images import MAX_IMAGE_PIXELS


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header announcing a huge image, with almost no pixel data behind it."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + _png_chunk(b"IEND", b"")
    )


def _encoded(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def hostile_folder(root: Path) -> tuple[dict[str, bool], int]:
    """Writes the hostile collection; returns {name: should_be_processed} and the count of good files."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (48, 40, 3), dtype=np.uint8))
    expect: dict[str, bool] = {}

    def put(name: str, data: bytes, ok: bool) -> None:
        (root / name).write_bytes(data)
        expect[name] = ok

    put("a_good.png", _encoded(rgb, "PNG"), True)
    put("trunc.png", _encoded(rgb, "PNG")[:300], False)
    put("trunc.jpg", _encoded(rgb, "JPEG")[:400], False)
    put("trunc.tif", _encoded(rgb, "TIFF")[:500], False)
    put("zero.png", b"", False)
    put("text.jpg", b"this is not an image at all\n" * 10, False)
    put("html.tiff", b"<html><body>oops</body></html>", False)
    put("one_pixel.png", _encoded(Image.new("RGB", (1, 1), (200, 10, 10)), "PNG"), True)
    put("bomb.png", bomb_png(30_000, 30_000), False)
    put(
        "gray16.png",
        _encoded(Image.fromarray(rng.integers(0, 65535, (30, 30), dtype=np.uint16)), "PNG"),
        True,
    )
    put("gray.png", _encoded(rgb.convert("L"), "PNG"), True)
    put("palette.png", _encoded(rgb.convert("P"), "PNG"), True)
    put("palette_transparent.png", _encoded(rgb.convert("P"), "PNG", transparency=0), True)
    put("cmyk.jpg", _encoded(rgb.convert("CMYK"), "JPEG"), True)
    put("cmyk.tif", _encoded(rgb.convert("CMYK"), "TIFF"), True)
    put("rgba.png", _encoded(rgb.convert("RGBA"), "PNG"), True)
    put("la.png", _encoded(rgb.convert("LA"), "PNG"), True)
    put("float.tif", _encoded(Image.fromarray(rng.random((20, 20), dtype=np.float32)), "TIFF"), True)
    put("bitmap.bmp", _encoded(rgb, "BMP"), True)
    # Issue 13: poison pills that crashed every run, formats that must never be decoded, a FIFO,
    # and the GIF and EXIF-rotated files that were ignored or read sideways.
    put("strip_offsets_undefined.tif", tiff_undefined_strip_offsets(), False)
    put("postscript.png", postscript(), False)
    put("imagemagick.png", exotic("IM"), False)
    put("dds.png", exotic("DDS"), False)
    put("animated.gif", _encoded(rgb, "GIF", save_all=True, append_images=[rgb.rotate(90)]), True)
    put("rotated.jpg", oriented_jpeg(6), True)
    os.mkfifo(root / "pipe.png")
    expect["pipe.png"] = False
    put("x" * 200 + ".png", _encoded(rgb, "PNG"), True)
    # A file name that is not valid UTF-8 (allowed on Linux file systems).
    raw = os.fsencode(root) + b"/caf\xe9_latin1.png"
    with open(raw, "wb") as fh:
        fh.write(_encoded(rgb, "PNG"))
    expect[os.fsdecode(b"caf\xe9_latin1.png")] = True
    # A symlink loop: sub/loop -> .. ; the walker must not recurse forever or list files twice.
    (root / "sub").mkdir()
    (root / "sub" / "inner.png").write_bytes(_encoded(rgb, "PNG"))
    expect["sub/inner.png"] = True
    os.symlink("..", root / "sub" / "loop")
    # Old files: a failure to decode them is permanent, not "may still be being copied".
    for dirpath, _, filenames in os.walk(os.fsencode(root)):
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not stat.S_ISFIFO(os.lstat(full).st_mode):
                os.utime(full, (time.time() - 3600, time.time() - 3600))
    good = sum(expect.values())
    return expect, good


@pytest.mark.filterwarnings("ignore:IM image format is deprecated:DeprecationWarning")
def test_read_image_processes_or_refuses_each_hostile_file(tmp_path: Path) -> None:
    expect, _ = hostile_folder(tmp_path)
    for name, ok in expect.items():
        path = tmp_path / name
        if ok:
            img = read_image(path)
            assert img.mode == "RGB" and img.size[0] >= 1, name
        else:
            with pytest.raises(ImageReadError) as info:
                read_image(path)
            assert str(path) in str(info.value), name


def test_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png(30_000, 30_000))
    assert 30_000 * 30_000 > MAX_IMAGE_PIXELS
    with pytest.raises(ImageReadError, match=r"exceeds the limit|decompression bomb"):
        read_image(path)


@pytest.mark.filterwarnings("ignore:IM image format is deprecated:DeprecationWarning")
def test_listing_survives_symlink_loops_and_odd_names(tmp_path: Path) -> None:
    expect, _ = hostile_folder(tmp_path)
    listed = [p.relative_to(tmp_path).as_posix() for p in list_images(tmp_path)]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(expect)  # every image once, no file reached through the loop twice


@pytest.mark.filterwarnings("ignore:IM image format is deprecated:DeprecationWarning")
def test_run_over_hostile_folder_reports_and_continues(tiny_model_path: Path, tmp_path: Path) -> None:
    expect, good = hostile_folder(tmp_path / "in")
    out = tmp_path / "preds.csv"
    run = ["run", "--model", str(tiny_model_path), "--input", str(tmp_path / "in")]
    run += ["--state", str(tmp_path / "st"), "--out", str(out), "--no-progress"]
    code = cli_main(run)
    assert code == 0
    with out.open(newline="", encoding="utf-8", errors="surrogateescape") as fh:
        processed = {r["item"] for r in csv.DictReader(fh)}
    with (tmp_path / "preds.skipped.csv").open(newline="", encoding="utf-8", errors="surrogateescape") as fh:
        skipped = {r["item"]: r["reason"] for r in csv.DictReader(fh)}
    assert processed == {n for n, ok in expect.items() if ok}
    assert set(skipped) == {n for n, ok in expect.items() if not ok}
    assert len(processed) == good
    assert all(reason for reason in skipped.values())
    # Resuming finds nothing left to do and keeps the non-UTF-8 name intact.
    assert cli_main(run) == 0
    with out.open(newline="", encoding="utf-8", errors="surrogateescape") as fh:
        assert len(list(csv.DictReader(fh))) == good


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=0, max_size=2048), suffix=st.sampled_from([".png", ".jpg", ".tif", ".bmp"]))
def test_random_bytes_never_crash_the_reader(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    try:
        img = read_image(path)
    except ImageReadError as exc:
        assert str(path) in str(exc)
    else:
        assert img.mode == "RGB"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    h=st.integers(1, 64),
    w=st.integers(1, 64),
    channels=st.sampled_from([None, 1, 3, 4]),
    dtype=st.sampled_from([np.uint8, np.uint16, np.float32]),
    seed=st.integers(0, 2**16),
)
def test_random_arrays_are_preprocessed_or_refused(
    session: Session, h: int, w: int, channels: int | None, dtype: type, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    shape = (h, w) if channels is None else (h, w, channels)
    arr = (rng.random(shape) * 255).astype(dtype)
    try:
        x = session.preprocess(arr)
    except ValueError as exc:
        assert "expected" in str(exc)
        assert dtype is not np.uint8 or channels == 1
    else:
        assert x.shape == (1, 3, session.card.img_size, session.card.img_size)
        assert bool(x.isfinite().all())


@pytest.fixture(scope="module")
def session(tiny_model_path: Path) -> Session:
    return Session(tiny_model_path, method="source")
