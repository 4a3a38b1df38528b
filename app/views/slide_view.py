"""A whole slide, read from its pyramid as you zoom, with the tissue mask and the tile heat map.

The scene is in level-0 pixels. The thumbnail covers the slide; when the view shows more detail
than the thumbnail has, the view asks (``regionRequested``) for the visible rectangle at screen
resolution and the engine worker reads it from the pyramid level that suits it
(``read_region`` by level); the answer is drawn over the thumbnail. The heat map is the
positive-class probability per tile, filled or as tile outlines (so the morphology stays
visible), with a colour bar; the tissue mask the tiles were chosen from is drawn as an outline.
A scale bar and the magnification (from the slide's resolution) and, once zoomed in, an overview
of the whole slide with the view's rectangle sit over the canvas. A tile chosen in the table is
centred (:meth:`SlideView.highlight` with ``centre``), zoomed in far enough to see it.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QWidget,
)

from app.core.overlay import PROB_COLORS, PROB_STOPS, probability_rgba
from app.core.slide_display import SlideDisplay
from app.core.slide_scale import readout, scale_bar
from app.views._canvas import add_colorbar, image_canvas, set_plain, stack, two_line_title
from app.views._slide_overlays import INSET_SIDE, PAD, OverviewInset, ScaleBarOverlay

PROB_COLORMAP = pg.ColorMap(PROB_STOPS, PROB_COLORS.astype(np.uint8), name="probability")
HEAT_MODES = {"filled": "Heat map: filled", "outline": "Heat map: outlines", "off": "Heat map: off"}
OUTLINE_BINS = 10  # colour steps of the outline mode
TISSUE_MIN_ZOOM = 0.25  # the tissue outline is drawn until a thumbnail pixel spans 4 screen pixels
TISSUE_COLOR = (40, 200, 90)
DETAIL_DELAY_MS = 120  # wait for the zoom or pan to settle before reading the slide
CONTEXT_TILES = 8  # a centred tile is shown with this many tiles' width of context, at most


def smooth_mask(mask: np.ndarray, size: int = 5) -> np.ndarray:
    """A boolean mask with specks and pin-holes smaller than about ``size`` pixels removed (box majority)."""
    m = np.pad(mask.astype(np.float64), size // 2, mode="edge")
    c = np.cumsum(np.cumsum(m, axis=0), axis=1)
    c = np.pad(c, ((1, 0), (1, 0)))
    h, w = mask.shape
    box = c[size : size + h, size : size + w] - c[:h, size : size + w] - c[size : size + h, :w] + c[:h, :w]
    return np.asarray(box / (size * size) > 0.5)


def tissue_outline_rgba(mask: np.ndarray) -> np.ndarray:
    """``(H, W, 4)`` uint8: the boundary pixels of a boolean mask (smoothed) opaque, the rest clear."""
    m = smooth_mask(mask)
    inner = m.copy()
    inner[1:, :] &= m[:-1, :]
    inner[:-1, :] &= m[1:, :]
    inner[:, 1:] &= m[:, :-1]
    inner[:, :-1] &= m[:, 1:]
    edge = m & ~inner
    rgba = np.zeros((*m.shape, 4), np.uint8)
    rgba[edge] = (*TISSUE_COLOR, 255)
    return rgba


def _pen(rgb: tuple[int, int, int] | QColor, width: float) -> QPen:
    pen = QPen(rgb if isinstance(rgb, QColor) else QColor(*rgb))
    pen.setCosmetic(True)
    pen.setWidthF(width)
    return pen


class SlideView(QWidget):
    """The slide; the controller calls :meth:`set_slide`, :meth:`set_values` and :meth:`set_region`.

    Signals:
        tileClicked(int, int): the user clicked grid cell (row, col).
        regionRequested(int, int, int, int, int): level-0 rectangle (x, y, width, height) wanted
            at ``max_side`` pixels (the last argument).
    """

    tileClicked = Signal(int, int)
    regionRequested = Signal(int, int, int, int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values = np.zeros((0, 0))
        self._footprint = 1.0  # tile side in level-0 pixels
        self._dims = (1, 1)  # level-0 (width, height)
        self._thumb_width = 1
        self._mpp: float | None = None  # level-0 microns per pixel
        self._pending_rect: tuple[int, int, int, int] | None = None
        # What a resize keeps: the whole slide (after Fit), else the view's centre and zoom.
        self._box_size = (0.0, 0.0)
        self._fitted, self._fitting = True, False
        self._kept: tuple[float, float, float] | None = None  # centre x, y and level-0 px per screen px
        self.title = two_line_title("No slide open")
        self.canvas, self.viewbox = image_canvas()
        self.thumb_item = pg.ImageItem(axisOrder="row-major")
        self.detail_item = pg.ImageItem(axisOrder="row-major")
        self.detail_item.setZValue(0.5)
        self.heat_item = pg.ImageItem(axisOrder="row-major")
        self.heat_item.setZValue(1)
        self.tissue_item = pg.ImageItem(axisOrder="row-major")
        self.tissue_item.setZValue(1.5)
        self.outline_items = [QGraphicsPathItem() for _ in range(OUTLINE_BINS)]
        for i, item in enumerate(self.outline_items):
            t = (i + 0.5) / OUTLINE_BINS
            colour = [int(np.interp(t, PROB_STOPS, PROB_COLORS[:, c])) for c in range(3)]
            item.setPen(_pen((colour[0], colour[1], colour[2]), 2.0))
            item.setZValue(1.2)
        self.tile_cursor = QGraphicsRectItem()
        self.tile_cursor.setPen(_pen((255, 220, 0), 2.5))
        self.tile_cursor.setZValue(2)
        self.tile_cursor.setVisible(False)
        for image in (self.thumb_item, self.detail_item, self.heat_item, self.tissue_item):
            self.viewbox.addItem(image)
        self.viewbox.addItem(self.tile_cursor)
        for outline in self.outline_items:
            self.viewbox.addItem(outline)
        self.colorbar = add_colorbar(self.canvas, PROB_COLORMAP, "P(positive class)")
        self.mode_combo = QComboBox()
        for key, text in HEAT_MODES.items():
            self.mode_combo.addItem(text, key)
        self.mode_combo.setToolTip("Outlines keep the tissue visible under the heat map")
        self.tissue_box = QCheckBox("Tissue")
        self.tissue_box.setChecked(True)
        self.tissue_box.setToolTip("Outline of the tissue the tiles were chosen from (green)")
        self.opacity_slider = QSlider(Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(35)
        self.opacity_slider.setMinimumWidth(60)
        self.opacity_slider.setMaximumWidth(110)
        self.opacity_slider.setToolTip("Heat-map opacity")
        self.opacity_label = QLabel("35 %")
        self.counts = QLabel("")
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Show the whole slide")
        self.full_button = QPushButton("1:1")
        self.full_button.setToolTip("Zoom to full resolution (one slide pixel per screen pixel, Z)")
        self.large_button = QPushButton("Large")
        self.large_button.setCheckable(True)
        self.large_button.setToolTip("The slide and the tile beside it fill the window; again to go back (L)")
        for button in (self.fit_button, self.full_button, self.large_button):
            button.setMaximumWidth(button.fontMetrics().horizontalAdvance(button.text()) + 24)
        controls = QHBoxLayout()
        # "1234 tiles" whole ("0 tiles proc…" was cut) and short: the row fits a 1280-px window
        self.counts.setMinimumWidth(self.counts.fontMetrics().horizontalAdvance("0000 tiles") + 4)
        self.counts.setToolTip("Tiles processed so far")
        controls.addWidget(self.counts, 1)
        for w in (self.mode_combo, self.tissue_box, self.opacity_slider, self.opacity_label):
            controls.addWidget(w)
        controls.addWidget(self.fit_button)
        controls.addWidget(self.full_button)
        controls.addWidget(self.large_button)
        stack(self, self.title, self.canvas, controls)
        self.scale_overlay = ScaleBarOverlay(self.canvas)
        self.overview = OverviewInset(self.canvas)
        self.overview.setVisible(False)
        self.overview.centreRequested.connect(self.centre_on)
        self.viewbox.sigResized.connect(self._place_overlays)
        self._detail_timer = QTimer(self)
        self._detail_timer.setSingleShot(True)
        self._detail_timer.setInterval(DETAIL_DELAY_MS)
        self._detail_timer.timeout.connect(self._request_detail)
        self.viewbox.sigRangeChanged.connect(self._on_viewbox_range_changed)
        self.opacity_slider.valueChanged.connect(self._on_opacity_slider_changed)
        self.mode_combo.currentIndexChanged.connect(self._redraw)
        self.tissue_box.toggled.connect(self._update_overlays)
        self.fit_button.clicked.connect(self.fit)
        self.full_button.clicked.connect(self.full_resolution)
        self.canvas.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.heat_item.setOpacity(0.35)

    # -- public API ---------------------------------------------------------------------------
    def set_slide(self, display: SlideDisplay) -> None:
        """Show a new slide (:class:`~app.core.slide_display.SlideDisplay` says what it holds)."""
        thumbnail, dimensions, grid = display.thumbnail, display.dimensions, display.grid
        footprint, title, tissue = display.footprint, display.title, display.tissue
        set_plain(self.title, title)
        self.colorbar.getAxis("left").setLabel(f"P({display.positive})")  # "P(tumor)", the class it maps
        self._dims = (max(1, int(dimensions[0])), max(1, int(dimensions[1])))
        self._footprint = max(float(footprint), 1e-6)
        self._thumb_width = max(1, thumbnail.shape[1])
        self._mpp = display.mpp if display.mpp is not None and display.mpp > 0 else None
        self._values = np.full(grid, np.nan)
        self.overview.set_slide(thumbnail, self._dims, self._inset_side())
        rect = QRectF(0, 0, *self._dims)
        self.thumb_item.setImage(thumbnail, autoLevels=False, levels=(0, 255))
        self.thumb_item.setRect(rect)
        self.detail_item.clear()
        self._pending_rect = None
        if tissue is not None and tissue.size:
            self.tissue_item.setImage(tissue_outline_rgba(tissue), autoLevels=False, levels=(0, 255))
            self.tissue_item.setRect(rect)
        else:
            self.tissue_item.clear()
        self._redraw()
        self.tile_cursor.setVisible(False)
        self.fit()

    def set_values(self, cells: list[tuple[int, int, float]]) -> None:
        """Fill grid cells ``(row, col, positive probability)``."""
        if self._values.size == 0 or not cells:
            return
        for r, c, v in cells:
            if 0 <= r < self._values.shape[0] and 0 <= c < self._values.shape[1]:
                self._values[r, c] = v
        self._redraw()

    def set_region(self, x: int, y: int, width: int, height: int, rgb: np.ndarray) -> None:
        """Draw a rectangle read from the pyramid (dropped when the view has moved on since)."""
        if self._pending_rect != (x, y, width, height):
            return
        self.detail_item.setImage(rgb, autoLevels=False, levels=(0, 255))
        self.detail_item.setRect(QRectF(x, y, width, height))

    def highlight(self, row: int, col: int, centre: bool = False) -> None:
        """Mark tile (row, col); ``centre``: also centre the view on it, zoomed in so that at most
        :data:`CONTEXT_TILES` tiles fit across the view (a closer zoom is kept)."""
        f = self._footprint
        self.tile_cursor.setRect(QRectF(col * f, row * f, f, f))
        self.tile_cursor.setVisible(True)
        if centre:
            view = self.viewbox.viewRect()
            shrink = min(1.0, CONTEXT_TILES * f / max(min(view.width(), view.height()), 1e-6))
            width, height = view.width() * shrink, view.height() * shrink
            middle = self.tile_cursor.rect().center()
            self.viewbox.setRange(
                QRectF(middle.x() - width / 2, middle.y() - height / 2, width, height), padding=0
            )

    @Slot(float, float)
    def centre_on(self, x: float, y: float) -> None:
        """Move the view (its zoom kept) so that level-0 point (x, y) is in its middle."""
        view = self.viewbox.viewRect()
        self.viewbox.setRange(view.translated(x - view.center().x(), y - view.center().y()), padding=0)

    @Slot()
    def fit(self) -> None:
        self._fitting = True
        self.viewbox.setRange(QRectF(0, 0, *self._dims), padding=0.02)
        self._fitting = False

    @Slot()
    def full_resolution(self) -> None:
        """One level-0 pixel per screen pixel, centred on the highlighted tile or the view's centre."""
        if self.tile_cursor.isVisible():
            centre = self.tile_cursor.rect().center()
        else:
            centre = self.viewbox.viewRect().center()
        w, h = max(self.viewbox.width(), 1.0), max(self.viewbox.height(), 1.0)
        self.viewbox.setRange(QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h), padding=0)

    @Slot()
    def cycle_heat_mode(self) -> None:
        """Filled, outlines, off, filled, ... (hotkey H)."""
        self.mode_combo.setCurrentIndex((self.mode_combo.currentIndex() + 1) % self.mode_combo.count())

    @property
    def values(self) -> np.ndarray:
        return self._values.copy()

    @property
    def screen_downsample(self) -> float:
        """Level-0 pixels per screen pixel in the current view."""
        width: float = self.viewbox.viewRect().width()
        return width / max(float(self.viewbox.width()), 1.0)

    # -- drawing ------------------------------------------------------------------------------
    @Slot()
    def _redraw(self) -> None:
        rows, cols = self._values.shape
        mode = str(self.mode_combo.currentData())
        if rows == 0 or cols == 0:
            self.heat_item.clear()
            for item in self.outline_items:
                item.setPath(QPainterPath())
            return
        filled = mode == "filled"
        self.heat_item.setVisible(filled)
        if filled:
            self.heat_item.setImage(probability_rgba(self._values), autoLevels=False, levels=(0, 255))
            self.heat_item.setRect(QRectF(0, 0, cols * self._footprint, rows * self._footprint))
        paths = [QPainterPath() for _ in self.outline_items]
        if mode == "outline":
            f = self._footprint
            inset = f * 0.04
            for r, c in zip(*np.nonzero(np.isfinite(self._values)), strict=True):
                b = min(int(self._values[r, c] * OUTLINE_BINS), OUTLINE_BINS - 1)
                paths[b].addRect(QRectF(c * f + inset, r * f + inset, f - 2 * inset, f - 2 * inset))
        for item, path in zip(self.outline_items, paths, strict=True):
            item.setPath(path)
        self.colorbar.setVisible(mode != "off")
        done = int(np.isfinite(self._values).sum())
        self.counts.setText(f"{done} tiles")

    @Slot(int)
    def _on_opacity_slider_changed(self, value: int) -> None:
        self.opacity_label.setText(f"{value} %")
        self.heat_item.setOpacity(value / 100.0)

    @Slot()
    def _on_viewbox_range_changed(self) -> None:
        self._detail_timer.start()
        if self._size_now() == self._box_size:  # moved, not resized: a resize keeps this view
            centre = self.viewbox.viewRect().center()
            self._kept = (centre.x(), centre.y(), self.screen_downsample)
            self._fitted = self._fitting
        self._update_overlays()

    def _size_now(self) -> tuple[float, float]:
        return (float(self.viewbox.width()), float(self.viewbox.height()))

    def _keep_view(self) -> None:
        """After a resize (the large view, a splitter): the whole slide again, or the same centre at
        the same zoom (more or less of the slide around it)."""
        self._box_size = self._size_now()
        if self._fitted:
            self.fit()
        elif self._kept is not None:
            x, y, downsample = self._kept
            width, height = self._box_size[0] * downsample, self._box_size[1] * downsample
            self.viewbox.setRange(QRectF(x - width / 2, y - height / 2, width, height), padding=0)

    # -- scale bar and overview ---------------------------------------------------------------
    def _inset_side(self) -> int:
        return int(min(INSET_SIDE, max(self.canvas.width(), 1) / 4, max(self.canvas.height(), 1) / 3))

    def _viewbox_rect(self) -> QRectF:
        """The view box's area in the canvas's coordinates."""
        mapped = self.canvas.mapFromScene(self.viewbox.sceneBoundingRect()).boundingRect()
        return QRectF(mapped.translated(self.canvas.viewport().pos()))

    @Slot()
    def _place_overlays(self) -> None:
        self._keep_view()
        self.overview.set_side(self._inset_side())
        self._update_overlays()

    def _update_overlays(self) -> None:
        downsample = self.screen_downsample
        mpp = self._mpp
        bar = scale_bar(mpp * downsample) if mpp is not None else None
        self.scale_overlay.set_scale(bar, readout(mpp, downsample) if self._values.size else "")
        area = self._viewbox_rect()
        self.scale_overlay.move(
            int(area.left()) + PAD, int(area.bottom()) - self.scale_overlay.height() - PAD
        )
        self.scale_overlay.raise_()
        view = self.viewbox.viewRect()
        width, height = self._dims
        zoomed_in = view.width() < width * 0.98 or view.height() < height * 0.98
        self.overview.setVisible(bool(self._values.size) and zoomed_in)
        # The tissue outline comes from the thumbnail: zoomed in past its resolution it is blocks
        # around every nucleus (at 1:1), so it is drawn only where it means something.
        coarse = downsample >= TISSUE_MIN_ZOOM * width / max(self._thumb_width, 1)
        self.tissue_item.setVisible(self.tissue_box.isChecked() and coarse)
        self.overview.set_view(view)
        self.overview.move(int(area.left()) + PAD, int(area.top()) + PAD)
        self.overview.raise_()

    @Slot()
    def _request_detail(self) -> None:
        """Ask for the visible part at screen resolution when the thumbnail is too coarse for it."""
        width, height = self._dims
        view = self.viewbox.viewRect().intersected(QRectF(0, 0, width, height))
        thumb_downsample = width / self._thumb_width
        if view.isEmpty() or self.screen_downsample >= thumb_downsample * 0.9:
            self.detail_item.clear()
            self._pending_rect = None
            return
        x, y = int(view.left()), int(view.top())
        w, h = int(np.ceil(view.width())) + 1, int(np.ceil(view.height())) + 1
        w, h = min(w, width - x), min(h, height - y)
        side = int(max(w, h) / max(self.screen_downsample, 1e-6))
        rect = (x, y, w, h)
        if rect == self._pending_rect:
            return
        self._pending_rect = rect
        self.regionRequested.emit(x, y, w, h, max(16, min(side, 4096)))

    def _on_scene_clicked(self, event: object) -> None:
        pos = event.scenePos()  # type: ignore[attr-defined]
        point: QPointF = self.viewbox.mapSceneToView(pos)
        if self._values.size == 0:
            return
        row, col = int(point.y() // self._footprint), int(point.x() // self._footprint)
        if 0 <= row < self._values.shape[0] and 0 <= col < self._values.shape[1]:
            self.tileClicked.emit(row, col)
