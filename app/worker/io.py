"""The engine worker's reading and writing between images (Qt-free): previews, slide regions,
what a source's images look like, the card's checksum, and the reports.

These run on the worker's thread (:mod:`app.worker.engine_worker`), which owns the open source and slide.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from app._engine import (
    F2TTAError,
    KindTally,
    Picture,
    Slide,
    Source,
    Tile,
    judge_source,
    read_image,
)
from app.core.messages import RegionRead, RegionRequest
from app.core.overlay import preview_array
from app.reports.files import ReportData, StagedReports

logger = logging.getLogger(__name__)

PREVIEW_SIZE = 384  # longest side of the preview kept for display, in pixels


def card_checksum(checkpoint: Path) -> str:
    """The ``weights_sha256`` the card beside ``checkpoint`` records (empty when it records none)."""
    try:
        with open(checkpoint.with_suffix(".json"), encoding="utf-8") as fh:
            data = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return ""
    value = data.get("weights_sha256") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, dtype=np.float32, copy=True)
    out.setflags(write=False)
    return out


def judge_kind(source: Source) -> KindTally:
    """What the source's images look like, judged as ``f2tta run``'s gate judges them (the engine's
    ``judge_source``: a sample across a folder, read small; a slide is histology)."""
    return judge_source(source)


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


def write_reports(
    directory: Path, data: ReportData, read: Callable[[int], np.ndarray | None]
) -> tuple[StagedReports, ReportData]:
    """Stage the CSV, JSON and GeoJSON reports; ``read`` gives the gallery's previews not at hand.

    Returns the files staged and ``data`` with its gallery complete, from which the GUI thread
    renders the PDF and commits the set (:func:`app.reports.pdf.add_pdf`): its text layout takes
    Qt's connection mutexes while PySide holds the GIL, and on this thread that deadlocked against
    the GUI thread destroying Qt objects (it holds the mutex and waits for the GIL).

    Raises:
        OSError: a report cannot be written (anything else is a bug, raised as it is).
    """
    from app.reports.data import complete_gallery
    from app.reports.files import stage_tabular_reports

    data = complete_gallery(data, read)
    return stage_tabular_reports(directory, data), data
