"""The slide viewer (issue 20, item 4; pytest-qt, offscreen): a scale bar and a magnification from
the slide's resolution that follow the zoom, an overview inset that moves the view, a larger slide
pane, and a table row that centres the slide on its tile."""

from __future__ import annotations

import math
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_fixtures import make_slide
from app_studio import RUN_TIMEOUT_MS, Studio, settle
from PySide6.QtCore import QPoint, Qt

from app.core.slide_display import SlideDisplay
from app.core.slide_scale import magnification, readout, scale_bar
from app.views.main_window import MainWindow
from app.views.slide_view import CONTEXT_TILES, SlideView

DIMS = (4096, 3072)  # level-0 pixels
FOOTPRINT = 128.0


def _display(mpp: float | None = 0.5) -> SlideDisplay:
    thumbnail = np.full((96, 128, 3), 200, np.uint8)
    thumbnail[20:70, 30:100] = (170, 80, 160)
    grid = (DIMS[1] // int(FOOTPRINT), DIMS[0] // int(FOOTPRINT))
    return SlideDisplay(thumbnail, DIMS, grid, FOOTPRINT, "slide.svs", None, mpp)


def _view(qtbot: object, mpp: float | None = 0.5) -> SlideView:
    view = SlideView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(640, 520)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    view.set_slide(_display(mpp))
    settle()
    return view


def _centre(view: SlideView) -> tuple[float, float]:
    c = view.viewbox.viewRect().center()
    return c.x(), c.y()


def test_scale_bar_lengths_are_round_and_fit() -> None:
    bar = scale_bar(2.0, max_pixels=120)  # 240 µm fit: 200 µm
    assert bar is not None and bar.microns == 200 and bar.pixels == 100 and bar.label == "200 µm"
    assert scale_bar(10.0).label == "1 mm"  # type: ignore[union-attr]
    assert scale_bar(0.004, max_pixels=120).label == "0.2 µm"  # type: ignore[union-attr]
    assert scale_bar(math.nan) is None and scale_bar(0.0) is None
    for um in (0.013, 0.25, 0.5, 3.7, 42.0):
        b = scale_bar(um)
        assert b is not None and 40 <= b.pixels <= 120, (um, b)
    assert magnification(0.25) == pytest.approx(40) and magnification(0.5) == pytest.approx(20)
    assert readout(0.5, 1.0) == "≈ 20× · 0.5 µm/px" and readout(0.5, 4.0) == "≈ 5.0× · 2 µm/px"
    assert "does not record its resolution" in readout(None, 8.0) and "1:8" in readout(None, 8.0)


def test_the_slide_display_carries_the_slides_resolution(tmp_path: Path) -> None:
    from engine import open_slide_source

    slide = make_slide(tmp_path / "s.tif", size=(512, 384), mpp=0.5)
    assert SlideDisplay.of(open_slide_source(slide, 32, None)).mpp == pytest.approx(0.5)


def test_the_scale_bar_and_magnification_follow_the_zoom(qtbot: object) -> None:
    view = _view(qtbot)
    overlay = view.scale_overlay
    assert overlay.isVisible() and overlay.bar is not None
    whole = overlay.bar.microns
    downsample = view.screen_downsample
    assert overlay.readout == readout(0.5, downsample)
    assert overlay.bar.pixels == pytest.approx(overlay.bar.microns / (0.5 * downsample))
    view.full_resolution()  # one slide pixel a screen pixel: the scanner's 20×
    qtbot.waitUntil(lambda: overlay.readout.startswith("≈ 20×"))  # type: ignore[attr-defined]
    assert overlay.readout.startswith("≈ 20×") and "0.5 µm/px" in overlay.readout
    assert overlay.bar is not None and overlay.bar.microns < whole and overlay.bar.label == "50 µm"
    # The bar sits in the canvas's lower left corner, over the slide.
    assert overlay.geometry().bottom() <= view.canvas.height() and overlay.x() < view.canvas.width() / 3


def test_without_a_resolution_the_pane_says_so_and_draws_no_bar(qtbot: object) -> None:
    view = _view(qtbot, mpp=None)
    assert view.scale_overlay.bar is None
    assert "does not record its resolution" in view.scale_overlay.readout


def test_the_overview_shows_where_the_view_is_and_moves_it(qtbot: object) -> None:
    view = _view(qtbot)
    assert not view.overview.isVisible(), "the whole slide is in view: no overview needed"
    view.full_resolution()
    qtbot.waitUntil(view.overview.isVisible)  # type: ignore[attr-defined]
    inset = view.overview
    assert inset.isVisible() and inset.width() <= 152 and inset.height() <= 152
    assert inset.view == view.viewbox.viewRect()
    before = view.viewbox.viewRect()
    # A click in the inset's lower right quarter moves the view there, at the same zoom.
    target = QPoint(int(inset.width() * 0.8), int(inset.height() * 0.8))
    qtbot.mouseClick(inset, Qt.MouseButton.LeftButton, pos=target)  # type: ignore[attr-defined]
    point = inset.to_slide(target.toPointF())
    after = view.viewbox.viewRect()
    assert after.width() == pytest.approx(before.width()) and after.height() == pytest.approx(before.height())
    assert _centre(view) == pytest.approx((point.x(), point.y()), abs=1.0)
    assert point.x() > DIMS[0] * 0.7 and point.y() > DIMS[1] * 0.7


def test_a_highlighted_tile_is_centred_with_some_context(qtbot: object) -> None:
    view = _view(qtbot)
    view.highlight(20, 25)  # following the newest tile: the view stays
    before = view.viewbox.viewRect()
    assert view.viewbox.viewRect() == before
    view.highlight(20, 25, centre=True)
    tile_centre = ((25 + 0.5) * FOOTPRINT, (20 + 0.5) * FOOTPRINT)
    assert _centre(view) == pytest.approx(tile_centre, abs=1.0)
    shown = view.viewbox.viewRect()
    assert min(shown.width(), shown.height()) == pytest.approx(CONTEXT_TILES * FOOTPRINT, rel=0.02)
    # A closer zoom chosen by the user is kept.
    view.full_resolution()
    close = view.viewbox.viewRect()
    view.highlight(3, 4, centre=True)
    assert view.viewbox.viewRect().width() == pytest.approx(close.width(), rel=0.01)
    assert _centre(view) == pytest.approx((4.5 * FOOTPRINT, 3.5 * FOOTPRINT), abs=1.0)


def test_the_slide_pane_is_large_at_1280_by_800(qtbot: object) -> None:
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.resize(1280, 760)
    window.show()
    qtbot.waitExposed(window)  # type: ignore[attr-defined]
    window.set_source_title("slide.svs")
    assert not window.commands.large_slide.isEnabled(), "no slide open"
    window.show_slide(_display())
    settle()
    column = window.panes.image_split.height()
    assert window.slide_view.height() >= 0.55 * column, "the slide takes most of the column"
    assert window.minimumSizeHint().width() <= 1280, "a slide open, the window still fits 1280 px"
    window.commands.large_slide.trigger()  # L, or the pane's "Large" button
    settle()
    assert window.slide_view.large_button.isChecked()
    canvas = window.slide_view.canvas
    assert canvas.width() >= 780 and canvas.height() >= 480, (canvas.width(), canvas.height())
    assert window.image_view.isVisible(), "the tile is shown beside the slide"
    assert window.image_view.x() > window.slide_view.x() + 700
    assert not window.table.isVisible() and not window.panes.bottom_tabs.isVisible()
    window.slide_view.large_button.click()  # and back
    settle()
    assert not window.commands.large_slide.isChecked() and window.table.isVisible()
    assert window.slide_view.canvas.width() < 600 and window.image_view.y() > window.slide_view.y()
    window.commands.large_slide.trigger()
    window.commands.panes["tabs"].trigger()  # a pane asked for: the large view ends
    assert not window.commands.large_slide.isChecked() and window.table.isVisible()
    window.commands.panes["tabs"].trigger()
    window.commands.large_slide.trigger()
    window.clear_results(10, 2)  # a folder opens: the slide pane goes, and its large view with it
    assert not window.commands.large_slide.isChecked() and not window.commands.large_slide.isEnabled()
    assert window.image_view.isVisibleTo(window)


def test_a_table_row_centres_the_slide_on_its_tile(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    slide = make_slide(tmp_path / "slide.tif", size=(1024, 768), mpp=0.5)
    c = studio.open()
    c.window.resize(1280, 760)
    c.window.show()
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.open_slide(str(slide))
    studio.run_to_end(c)
    view = c.window.slide_view
    view.fit()
    rows = c.window.table.model.rows
    row = rows[len(rows) // 2]
    assert row.tile is not None
    _, _, x, y, w, h = row.tile
    c.window.table.select_source_row(rows.index(row))  # the controller's own selection: no move
    assert _centre(view) != pytest.approx((x + w / 2, y + h / 2), abs=1.0)
    table = c.window.table.table
    index = c.window.table.proxy.mapFromSource(c.window.table.model.index(rows.index(row), 1))
    table.clearSelection()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualRect(index).center())  # type: ignore[attr-defined]
    assert c.controller.model.selected == row.position
    assert _centre(view) == pytest.approx((x + w / 2, y + h / 2), abs=1.0), "the slide is centred on the tile"
    assert view.tile_cursor.isVisible() and view.tile_cursor.rect().center().x() == pytest.approx(x + w / 2)
    assert index.data() == f"tile r{row.tile[1] + 1} c{row.tile[0] + 1}", (
        "a tile's name fits: its grid position, from 1"
    )
    # In the large slide view, N goes to the next tile and centres it.
    downsample = view.screen_downsample
    c.window.commands.large_slide.trigger()
    settle()
    assert _centre(view) == pytest.approx((x + w / 2, y + h / 2), abs=1.0), "the larger pane keeps the tile"
    assert view.screen_downsample == pytest.approx(downsample, rel=0.02), "and the zoom"
    following = rows[rows.index(row) + 1]
    assert following.tile is not None
    c.window.commands.next.trigger()
    assert c.controller.model.selected == following.position
    f = following.tile
    assert _centre(view) == pytest.approx((f[2] + f[4] / 2, f[3] + f[5] / 2), abs=1.0)
    c.window.commands.large_slide.trigger()
    # Clicking a tile in the slide selects its row without moving the slide.
    before = view.viewbox.viewRect()
    other = rows[0]
    assert other.tile is not None
    c.controller.selection.on_window_tile_clicked(other.tile[1], other.tile[0])
    assert c.controller.model.selected == other.position and view.viewbox.viewRect() == before


def test_a_resize_keeps_the_view(qtbot: object) -> None:
    view = _view(qtbot)
    view.resize(900, 700)  # fitted: the whole slide again
    settle()
    shown = view.viewbox.viewRect()
    assert shown.width() >= DIMS[0] and shown.height() >= DIMS[1]
    assert shown.width() <= DIMS[0] * 1.05 or shown.height() <= DIMS[1] * 1.05
    view.highlight(10, 12, centre=True)  # zoomed in on a tile: its centre and zoom stay
    downsample = view.screen_downsample
    view.resize(500, 420)
    settle()
    assert _centre(view) == pytest.approx((12.5 * FOOTPRINT, 10.5 * FOOTPRINT), abs=1.0)
    assert view.screen_downsample == pytest.approx(downsample, rel=0.02)
