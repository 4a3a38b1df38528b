"""The image with its uncertainty overlay: heat map, masked token sets, colour bar, zoom and pan."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal, Slot
from PySide6.QtGui import QAction, QColor, QPainterPath, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QGraphicsPathItem,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSlider,
    QToolButton,
    QWidget,
)

from app.core.names import RELIABLE_TOKENS, UNCERTAIN_TOKENS
from app.core.overlay import HEAT_COLORS, HEAT_STOPS, RELIABLE_COLOR, UNCERTAIN_COLOR, Overlay
from app.views._canvas import add_colorbar, image_canvas, set_plain, stack, two_line_title
from app.views._plain import plain_tooltip

HEAT_COLORMAP = pg.ColorMap(HEAT_STOPS, HEAT_COLORS.astype(np.uint8), name="uncertainty")


def _outline_path(cells: np.ndarray, grid: tuple[int, int], width: float, height: float) -> QPainterPath:
    path = QPainterPath()
    gh, gw = grid
    cw, ch = width / gw, height / gh
    for r, c in cells:
        path.addRect(QRectF(float(c) * cw + 0.5, float(r) * ch + 0.5, cw - 1.0, ch - 1.0))
    return path


class ImageView(QWidget):
    """Shows one image and its overlay; the controller calls :meth:`show_image`.

    Signals:
        opacityChanged(float): the user moved the opacity slider (0-1).
    """

    opacityChanged = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._overlay: Overlay | None = None
        self._size = (1.0, 1.0)

        self.title = two_line_title("")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.canvas, self.viewbox = image_canvas()
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.heat_item = pg.ImageItem(axisOrder="row-major")
        self.heat_item.setColorMap(HEAT_COLORMAP)
        self.heat_item.setZValue(1)
        self.uncertain_item = QGraphicsPathItem()
        self.uncertain_item.setPen(_pen(UNCERTAIN_COLOR))
        self.uncertain_item.setZValue(2)
        self.reliable_item = QGraphicsPathItem()
        self.reliable_item.setPen(_pen(RELIABLE_COLOR))
        self.reliable_item.setZValue(2)
        for item in (self.image_item, self.heat_item, self.uncertain_item, self.reliable_item):
            self.viewbox.addItem(item)
        self.colorbar = add_colorbar(self.canvas, HEAT_COLORMAP, "token uncertainty")

        self.overlay_box = QCheckBox("Overlay (O)")
        self.overlay_box.setChecked(True)
        self.heat_box = _check_action(self, "Uncertainty heat map", True)
        self.uncertain_box = _check_action(self, f"{UNCERTAIN_TOKENS} (red)", True)
        self.reliable_box = _check_action(self, f"{RELIABLE_TOKENS} (cyan)", False)
        self.layers_button = QToolButton()
        self.layers_button.setText("Layers")
        self.layers_button.setToolTip("Which parts of the overlay to draw")
        self.layers_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        layers = QMenu(self.layers_button)
        layers.addActions([self.heat_box, self.uncertain_box, self.reliable_box])
        self.layers_button.setMenu(layers)
        self.opacity_slider = QSlider(Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(45)
        self.opacity_slider.setToolTip("Heat-map opacity")
        self.opacity_slider.setMaximumWidth(120)
        self.opacity_label = QLabel("45 %")
        self.opacity_label.setMinimumWidth(36)
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Zoom to fit (F; scroll to zoom, drag to pan)")

        controls = QHBoxLayout()
        controls.addWidget(self.overlay_box)
        controls.addWidget(self.layers_button)
        controls.addStretch(1)
        controls.addWidget(QLabel("Opacity"))
        controls.addWidget(self.opacity_slider, 1)
        controls.addWidget(self.opacity_label)
        controls.addWidget(self.fit_button)
        stack(self, self.title, self.canvas, controls)

        self.opacity_slider.valueChanged.connect(self._on_opacity_slider_changed)
        for action in (self.overlay_box, self.heat_box, self.uncertain_box, self.reliable_box):
            action.toggled.connect(self._refresh_layers)
        self.fit_button.clicked.connect(self.fit)
        self._refresh_layers()

    # -- public API ---------------------------------------------------------------------------
    def show_image(
        self,
        image: np.ndarray,
        overlay: Overlay | None,
        title: str,
        keep_view: bool = False,
        levels: tuple[float, float] | None = None,
    ) -> None:
        """Display ``image`` (H, W, 3 uint8) with ``overlay`` (None: no overlay available).

        Args:
            levels: heat-map colour range; the image's own min-max when None. The controller passes
                a range shared by the whole stream so colours mean the same on every image.
        """
        h, w = image.shape[:2]
        resized = (float(w), float(h)) != self._size
        self._size = (float(w), float(h))
        self._overlay = overlay
        set_plain(self.title, title)
        self.title.setToolTip(plain_tooltip(title))  # the whole title, a long name whole
        self.image_item.setImage(image, autoLevels=False, levels=(0, 255))
        self.image_item.setRect(QRectF(0, 0, w, h))
        if overlay is not None and overlay.uncertainty is not None:
            lo, hi = levels if levels is not None else overlay.levels()
            self.heat_item.setImage(overlay.uncertainty.astype(np.float32), autoLevels=False, levels=(lo, hi))
            self.heat_item.setRect(QRectF(0, 0, w, h))
            if tuple(self.colorbar.levels()) != (lo, hi):  # re-laying out the bar's axis is not free
                self.colorbar.setLevels((lo, hi))
        else:
            self.heat_item.clear()
        if overlay is not None:
            self.uncertain_item.setPath(_outline_path(overlay.token_cells("uncertain"), overlay.grid, w, h))
            self.reliable_item.setPath(_outline_path(overlay.token_cells("reliable"), overlay.grid, w, h))
        else:
            self.uncertain_item.setPath(QPainterPath())
            self.reliable_item.setPath(QPainterPath())
        self._refresh_layers()
        if resized or not keep_view:
            self.fit()

    def clear(self, message: str = "No image selected") -> None:
        set_plain(self.title, message)
        self._overlay = None
        self.image_item.clear()
        self.heat_item.clear()
        self.uncertain_item.setPath(QPainterPath())
        self.reliable_item.setPath(QPainterPath())
        self._refresh_layers()

    def set_opacity(self, value: float) -> None:
        self.opacity_slider.setValue(round(value * 100))

    @property
    def opacity(self) -> float:
        return self.opacity_slider.value() / 100.0

    @property
    def overlay_visible(self) -> bool:
        return self.overlay_box.isChecked()

    @Slot()
    def toggle_overlay(self) -> None:
        self.overlay_box.toggle()

    @Slot()
    def fit(self) -> None:
        self.viewbox.setRange(QRectF(0, 0, *self._size), padding=0.02)

    # -- internals ----------------------------------------------------------------------------
    @Slot(int)
    def _on_opacity_slider_changed(self, value: int) -> None:
        self.opacity_label.setText(f"{value} %")
        self._refresh_layers()
        self.opacityChanged.emit(value / 100.0)

    @Slot()
    def _refresh_layers(self) -> None:
        on = self.overlay_box.isChecked()
        has_heat = self._overlay is not None and self._overlay.uncertainty is not None
        self.heat_item.setVisible(on and self.heat_box.isChecked() and has_heat)
        self.heat_item.setOpacity(self.opacity)
        # The bar keeps its room (only its opacity changes): hiding it would re-lay out the canvas
        # and move the image under the user's eyes.
        self.colorbar.setOpacity(1.0 if on and has_heat else 0.0)
        self.uncertain_item.setVisible(on and self.uncertain_box.isChecked())
        self.reliable_item.setVisible(on and self.reliable_box.isChecked())
        for widget in (self.layers_button, self.opacity_slider):
            widget.setEnabled(on)


def _check_action(parent: QWidget, text: str, checked: bool) -> QAction:
    action = QAction(text, parent, checkable=True)
    action.setChecked(checked)
    return action


def _pen(rgb: tuple[int, int, int]) -> QPen:
    pen = QPen(QColor(*rgb))
    pen.setWidthF(1.5)
    pen.setCosmetic(True)
    return pen
