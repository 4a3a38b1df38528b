"""Reading images from disk safely and listing image folders in arrival order."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageFile

from engine.errors import ImageReadError

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp"})

# Pillow's default bomb limit (~89 Mpx) warns; we refuse anything above this many pixels outright.
MAX_IMAGE_PIXELS = 16_384 * 16_384

Order = Literal["name", "mtime"]


def _natural_key(text: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def iter_image_files(root: str | Path) -> Iterator[Path]:
    """Yield image files under ``root`` recursively, following no symlinked directories twice."""
    root = Path(root)
    seen_dirs: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in seen_dirs:  # symlink loop or a directory reached twice
            dirnames[:] = []
            continue
        seen_dirs.add(ident)
        dirnames.sort()
        for name in filenames:
            if name.startswith("."):
                continue
            if Path(name).suffix.lower() in IMAGE_EXTENSIONS:
                yield Path(dirpath) / name


def list_images(root: str | Path, order: Order = "name") -> list[Path]:
    """All images under ``root`` in arrival order.

    Args:
        root: a folder (searched recursively).
        order: ``"name"`` sorts by relative path with numbers compared as numbers
            (``img2`` before ``img10``); ``"mtime"`` by modification time, then name.
    """
    root = Path(root)
    files = list(iter_image_files(root))
    if order == "name":
        files.sort(key=lambda p: _natural_key(p.relative_to(root).as_posix()))
    elif order == "mtime":

        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except OSError:
                return float("inf")

        files.sort(key=lambda p: (mtime(p), _natural_key(p.relative_to(root).as_posix())))
    else:
        raise ValueError(f"unknown order {order!r}; use 'name' or 'mtime'")
    return files


def read_image(path: str | Path) -> Image.Image:
    """Open an image file as 8-bit RGB, or raise :class:`ImageReadError` saying why not.

    Grayscale, palette, CMYK, RGBA (composited on white) and 16-bit images are converted;
    truncated files, non-images and images above :data:`MAX_IMAGE_PIXELS` are refused
    without decoding their pixels.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImageReadError(f"{path}: cannot access file ({exc.strerror or exc})") from exc
    if size == 0:
        raise ImageReadError(f"{path}: file is empty (0 bytes)")
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                w, h = img.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise ImageReadError(
                        f"{path}: image of {w}x{h} pixels exceeds the limit of {MAX_IMAGE_PIXELS} pixels"
                    )
                img.load()
                return to_rgb(img)
    except ImageReadError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageReadError(f"{path}: refused as a decompression bomb ({exc})") from exc
    except OSError as exc:  # PIL.UnidentifiedImageError is an OSError
        raise ImageReadError(f"{path}: not a readable image ({exc})") from exc
    except (ValueError, SyntaxError, MemoryError) as exc:
        raise ImageReadError(f"{path}: image data is corrupt ({type(exc).__name__}: {exc})") from exc


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any Pillow image mode to 8-bit RGB."""
    if img.mode == "RGB":
        return img.copy()
    if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        arr = np.asarray(img, dtype=np.float64)
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        scaled = np.zeros_like(arr) if hi <= lo else (arr - lo) / (hi - lo) * 255.0
        return Image.fromarray(np.nan_to_num(scaled).astype(np.uint8), mode="L").convert("RGB")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")
