"""A slide's thumbnail with the tile-prediction heat map that fills in as tiles are processed."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal, Slot
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import (
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QSlider,
    QWidget,
)

from app.overlay import PROB_COLORS, PROB_STOPS, probability_rgba
from app.views._canvas import add_colorbar, image_canvas, stack, two_line_title

PROB_COLORMAP = pg.ColorMap(PROB_STOPS, PROB_COLORS.astype(np.uint8), name="probability")


class SlideView(QWidget):
    """Thumbnail + heat map; the controller calls :meth:`set_slide` and :meth:`set_values`.

    Signals:
        tileClicked(int, int): the user clicked grid cell (row, col).
    """

    tileClicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values = np.zeros((0, 0))
        self._footprint = 1.0  # tile side in thumbnail pixels
        self.title = two_line_title("No slide open")
        self.canvas, self.viewbox = image_canvas()
        self.thumb_item = pg.ImageItem(axisOrder="row-major")
        self.heat_item = pg.ImageItem(axisOrder="row-major")
        self.heat_item.setZValue(1)
        self.tile_cursor = QGraphicsRectItem()
        pen = QPen(QColor(255, 220, 0))
        pen.setCosmetic(True)
        pen.setWidthF(2)
        self.tile_cursor.setPen(pen)
        self.tile_cursor.setZValue(2)
        self.tile_cursor.setVisible(False)
        for item in (self.thumb_item, self.heat_item, self.tile_cursor):
            self.viewbox.addItem(item)
        self.colorbar = add_colorbar(self.canvas, PROB_COLORMAP, "P(positive class)")
        self.opacity_slider = QSlider(Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(55)
        self.opacity_label = QLabel("55 %")
        self.counts = QLabel("")
        self.counts.setMinimumWidth(140)
        controls = QHBoxLayout()
        controls.addWidget(self.counts)
        controls.addStretch(1)
        controls.addWidget(QLabel("Heat-map opacity"))
        controls.addWidget(self.opacity_slider, 1)
        controls.addWidget(self.opacity_label)
        stack(self, self.title, self.canvas, controls)
        self.opacity_slider.valueChanged.connect(self._on_opacity_slider_changed)
        self.canvas.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.heat_item.setOpacity(0.55)

    def set_slide(
        self, thumbnail: np.ndarray, grid: tuple[int, int], footprint_px: float, title: str
    ) -> None:
        """Show a new slide: its thumbnail, an empty heat map of ``grid`` (rows, cols) cells."""
        self.title.setText(title)
        self._footprint = footprint_px
        self._values = np.full(grid, np.nan)
        h, w = thumbnail.shape[:2]
        self.thumb_item.setImage(thumbnail, autoLevels=False, levels=(0, 255))
        self.thumb_item.setRect(QRectF(0, 0, w, h))
        self._redraw()
        self.tile_cursor.setVisible(False)
        self.viewbox.setRange(QRectF(0, 0, w, h), padding=0.02)

    def set_values(self, cells: list[tuple[int, int, float]]) -> None:
        """Fill grid cells ``(row, col, positive probability)``."""
        if self._values.size == 0 or not cells:
            return
        for r, c, v in cells:
            if 0 <= r < self._values.shape[0] and 0 <= c < self._values.shape[1]:
                self._values[r, c] = v
        self._redraw()

    def reset_values(self) -> None:
        self._values[:] = np.nan
        self._redraw()

    def highlight(self, row: int, col: int) -> None:
        f = self._footprint
        self.tile_cursor.setRect(QRectF(col * f, row * f, f, f))
        self.tile_cursor.setVisible(True)

    @property
    def values(self) -> np.ndarray:
        return self._values.copy()

    def _redraw(self) -> None:
        rows, cols = self._values.shape
        if rows == 0 or cols == 0:
            self.heat_item.clear()
            return
        self.heat_item.setImage(probability_rgba(self._values), autoLevels=False, levels=(0, 255))
        self.heat_item.setRect(QRectF(0, 0, cols * self._footprint, rows * self._footprint))
        done = int(np.isfinite(self._values).sum())
        self.counts.setText(f"{done} tiles processed")

    @Slot(int)
    def _on_opacity_slider_changed(self, value: int) -> None:
        self.opacity_label.setText(f"{value} %")
        self.heat_item.setOpacity(value / 100.0)

    def _on_scene_clicked(self, event: object) -> None:
        pos = event.scenePos()  # type: ignore[attr-defined]
        point: QPointF = self.viewbox.mapSceneToView(pos)
        if self._footprint <= 0 or self._values.size == 0:
            return
        row, col = int(point.y() // self._footprint), int(point.x() // self._footprint)
        if 0 <= row < self._values.shape[0] and 0 <= col < self._values.shape[1]:
            self.tileClicked.emit(row, col)
