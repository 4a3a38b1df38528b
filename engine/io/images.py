"""Reading images from disk safely, by an allow-list of formats identified from their content.

What :func:`read_image` promises (``docs/reliability.md`` lists the test of each promise):

* Only PNG, JPEG, TIFF (classic and BigTIFF), BMP and GIF are decoded, whatever the file name
  says; the format is taken from the first bytes and only that format's Pillow plugin ever sees
  the file. PostScript/EPS (which Pillow hands to Ghostscript), PDF, WebP, JPEG 2000, DICOM,
  HEIF/AVIF and Pillow's other plugins (IM, SPIDER, DDS, BLP, ...) are refused with a reason.
* Only regular files are opened, without blocking: a FIFO or a device named ``.png`` is refused
  at once with the right reason.
* Every failure, whatever a plugin raises, becomes :class:`ImageReadError` naming the file.
* Nothing is decoded before the header's size is checked: more than :data:`MAX_IMAGE_PIXELS`
  pixels is refused, so the decoded pixels take at most 4 bytes x that (358 MB). Images whose
  longer side exceeds :data:`WORKING_SIDE` are reduced while they are read (JPEG by DCT
  scaling, others by box averaging in strips), so a 16-bit 9 400² PNG needs ~0.2 GB, not 3.4,
  and every later copy is small. Pillow's slow Python decoder (RLE BMP) gets a smaller limit.
* Multi-page files give their first page (a TIFF whose first page is too large gives its largest
  reduced page that fits, as pyramidal TIFFs store them); animated GIF/PNG their first frame.
* EXIF orientation is applied.

Listing folders lives in :mod:`engine.io.listing` and is re-exported here.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import (
    BmpImagePlugin,
    GifImagePlugin,
    Image,
    ImageFile,
    JpegImagePlugin,
    PngImagePlugin,
    TiffImagePlugin,
)

from engine.errors import ImageReadError
from engine.io.listing import IMAGE_EXTENSIONS, ImageListing, ListingProblem, Order, list_images, scan_images
from engine.util.files import UnsafeFileError, open_regular

__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_IMAGE_PIXELS",
    "MAX_PYTHON_DECODE_PIXELS",
    "RECENT_WRITE_SECONDS",
    "SUPPORTED_FORMATS",
    "WORKING_SIDE",
    "ImageListing",
    "ListingProblem",
    "Order",
    "identify_format",
    "list_images",
    "probe_image",
    "read_image",
    "scan_images",
    "to_rgb",
]

logger = logging.getLogger(__name__)

SUPPORTED_FORMATS = ("PNG", "JPEG", "TIFF", "BMP", "GIF")
# Largest declared image: anything larger is refused from its header. This is Pillow's own
# decompression-bomb threshold, which the reader has always enforced; the time to read an image
# grows with its pixels, so it also bounds that (about a second here at the limit).
MAX_IMAGE_PIXELS = 89_478_485
# Longer side, in pixels, above which an image is reduced by an integer factor while it is read;
# the model sees a few hundred pixels and the app a screen's worth.
WORKING_SIDE = 4096
# A progressive JPEG re-reads every coefficient once per scan: encoders write about 10.
MAX_JPEG_SCANS = 100
# Pillow decodes RLE-compressed BMP in Python, up to one interpreted step per pixel: ~0.4 s here.
MAX_PYTHON_DECODE_PIXELS = 2048 * 2048
_PYTHON_CODECS = frozenset({"bmp_rle"})
# Pages of a TIFF searched for a reduced copy when the first page is too large.
MAX_TIFF_PAGES = 64
# A file whose decoding fails within this many seconds of its last modification may still be
# being copied: the error is marked transient.
RECENT_WRITE_SECONDS = 30.0

_HEAD_BYTES = 132  # DICOM's magic sits at offset 128
_EXCEPTION_TEXT = 200  # characters of a plugin's message kept in a reason

_PLUGINS: dict[str, type[ImageFile.ImageFile]] = {
    "PNG": PngImagePlugin.PngImageFile,
    "JPEG": JpegImagePlugin.JpegImageFile,
    "TIFF": TiffImagePlugin.TiffImageFile,
    "BMP": BmpImagePlugin.BmpImageFile,
    "GIF": GifImagePlugin.GifImageFile,
}
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"II+\x00", "TIFF"),  # BigTIFF
    (b"MM\x00+", "TIFF"),
    (b"BM", "BMP"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
)
_POSTSCRIPT = "PostScript/EPS is never opened (Pillow would run Ghostscript on it)"
_REFUSED = (
    (b"%!", _POSTSCRIPT),
    (b"\xc5\xd0\xd3\xc6", _POSTSCRIPT),  # DOS EPS binary header
    (b"%PDF", "PDF"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG 2000"),
    (b"\xffO\xffQ", "JPEG 2000"),
    (b"8BPS", "Photoshop PSD"),
    (b"DDS ", "DirectDraw DDS"),
    (b"BLP1", "Blizzard BLP"),
    (b"BLP2", "Blizzard BLP"),
    (b"\x00\x00\x01\x00", "Windows icon"),
    (b"icns", "Apple icon"),
    (b"SIMPLE  =", "FITS"),
    (b"Image type:", "ImageMagick IM"),
    (b"id=ImageMagick", "ImageMagick IM"),
    (b"\x97JB2", "JBIG2"),
)
_ORIENTATION = 0x0112
_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# Modes Image.reduce averages correctly (not palette indices, not 1-bit, not 16-bit).
_REDUCIBLE = frozenset(
    {"L", "LA", "La", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "LAB", "HSV", "I", "F"}
)
_HIGH_DEPTH = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")


def identify_format(head: bytes) -> tuple[str | None, str]:
    """The allowed format that ``head`` (a file's first bytes) begins, else None and why not."""
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            return fmt, ""
    for magic, name in _REFUSED:
        if head.startswith(magic):
            return None, name if name == _POSTSCRIPT else f"{name} files are not read"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return None, "WebP files are not read"
    if head[4:8] == b"ftyp":
        return None, "HEIF/AVIF/MP4 files are not read"
    if head[128:132] == b"DICM":
        return None, "DICOM files are not read (export the image as PNG or TIFF)"
    stripped = head.lstrip()
    if stripped[:1] in (b"<", b"{", b"["):
        return None, "text (HTML, XML, SVG or JSON), not an image"
    return None, "not an image in a supported format"


def _error(path: Path, reason: str, transient: bool = False) -> ImageReadError:
    return ImageReadError(f"{path}: {reason}", reason=reason, transient=transient)


def open_checked(path: Path) -> tuple[BinaryIO, os.stat_result, str, ImageFile.ImageFile]:
    """Open ``path``, identify it and parse its header (no pixels); size limits checked."""
    try:
        fh, st = open_regular(path)
    except UnsafeFileError as exc:
        raise _error(path, exc.reason, exc.transient) from exc
    try:
        if st.st_size == 0:
            raise _error(path, "file is empty (0 bytes; still being copied?)", transient=True)
        head = fh.read(_HEAD_BYTES)
        fmt, why = identify_format(head)
        if fmt is None:
            raise _error(
                path, f"{why} (supported: {', '.join(SUPPORTED_FORMATS)}; file starts {head[:8].hex(' ')})"
            )
        fh.seek(0)
        try:
            img = _PLUGINS[fmt](fh)
            if fmt == "TIFF":
                _pick_tiff_page(img, path)
            _check_size(img, path, fmt)
        except ImageReadError:
            raise
        except Exception as exc:  # each plugin raises its own types; all of them mean "unreadable"
            raise _decode_error(path, fmt, exc, fh, st) from exc
        return fh, st, fmt, img
    except BaseException:
        fh.close()
        raise


def probe_image(path: str | Path) -> tuple[str, tuple[int, int]]:
    """Identify a file and parse its header without decoding pixels.

    Returns:
        The format (one of :data:`SUPPORTED_FORMATS`) and the size ``(width, height)``.

    Raises:
        ImageReadError: as :func:`read_image` would for the same file's header.
    """
    path = Path(path)
    fh, _, fmt, img = open_checked(path)
    with fh:
        return fmt, img.size


def read_image(path: str | Path) -> Image.Image:
    """Open an image file as 8-bit RGB, or raise :class:`ImageReadError` saying why not.

    Grayscale, palette, CMYK, RGBA (composited on white) and 16-bit or float images are
    converted; EXIF orientation is applied; images larger than :data:`WORKING_SIDE` are reduced.
    See the module's docstring for what is refused.
    """
    path = Path(path)
    fh, st, fmt, img = open_checked(path)
    with fh:
        return decode_opened(path, fh, st, fmt, img)


def decode_opened(
    path: Path, fh: BinaryIO, st: os.stat_result, fmt: str, img: ImageFile.ImageFile
) -> Image.Image:
    """The pixels of an image :func:`open_checked` opened, as :func:`read_image` gives them."""
    try:
        if fmt == "JPEG":
            _limit_jpeg(img, fh, path)
        img.load()
        orientation = _orientation(img, path)
        small = _reduce(img)
        if small is not img:
            img.close()  # frees the full-size pixels before the conversion allocates more
        rgb = to_rgb(small)
        transpose = _TRANSPOSE.get(orientation)
        return rgb if transpose is None else rgb.transpose(transpose)
    except ImageReadError:
        raise
    except Exception as exc:  # plugins raise TypeError, struct.error, ...: a skip, never a crash
        raise _decode_error(path, fmt, exc, fh, st) from exc


def _decode_error(path: Path, fmt: str, exc: Exception, fh: BinaryIO, st: os.stat_result) -> ImageReadError:
    """The error for a failed parse or decode; transient when the file may still be being written."""
    if isinstance(exc, Image.DecompressionBombError):
        return _error(path, f"refused as a decompression bomb ({exc})")
    if isinstance(exc, MemoryError):
        return _error(path, "not enough memory to decode the image", transient=True)
    text = str(exc)
    if len(text) > _EXCEPTION_TEXT:
        text = text[:_EXCEPTION_TEXT] + "..."
    reason = f"not a readable {fmt} image ({type(exc).__name__}: {text})"
    try:
        now = os.fstat(fh.fileno())
    except (OSError, ValueError):
        return _error(path, reason + "; the file could not be checked again", transient=True)
    if now.st_mtime_ns != st.st_mtime_ns or now.st_size != st.st_size:
        return _error(path, reason + "; the file changed while it was read (still being copied?)", True)
    age = time.time() - now.st_mtime
    if age < RECENT_WRITE_SECONDS:
        return _error(
            path, reason + f"; modified {max(age, 0.0):.0f} s ago, it may still be being written", True
        )
    return _error(path, reason)


def _within_limits(width: int, height: int) -> bool:
    return width * height <= MAX_IMAGE_PIXELS


def _check_size(img: ImageFile.ImageFile, path: Path, fmt: str) -> None:
    w, h = img.size
    if w * h > MAX_IMAGE_PIXELS:
        raise _error(path, f"image of {w}x{h} pixels exceeds the limit of {MAX_IMAGE_PIXELS} pixels")
    if w * h > MAX_PYTHON_DECODE_PIXELS and any(t.codec_name in _PYTHON_CODECS for t in img.tile):
        raise _error(
            path,
            f"RLE-compressed {fmt} of {w}x{h} pixels exceeds the limit of {MAX_PYTHON_DECODE_PIXELS} pixels "
            "for that encoding (it is decoded slowly)",
        )


def _jpeg_scale(width: int, height: int) -> int:
    """The power-of-two DCT scaling (1-8) that keeps the longer side at or above WORKING_SIDE."""
    factor = max(width, height) // WORKING_SIDE
    return next((s for s in (8, 4, 2) if factor >= s), 1)


def _limit_jpeg(img: ImageFile.ImageFile, fh: BinaryIO, path: Path) -> None:
    """Refuse JPEGs with too many scans; decode large ones at a reduced scale."""
    fh.seek(0)
    scans, tail = 0, b""
    while chunk := fh.read(1 << 20):
        scans += (tail + chunk).count(b"\xff\xda")  # start-of-scan markers (0xFF in data is stuffed)
        tail = chunk[-1:]
        if scans > MAX_JPEG_SCANS:
            raise _error(path, f"JPEG with more than {MAX_JPEG_SCANS} scans (decoding time unbounded)")
    scale = _jpeg_scale(*img.size)
    if scale > 1:
        w, h = img.size
        img.draft(None, (w // scale, h // scale))


def _pick_tiff_page(img: ImageFile.ImageFile, path: Path) -> None:
    """Keep the first page, or, when it is too large, the largest reduced page that fits."""
    w0, h0 = img.size
    if _within_limits(w0, h0):
        return
    best: tuple[int, int] | None = None  # (pixels, page)
    for page in range(1, MAX_TIFF_PAGES):
        try:
            img.seek(page)
        except EOFError:
            break
        w, h = img.size
        same_shape = abs(w / w0 - h / h0) <= 0.02 * max(w / w0, h / h0)
        if same_shape and _within_limits(w, h) and (best is None or w * h > best[0]):
            best = (w * h, page)
    if best is None:
        img.seek(0)
        return  # _check_size refuses it with the sizes of the first page
    img.seek(best[1])
    logger.info(
        "%s: first page %dx%d is too large; reading page %d (%dx%d)", path, w0, h0, best[1], *img.size
    )


def _orientation(img: Image.Image, path: Path) -> int:
    try:
        value = img.getexif().get(_ORIENTATION)
    except Exception as exc:  # malformed EXIF: the pixels are fine, the orientation unknown
        logger.warning(
            "%s: EXIF data unreadable (%s: %s); orientation not applied", path, type(exc).__name__, exc
        )
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _averageable(img: Image.Image) -> Image.Image:
    """A copy of ``img`` in a mode whose pixels can be averaged."""
    if img.mode in ("P", "PA"):
        return img.convert("RGBA" if img.mode == "PA" or "transparency" in img.info else "RGB")
    if img.mode == "1":
        return img.convert("L")
    return img.convert("I")  # 16-bit and other integer modes


def _reduce(img: Image.Image) -> Image.Image:
    """Shrink by an integer factor until the longer side is at most WORKING_SIDE (box average)."""
    factor = math.ceil(max(img.size) / WORKING_SIDE)
    if factor <= 1:
        return img
    if img.mode in _REDUCIBLE:
        return img.reduce(factor)
    # Strip by strip of about 4 Mpx, so that the widened copy (palette to RGB, 16 to 32 bits)
    # stays small and a tall, narrow image is not cut into thousands of strips.
    w, h = img.size
    rows = factor * max(1, (1 << 22) // (w * factor))
    out: Image.Image | None = None
    for top in range(0, h, rows):
        part = _averageable(img.crop((0, top, w, min(h, top + rows)))).reduce(factor)
        if out is None:
            out = Image.new(part.mode, (math.ceil(w / factor), math.ceil(h / factor)))
        out.paste(part, (0, top // factor))
    assert out is not None
    return out


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any Pillow image mode to 8-bit RGB (16-bit and float stretched to their range)."""
    if img.mode == "RGB":
        return img.copy()
    if img.mode in _HIGH_DEPTH:
        return Image.fromarray(_stretch(np.asarray(img)), mode="L").convert("RGB")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")


def _stretch(arr: np.ndarray, rows: int = 512) -> np.ndarray:
    """Map the finite range of ``arr`` onto 0-255 (NaN to 0, infinities to the ends), in row blocks."""
    finite = arr if arr.dtype.kind in "iu" else arr[np.isfinite(arr)]
    out = np.zeros(arr.shape, dtype=np.uint8)
    if finite.size == 0:
        return out
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        return out
    for top in range(0, arr.shape[0], rows):
        block = (arr[top : top + rows].astype(np.float64) - lo) / (hi - lo) * 255.0
        out[top : top + rows] = np.nan_to_num(np.clip(block, 0.0, 255.0), nan=0.0)
    return out
