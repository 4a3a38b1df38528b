"""Hostile and unusual image files, built in memory: the cases of issue 13 and fuzz seeds."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable

import numpy as np
from PIL import Image

RNG_IMAGE = np.random.default_rng(0).integers(0, 256, (24, 20, 3), dtype=np.uint8)


def encoded(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def rgb_image() -> Image.Image:
    return Image.fromarray(RNG_IMAGE)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def tiff_undefined_strip_offsets() -> bytes:
    """A 20x24 grey TIFF whose StripOffsets tag has type UNDEFINED (7): Pillow raises TypeError."""
    pixels = b"\x80" * (20 * 24)
    entries = [
        (256, 3, 1, 20),  # ImageWidth
        (257, 3, 1, 24),  # ImageLength
        (258, 3, 1, 8),  # BitsPerSample
        (259, 3, 1, 1),  # Compression: none
        (262, 3, 1, 1),  # Photometric: black is zero
        (273, 7, 4, 8),  # StripOffsets, type UNDEFINED
        (277, 3, 1, 1),  # SamplesPerPixel
        (278, 3, 1, 24),  # RowsPerStrip
        (279, 4, 1, len(pixels)),  # StripByteCounts
    ]
    ifd = struct.pack("<H", len(entries)) + b"".join(struct.pack("<HHII", *e) for e in entries) + b"\0" * 4
    return b"II*\x00" + struct.pack("<I", 8 + len(pixels)) + pixels + ifd


def postscript() -> bytes:
    """PostScript whose body never ends when Ghostscript runs it."""
    return b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 20 24\n{} loop\nshowpage\n%%EOF\n"


def exotic(fmt: str) -> bytes:
    """A valid file of one of Pillow's rarely used formats."""
    img = rgb_image()
    if fmt == "SPIDER":
        img = img.convert("F")
    elif fmt == "BLP":
        img = img.convert("P")
    return encoded(img, fmt)


def oriented_jpeg(orientation: int) -> bytes:
    """A 40x20 JPEG, left half black and right half white, with an EXIF orientation tag."""
    arr = np.zeros((20, 40, 3), np.uint8)
    arr[:, 20:] = 255
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encoded(Image.fromarray(arr), "JPEG", exif=exif.tobytes(), quality=95)


def huge_16bit_png(side: int) -> bytes:
    """A side x side 16-bit grey PNG of a few stripes, compressed row by row (small in memory)."""
    row_zero = b"\x00" + b"\x00\x00" * side  # filter byte + samples
    row_line = b"\x00" + b"\x9c\x40" * side  # 40000
    comp = zlib.compressobj(9)
    parts = [comp.compress(row_line if y % 97 == 0 else row_zero) for y in range(side)]
    data = b"".join(parts) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 16, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", data) + png_chunk(b"IEND", b"")
    )


def multipage_tiff(sizes: list[tuple[int, int]], colours: list[tuple[int, int, int]]) -> bytes:
    pages = [Image.new("RGB", s, c) for s, c in zip(sizes, colours, strict=True)]
    return encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])


def _seeds() -> dict[str, Callable[[], bytes]]:
    img = rgb_image()
    rgba = img.convert("RGBA")
    return {
        "png_rgb": lambda: encoded(img, "PNG"),
        "png_palette": lambda: encoded(img.convert("P"), "PNG", transparency=0),
        "png_16bit": lambda: encoded(Image.fromarray(RNG_IMAGE[..., 0].astype(np.uint16) * 257), "PNG"),
        "png_interlaced_rgba": lambda: encoded(rgba, "PNG", interlace=1),
        "jpeg_baseline": lambda: encoded(img, "JPEG", quality=80),
        "jpeg_progressive": lambda: encoded(img, "JPEG", progressive=True),
        "jpeg_cmyk_exif": lambda: encoded(img.convert("CMYK"), "JPEG", exif=_exif(6)),
        "tiff_raw": lambda: encoded(img, "TIFF"),
        "tiff_lzw": lambda: encoded(img, "TIFF", compression="tiff_lzw"),
        "tiff_deflate_16bit": lambda: encoded(
            Image.fromarray(RNG_IMAGE[..., 0].astype(np.uint16) * 257),
            "TIFF",
            compression="tiff_adobe_deflate",
        ),
        "tiff_jpeg": lambda: encoded(img, "TIFF", compression="jpeg"),
        "tiff_packbits_multipage": lambda: encoded(
            img, "TIFF", compression="packbits", save_all=True, append_images=[img.convert("L")]
        ),
        "tiff_float": lambda: encoded(Image.fromarray(RNG_IMAGE[..., 0].astype(np.float32)), "TIFF"),
        "bigtiff": lambda: encoded(img, "TIFF", big_tiff=True),
        "bmp_rgb": lambda: encoded(img, "BMP"),
        "bmp_palette": lambda: encoded(img.convert("P"), "BMP"),
        "bmp_rle8": lambda: _bmp_rle8(),
        "gif": lambda: encoded(img.convert("P"), "GIF"),
        "gif_animated": lambda: encoded(img, "GIF", save_all=True, append_images=[img.rotate(90)]),
    }


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _bmp_rle8() -> bytes:
    """An 8-bit RLE-compressed BMP (Pillow decodes it in Python): 20x24, runs of one colour per row."""
    width, height = 20, 24
    rows = b"".join(bytes([width, y % 256, 0, 0]) for y in range(height)) + b"\x00\x01"
    palette = b"".join(bytes([i, i, i, 0]) for i in range(256))
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(rows), 2835, 2835, 256, 0)
    offset = 14 + len(info) + len(palette)
    header = b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset)
    return header + info + palette + rows


