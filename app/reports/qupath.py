"""The slide's tiles as GeoJSON in QuPath's own conventions (Qt-free).

The document is the engine's (:func:`engine.run.geojson.tiles_geojson`, which describes QuPath's
conventions), so ``f2tta run`` on a slide writes the same file; the app gives it its notice.
"""

from __future__ import annotations

from typing import Any

from app import RESEARCH_NOTICE
from app._engine import PredictionRow, tiles_geojson
from app._engine import geojson_bytes as strict_json


def geojson_document(
    rows: tuple[PredictionRow, ...] | list[PredictionRow],
    classes: tuple[str, ...],
    slide: str,
    positive_class: int = 1,
    size: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Tile predictions as a FeatureCollection QuPath imports as classified detections.

    ``size``: the slide's level-0 width and height; each tile's polygon is cut to them.
    """
    return tiles_geojson(rows, classes, slide, positive_class, notice=RESEARCH_NOTICE, size=size)


def geojson_bytes(
    rows: tuple[PredictionRow, ...],
    classes: tuple[str, ...],
    slide: str,
    positive_class: int = 1,
    size: tuple[int, int] | None = None,
) -> bytes:
    return strict_json(geojson_document(rows, classes, slide, positive_class, size))
