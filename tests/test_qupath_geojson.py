"""The slide's GeoJSON against QuPath's conventions (issue 20, item 6).

What QuPath's GeoJSON reader (``qupath.lib.io``, 0.4 and later) and its writer agree on, checked
feature by feature: a UUID ``id``; a closed polygon in level-0 pixels; ``properties.objectType``
one of QuPath's object types (here ``detection``); ``classification`` as ``{"name", "color":
[r, g, b]}``; ``measurements`` as a map of names to finite numbers (QuPath reads them as doubles:
text, booleans and NaN break the import); ``metadata`` as a map of names to text; no other
properties. The export is strict JSON (no NaN).
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest
from app_fixtures import CLASSES, report_data, sample_row

from app.reports.export import staged_path
from app.reports.files import GEOJSON_NAME, stage_tabular_reports
from app.reports.qupath import geojson_bytes, geojson_document

QUPATH_OBJECT_TYPES = {"annotation", "detection", "tile", "cell", "tmaCore", "root"}
QUPATH_PROPERTIES = {
    "objectType",
    "name",
    "color",
    "classification",
    "isLocked",
    "isMissing",
    "measurements",
    "metadata",
    "childObjects",
}


def _rows() -> list:
    return [
        sample_row(0, pred=1, tile=(0, 0, 0, 0, 256, 256)),
        sample_row(1, pred=0, src=1, tile=(1, 0, 256, 0, 256, 256), name="tile r0 c1 (256, 0)"),
        sample_row(2, pred=1, unc=math.nan, tile=(2, 0, 512, 0, 256, 256), guard_message="guard acted"),
        sample_row(3),  # not a tile: left out
    ]


def check_qupath_feature(feature: dict) -> None:
    """One feature as QuPath writes and reads its own objects."""
    assert feature["type"] == "Feature"
    assert str(uuid.UUID(feature["id"])) == feature["id"], "QuPath keeps a UUID id, drops anything else"
    geometry = feature["geometry"]
    assert geometry["type"] == "Polygon"
    ring = geometry["coordinates"][0]
    assert ring[0] == ring[-1] and len(ring) >= 4, "a closed ring"
    assert all(len(p) == 2 and all(isinstance(v, int | float) for v in p) for p in ring)
    props = feature["properties"]
    assert set(props) <= QUPATH_PROPERTIES, set(props) - QUPATH_PROPERTIES
    assert props["objectType"] in QUPATH_OBJECT_TYPES
    classification = props["classification"]
    assert set(classification) == {"name", "color"} and isinstance(classification["name"], str)
    colour = classification["color"]
    assert isinstance(colour, list) and len(colour) == 3
    assert all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in colour)
    measurements = props["measurements"]
    assert isinstance(measurements, dict) and measurements
    for name, value in measurements.items():
        assert isinstance(name, str) and isinstance(value, float) and math.isfinite(value), (name, value)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.get("metadata", {}).items())


def test_tiles_are_classified_detections_with_measurements() -> None:
    doc = geojson_document(_rows(), CLASSES, "slide.svs")
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 3
    for feature in doc["features"]:
        check_qupath_feature(feature)
    first, second, third = doc["features"]
    assert first["properties"]["objectType"] == "detection"
    assert first["properties"]["classification"]["name"] == "tumor"
    assert second["properties"]["classification"]["name"] == "normal"
    assert first["properties"]["classification"]["color"] != second["properties"]["classification"]["color"]
    assert first["properties"]["classification"]["color"] == third["properties"]["classification"]["color"]
    m = first["properties"]["measurements"]
    assert m["Confidence"] == 0.9 and m["Probability tumor"] == 0.9 and m["Uncertainty"] == 0.1
    assert m["Image number"] == 1.0 and m["Changed by adaptation"] == 0.0
    assert (m["Tile row"], m["Tile column"]) == (1.0, 1.0), "from 1, as the tile's name"
    assert second["properties"]["measurements"]["Probability tumor"] == pytest.approx(0.1)
    assert second["properties"]["measurements"]["Changed by adaptation"] == 1.0
    assert second["properties"]["metadata"]["Source model prediction"] == "tumor"
    assert "Uncertainty" not in third["properties"]["measurements"], "a missing figure is left out"
    assert third["properties"]["metadata"]["Collapse guard"] == "guard acted"
    assert second["geometry"]["coordinates"][0][:3] == [[256, 0], [512, 0], [512, 256]]


def test_ids_are_unique_and_the_same_for_the_same_export() -> None:
    ids = [f["id"] for f in geojson_document(_rows(), CLASSES, "slide.svs")["features"]]
    assert len(set(ids)) == len(ids)
    assert ids == [f["id"] for f in geojson_document(_rows(), CLASSES, "slide.svs")["features"]]
    assert ids != [f["id"] for f in geojson_document(_rows(), CLASSES, "other.svs")["features"]]


def test_the_exported_file_is_strict_json(tmp_path: Path) -> None:
    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    text = geojson_bytes(tuple(_rows()), CLASSES, "slide.svs").decode("ascii")
    doc = json.loads(text, parse_constant=no_constants)
    assert len(doc["features"]) == 3
    # The export writes it for slides, with the card's positive class.
    data = report_data(tuple(_rows()), source_kind="slide", card={"positive_class": 0})
    staged = stage_tabular_reports(tmp_path, data)
    assert GEOJSON_NAME in staged.names
    written = staged_path(tmp_path, GEOJSON_NAME)
    feature = json.loads(written.read_text(), parse_constant=no_constants)["features"][0]
    check_qupath_feature(feature)
    assert feature["properties"]["measurements"]["Probability normal"] == 0.9


def test_every_polygon_lies_inside_the_slide(studio: object, tmp_path: Path, qtbot: object) -> None:
    """A 1000 × 777 slide without µm/px: the partial tiles at its right and bottom edges reached
    past it (x = 1056), drawn whole; each polygon is now cut to the slide (issue 29, case 12)."""
    import numpy as np
    from app_fixtures import make_model, write_pyramid
    from app_studio import RUN_TIMEOUT_MS

    rng = np.random.default_rng(0)
    img = np.clip(np.array([170, 80, 160]) + rng.normal(0, 20, (777, 1000, 3)), 0, 255).astype(np.uint8)
    slide = write_pyramid(tmp_path / "edge.tif", img, tile=128)
    # 48-px tiles: the last column starts at x = 960 and keeps 40 of its 48 px on the slide.
    studio.model = make_model(tmp_path, mpp=1.0, img_size=48)  # type: ignore[attr-defined]
    c = studio.open(method="source", method_config={})  # type: ignore[attr-defined]
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.open_slide(str(slide))
    assert c.controller.model.gate_checks == ["resolution"]  # no µm/px: the model may not apply
    c.window.confirm = lambda title, text: True  # Run anyway (in a project of its own)
    studio.run_to_end(c)  # type: ignore[attr-defined]
    tiles = c.controller.model.rows
    assert any(r.tile[2] + r.tile[4] > 1000 or r.tile[3] + r.tile[5] > 777 for r in tiles), "edge tiles"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(tmp_path / "out")
    features = json.loads((tmp_path / "out" / GEOJSON_NAME).read_text())["features"]
    assert features and len(features) == len(tiles)
    for feature in features:
        check_qupath_feature(feature)
        for x, y in feature["geometry"]["coordinates"][0]:
            assert 0 <= x <= 1000 and 0 <= y <= 777, (x, y)


def test_the_tiles_grid_position_reads_as_its_name() -> None:
    """Issue 38: the item "tile r2 c11" had the measurements "Tile row 1, Tile column 10"."""
    from engine.io.tile_plan import Tile

    tile = Tile(index=0, col=10, row=1, x=960, y=96, width=96, height=96, tissue=1.0)
    row = sample_row(0, tile=(tile.col, tile.row, tile.x, tile.y, tile.width, tile.height), name=tile.label)
    (feature,) = geojson_document([row], CLASSES, "slide.svs")["features"]
    m = feature["properties"]["measurements"]
    assert feature["properties"]["metadata"]["Item"].startswith("tile r2 c11")
    assert (m["Tile row"], m["Tile column"]) == (2.0, 11.0)
