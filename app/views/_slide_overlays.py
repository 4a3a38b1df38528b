"""What the slide pane draws over its canvas: the scale bar with the magnification, and the overview.

Both are small widgets on the canvas's viewport (not items of the scene), so they keep their size
and place while the slide zooms and pans under them; :class:`~app.views.slide_view.SlideView`
places them and feeds them the view's zoom and rectangle.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from app.core.slide_scale import ScaleBar

PAD = 6
INSET_SIDE = 150  # the overview's longer side in screen pixels, at most
VIEW_COLOUR = QColor(255, 220, 0)  # the view's rectangle on the overview (the tile cursor's colour)


class ScaleBarOverlay(QWidget):
    """A scale bar of a round length (``200 µm``) over the read-out (``≈ 5.0× · 2.00 µm/px``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.bar: ScaleBar | None = None
        self.readout = ""

    def set_scale(self, bar: ScaleBar | None, readout: str) -> None:
        """Show ``bar`` (None: no bar, the slide has no resolution) and the read-out text."""
        if bar == self.bar and readout == self.readout:
            return
        self.bar, self.readout = bar, readout
        metrics = self.fontMetrics()
        width = metrics.horizontalAdvance(readout)
        if bar is not None:
            width = max(width, int(bar.pixels), metrics.horizontalAdvance(bar.label))
        lines = 2 if bar is not None else 1
        self.resize(width + 2 * PAD, lines * metrics.height() + (8 if bar is not None else 0) + 2 * PAD)
        self.setVisible(bool(readout))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(0, 0, 0, 150))
        painter.drawRoundedRect(QRectF(self.rect()), 4, 4)
        metrics = self.fontMetrics()
        painter.setPen(QColor(255, 255, 255))
        y = PAD + metrics.ascent()
        if self.bar is not None:
            painter.drawText(PAD, y, self.bar.label)
            top = PAD + metrics.height() + 2
            pen = QPen(QColor(255, 255, 255))
            pen.setWidthF(2.0)
            painter.setPen(pen)
            left, right = PAD, PAD + self.bar.pixels
            painter.drawLine(QPointF(left, top + 3), QPointF(right, top + 3))
            painter.drawLine(QPointF(left, top), QPointF(left, top + 6))
            painter.drawLine(QPointF(right, top), QPointF(right, top + 6))
            y = top + 8 + metrics.ascent()
        painter.setPen(QColor(255, 255, 255))
        painter.drawText(PAD, y, self.readout)
        painter.end()


class OverviewInset(QWidget):
    """The whole slide in small with the part the view shows; a click or drag moves the view there.

    Signals:
        centreRequested(float, float): centre the view on this level-0 point (x, y).
    """

    centreRequested = Signal(float, float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")
        self._image = QImage()
        self._dims = (1.0, 1.0)  # level-0 (width, height)
        self.view = QRectF()  # the view's level-0 rectangle

    def set_slide(self, thumbnail: np.ndarray, dimensions: tuple[int, int], side: int = INSET_SIDE) -> None:
        """The thumbnail ``(H, W, 3)`` uint8 of a slide of level-0 ``dimensions``, at most ``side`` px."""
        rgb = np.ascontiguousarray(thumbnail[..., :3], dtype=np.uint8)
        h, w = rgb.shape[:2]
        image = QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888)
        self._image = image.copy()  # own the pixels: the array may go
        self._dims = (float(max(dimensions[0], 1)), float(max(dimensions[1], 1)))
        self.set_side(side)

    def set_side(self, side: int) -> None:
        """Fit the overview in a ``side``-pixel square (its aspect is the slide's)."""
        width, height = self._dims
        scale = max(side, 24) / max(width, height)
        self.resize(max(int(width * scale), 8) + 2, max(int(height * scale), 8) + 2)

    def set_view(self, rect: QRectF) -> None:
        if rect != self.view:
            self.view = QRectF(rect)
            self.update()

    def to_slide(self, point: QPointF) -> QPointF:
        """A point of this widget in level-0 pixels."""
        width, height = self._dims
        return QPointF(
            (point.x() - 1) * width / max(self.width() - 2, 1),
            (point.y() - 1) * height / max(self.height() - 2, 1),
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        inner = QRectF(1, 1, self.width() - 2, self.height() - 2)
        painter.fillRect(QRectF(self.rect()), QColor(0, 0, 0, 180))
        if not self._image.isNull():
            painter.drawImage(inner, self._image)
        width, height = self._dims
        sx, sy = inner.width() / width, inner.height() / height
        shown = QRectF(
            inner.left() + self.view.left() * sx,
            inner.top() + self.view.top() * sy,
            self.view.width() * sx,
            self.view.height() * sy,
        ).intersected(inner)
        pen = QPen(VIEW_COLOUR)
        pen.setWidthF(2.0)
        painter.setPen(pen)
        painter.drawRect(shown.adjusted(0.5, 0.5, -0.5, -0.5) if shown.width() > 3 else shown)
        painter.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._move_to(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._move_to(event)

    def _move_to(self, event: QMouseEvent) -> None:
        point = self.to_slide(event.position())
        self.centreRequested.emit(point.x(), point.y())
        event.accept()