SEEDS = _seeds()

# Values that break parsers: zero, one, the top of each integer width, sign bits.
_INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


def mutate(data: bytes, rng: np.random.Generator, header: int = 256) -> bytes:
    """One seeded mutation of ``data``: a crafted header field or bytes changed near the start.

    PNG chunks get a valid CRC after the change and TIFF tags a new type, count or value, so
    the mutation reaches the parsers behind the checksums and the tag tables.
    """
    if data.startswith(b"\x89PNG") and rng.random() < 0.5:
        return _mutate_png_chunk(data, rng)
    if data[:4] in (b"II*\x00", b"MM\x00*") and rng.random() < 0.5:
        return _mutate_tiff_tag(data, rng)
    return _mutate_bytes(data, rng, header)


def _interesting(rng: np.random.Generator, width: int) -> int:
    return _INTERESTING[int(rng.integers(0, len(_INTERESTING)))] & ((1 << (8 * width)) - 1)


def _mutate_png_chunk(data: bytes, rng: np.random.Generator) -> bytes:
    chunks = []
    pos = 8
    while pos + 12 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunks.append((pos, length))
        pos += 12 + length
    start, length = (
        chunks[0] if rng.random() < 0.6 or len(chunks) == 1 else chunks[int(rng.integers(1, len(chunks)))]
    )
    body = bytearray(data[start + 4 : start + 8 + length])  # type + data
    for _ in range(int(rng.integers(1, 3))):
        at = int(rng.integers(4, max(5, len(body))))
        if at + 4 <= len(body) and rng.random() < 0.5:
            body[at : at + 4] = _interesting(rng, 4).to_bytes(4, "big")
        elif at < len(body):
            body[at] = int(rng.integers(0, 256))
    chunk = (
        struct.pack(">I", len(body) - 4)
        + bytes(body)
        + struct.pack(">I", zlib.crc32(bytes(body)) & 0xFFFFFFFF)
    )
    return data[:start] + chunk + data[start + 12 + length :]


def _mutate_tiff_tag(data: bytes, rng: np.random.Generator) -> bytes:
    order = "<" if data[:2] == b"II" else ">"
    (ifd,) = struct.unpack(order + "I", data[4:8])
    if ifd + 2 > len(data):
        return _mutate_bytes(data, rng, 256)
    (count,) = struct.unpack(order + "H", data[ifd : ifd + 2])
    if count == 0 or ifd + 2 + 12 * count > len(data):
        return _mutate_bytes(data, rng, 256)
    out = bytearray(data)
    entry = ifd + 2 + 12 * int(rng.integers(0, count))
    field = int(rng.integers(0, 3))
    if field == 0:  # the type: 1-12 are defined, 13+ are not
        out[entry + 2 : entry + 4] = struct.pack(order + "H", int(rng.integers(0, 19)))
    elif field == 1:  # the count
        out[entry + 4 : entry + 8] = struct.pack(order + "I", _interesting(rng, 4))
    else:  # the value or offset
        out[entry + 8 : entry + 12] = struct.pack(order + "I", _interesting(rng, 4))
    return bytes(out)


def _mutate_bytes(data: bytes, rng: np.random.Generator, header: int) -> bytes:
    out = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        kind = int(rng.integers(0, 6))
        pos = int(rng.integers(0, max(1, min(header, len(out) - 1))))
        if kind == 0:  # flip bits
            out[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:  # random byte
            out[pos] = int(rng.integers(0, 256))
        elif kind in (2, 3):  # an interesting 16- or 32-bit value, either byte order
            width = 2 if kind == 2 else 4
            value = _interesting(rng, width)
            order = "little" if rng.integers(0, 2) else "big"
            out[pos : pos + width] = value.to_bytes(width, order)
        elif kind == 4:  # truncate
            del out[int(rng.integers(8, max(9, len(out)))) :]
        else:  # duplicate a slice somewhere else
            start = int(rng.integers(0, len(out)))
            piece = out[start : start + int(rng.integers(1, 64))]
            out[pos:pos] = piece
    return bytes(out)


def within(seconds: float, call: Callable[[], object]) -> object:
    """``call()``, or a test failure if it has not returned after ``seconds``.

    Runs in a daemon thread: a read that blocks on a FIFO is not interrupted by pytest-timeout's
    SIGALRM when another thread (torch's) receives the signal, and would hang the suite.
    """
    import threading

    import pytest

    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"still blocked after {seconds} s")
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value
