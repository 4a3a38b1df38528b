"""Pieces the views share: a two-line title, a dark image canvas, a colour bar, an eliding label."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGraphicsItem, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app._engine import shown
from app.views._plain import plain_label, plain_tooltip


def two_line_title(text: str) -> QLabel:
    """A plain-text label of fixed two-line height: new text must not re-lay out (and repaint) the
    window; its captions hold file and class names, never markup (set them with :func:`set_plain`)."""
    title = plain_label(text)
    title.setWordWrap(True)
    title.setFixedHeight(title.fontMetrics().lineSpacing() * 2 + 4)
    title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    return title


def set_plain(label: QLabel, text: str) -> None:
    """Show ``text`` (names included) in a plain-text label, as the text it is."""
    label.setText(shown(text))


def image_canvas() -> tuple[pg.GraphicsLayoutWidget, pg.ViewBox]:
    """A dark canvas with one aspect-locked, y-down view box for images."""
    canvas = pg.GraphicsLayoutWidget()
    canvas.setBackground("#202124")
    viewbox = canvas.addViewBox(row=0, col=0, lockAspect=True, invertY=True, enableMenu=False)
    return canvas, viewbox


def cache_axes(item: pg.GraphicsItem) -> None:
    """Draw each axis under ``item`` once into a pixmap and reuse it until the axis changes.

    A pyqtgraph axis with grid lines spans its whole plot: every new curve or image repainted
    every axis, tick labels included, and those repaints grew into the longest stalls of a run
    (issue 30). The axes here change only when their range or size does.
    """
    for child in [item, *item.childItems()]:
        if isinstance(child, pg.AxisItem):
            child.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        elif child is not item:
            cache_axes(child)


def add_colorbar(canvas: pg.GraphicsLayoutWidget, colormap: pg.ColorMap, label: str) -> pg.ColorBarItem:
    """A non-interactive colour bar right of the view box."""
    bar = pg.ColorBarItem(
        values=(0.0, 1.0), colorMap=colormap, interactive=False, width=14, label=label, rounding=1e-9
    )
    canvas.addItem(bar, row=0, col=1)
    cache_axes(bar)
    return bar


def stack(owner: QWidget, title: QLabel, canvas: pg.GraphicsLayoutWidget, controls: QHBoxLayout) -> None:
    """Lay ``owner`` out: the title, the canvas (taking the room) and the row of controls."""
    layout = QVBoxLayout(owner)
    layout.setContentsMargins(2, 2, 2, 2)
    layout.addWidget(title)
    layout.addWidget(canvas, 1)
    layout.addLayout(controls)


class ElidedLabel(QLabel):
    """A one-line label that shortens its text with "…" instead of widening the window.

    The full text is the tooltip, so nothing is lost on a small screen.
    """

    def __init__(
        self,
        text: str = "",
        parent: QWidget | None = None,
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
    ) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._full = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(60)
        self.set_full_text(text)

    def set_full_text(self, text: str) -> None:
        self._full = shown(text)
        self.setToolTip(plain_tooltip(text))
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(self.width() - 4, 20))
        if shown != self.text():
            self.setText(shown)
