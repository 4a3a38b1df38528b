"""The engine worker's reading between images (Qt-free): previews, slide regions, what a source's
images look like and the card's checksum (its part of an export: :mod:`app.worker.exporting`).

These run on the worker's thread (:mod:`app.worker.engine_worker`), which owns the open source and slide.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from app._engine import (
    F2TTAError,
    FolderSource,
    JsonFileError,
    KindTally,
    Picture,
    Slide,
    Source,
    Tile,
    judge_source,
    list_images,
    read_image,
    read_json_file,
)
from app.core.messages import RegionRead, RegionRequest
from app.core.overlay import preview_array

logger = logging.getLogger(__name__)

PREVIEW_SIZE = 384  # longest side of the preview kept for display, in pixels


def card_checksum(checkpoint: Path) -> str:
    """The ``weights_sha256`` the card beside ``checkpoint`` records (empty when it records none)."""
    try:
        data = read_json_file(
            checkpoint.with_suffix(".json"), what="model card", max_bytes=1 << 20, max_depth=64
        )
    except (OSError, JsonFileError):
        return ""
    value = data.get("weights_sha256") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def model_sha256(checkpoint: Path) -> str:
    """The checkpoint's content: the SHA-256 its card records (checked when the model loads), else
    the file's own, read in chunks; empty when it cannot be read."""
    recorded = card_checksum(checkpoint)
    if recorded:
        return recorded
    digest = hashlib.sha256()
    try:
        with open(checkpoint, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return ""
    return digest.hexdigest()


def frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, dtype=np.float32, copy=True)
    out.setflags(write=False)
    return out


def judge_kind(source: Source) -> KindTally:
    """What the source's images look like, judged as ``f2tta run``'s gate judges them (the engine's
    ``judge_source``: a sample across a folder, read small; a slide is histology)."""
    return judge_source(source)


def new_images(source: FolderSource) -> int:
    """Images in ``source``'s folder that are not among its items (copied in since it opened); 0
    when the folder cannot be listed now (gone, unreadable: the next run says so)."""
    known = {item.key for item in source.items}
    try:
        files = list_images(source.root)
    except (OSError, F2TTAError):
        return 0
    return sum(1 for path in files if path.relative_to(source.root).as_posix() not in known)


def read_preview(source: Source | None, slide: Slide | None, position: int) -> np.ndarray | None:
    """The preview of stream ``position`` read again (None: no such item).

    Raises:
        F2TTAError, OSError: it cannot be read.
    """
    if source is None or not 0 <= position < len(source.items):
        return None
    item = source.items[position]
    if item.tile is not None and slide is not None:
        image: Picture = slide.read_area(item.tile, PREVIEW_SIZE)
    elif item.path is not None:
        image = read_image(item.path)
    else:
        return None
    return preview_array(image, PREVIEW_SIZE)


def read_region(slide: Slide, request: RegionRequest) -> RegionRead | None:
    """A rectangle of the slide read from the pyramid level that suits ``request.max_side`` pixels."""
    if request.width <= 0 or request.height <= 0:
        return None
    area = Tile(0, 0, 0, request.x, request.y, request.width, request.height, 0.0)
    try:
        rgb = slide.read_area(area, request.max_side)
    except (F2TTAError, OSError) as exc:
        logger.warning("slide region cannot be read: %s", exc)
        return None
    out = np.ascontiguousarray(rgb, dtype=np.uint8)
    out.setflags(write=False)
    return RegionRead(request, out)
