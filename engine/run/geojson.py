"""A slide's tile rows as GeoJSON in QuPath's own conventions: one writer for ``f2tta run`` and the app.

QuPath (0.4 and later; ``File ▸ Import objects``, or drag the file onto the slide) reads each
feature as one object the way it writes its own exports (``qupath.lib.io``'s GeoJSON adapters):

* ``id``: a UUID (the object's identity; here derived from the slide and the image index, so the
  same export gives the same ids);
* ``geometry``: a polygon in level-0 pixels, origin top left (QuPath's image coordinates);
* ``properties.objectType``: ``detection``, so each tile is a detection (listed and measured as
  detections, drawn as QuPath draws detections, not an editable annotation);
* ``properties.classification``: ``{"name": <class>, "color": [r, g, b]}``: the prediction as
  the object's class, in that class's colour;
* ``properties.measurements``: name → number only (QuPath reads them as doubles: no text, no
  booleans, no NaN; a figure that is missing is left out; six decimals, as the journal keeps
  them): confidence, the positive class's probability, uncertainty, 0/1 flags, the image's
  number and the tile's grid row and column, counted from 1 as the tile's name;
* ``properties.metadata``: name → text (QuPath 0.5 keeps it with the object): the item, the
  source model's prediction, the collapse guard's message.

The collection's own ``properties`` (slide, coordinates, classes, notice) are ignored by QuPath.
The app's export (``app/reports/qupath.py``) and ``f2tta run`` on a slide (``OUT.geojson``) both
write this document, so the same rows give the same file.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

from engine.run.rows import PredictionRow
from engine.util.text import shown

#: What every report of the project says about its use (the app shows the same words).
RESEARCH_NOTICE = "For research use only. Not for use in diagnostic procedures."
# Classification colours, one per class index (the first two: blue and red, as the app's maps).
CLASS_COLORS = ((49, 104, 200), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189), (140, 86, 75))
OBJECT_TYPE = "detection"


def class_color(index: int) -> list[int]:
    return list(CLASS_COLORS[index % len(CLASS_COLORS)])


def _measurements(row: PredictionRow, positive: str) -> dict[str, float]:
    col, r = row.tile[0], row.tile[1]  # type: ignore[index]
    values = {
        "Confidence": row.confidence,
        f"Probability {positive}": row.positive_prob,
        "Uncertainty": row.uncertainty,
        "Source model confidence": row.source_confidence,
        "Changed by adaptation": 1.0 if row.changed else 0.0,
        "Update skipped": 1.0 if row.update_skipped else 0.0,
        "Image number": float(row.position + 1),  # as the app's table "#" (from 1)
        # From 1, as the tile's name ("tile r2 c11", engine.io.tile_plan.Tile.label) and the app's
        # table: counted from 0 they read "row 1, column 10" beside an item named r2 c11.
        "Tile row": float(r + 1),
        "Tile column": float(col + 1),
    }
    # Six decimals, as the journal keeps them: rows made in this run and rows read back from the
    # journal (a resumed run, a restarted app) give the same document.
    return {name: round(float(v), 6) for name, v in values.items() if math.isfinite(v)}


def _metadata(row: PredictionRow) -> dict[str, str]:
    data = {"Item": shown(row.name), "Source model prediction": row.source_label}
    if row.guard_message:
        data["Collapse guard"] = row.guard_message
    return data


def tiles_geojson(
    rows: Sequence[PredictionRow],
    classes: Sequence[str],
    slide: str,
    positive_class: int = 1,
    notice: str = RESEARCH_NOTICE,
    size: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Tile predictions as a FeatureCollection QuPath imports as classified detections.

    Args:
        rows: the slide's rows (rows without a tile are left out), in any order.
        classes: the model's class names.
        slide: the slide's path as the user gave it (it seeds the features' ids).
        positive_class: the class whose probability is a measurement.
        notice: the collection's notice.
        size: the slide's level-0 width and height; each polygon is cut to them (a partial tile at
            the right or bottom edge reached past the slide: x = 1056 on a 1000-px slide).
    """
    positive = classes[positive_class] if 0 <= positive_class < len(classes) else "positive class"
    right, bottom = size if size is not None else (math.inf, math.inf)
    features = []
    for row in sorted(rows, key=lambda r: r.index):
        if row.tile is None:
            continue
        _, _, x, y, w, h = row.tile
        x2, y2 = min(x + w, right), min(y + h, bottom)
        if x2 <= x or y2 <= y or x < 0 or y < 0:  # nothing of it on the slide
            continue
        ring = [[x, y], [x2, y], [x2, y2], [x, y2], [x, y]]
        features.append(
            {
                "type": "Feature",
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"f2tta:{slide}#{row.index}")),
                "geometry": {"type": "Polygon", "coordinates": [ring]},
                "properties": {
                    "objectType": OBJECT_TYPE,
                    "classification": {"name": row.prediction_label, "color": class_color(row.prediction)},
                    "measurements": _measurements(row, positive),
                    "metadata": _metadata(row),
                },
            }
        )
    return {
        "type": "FeatureCollection",
        "properties": {
            "slide": slide,
            "coordinates": "level-0 pixels",
            "classes": list(classes),
            "notice": notice,
        },
        "features": features,
    }


def written_for(head: bytes, slide: str) -> bool:
    """Whether a file beginning with ``head`` is this module's document for ``slide``."""
    expected = json.dumps({"type": "FeatureCollection", "properties": {"slide": slide}})[:-2] + ","
    return head.startswith(expected.encode("ascii"))


def geojson_bytes(document: dict[str, Any]) -> bytes:
    """A document of :func:`tiles_geojson` as strict JSON (no NaN), ASCII, one line."""
    return (json.dumps(document, allow_nan=False) + "\n").encode("ascii")
