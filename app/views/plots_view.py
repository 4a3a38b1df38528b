"""Running plots: accuracy (with ground truth) or positive rate and confidence, plus per-segment bars."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QObject, Qt, QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget

from app.core.stats import PlotData
from app.views._canvas import cache_axes
from app.views._plain import plain_label

ADAPTED_COLOR = (31, 119, 180)
SOURCE_COLOR = (150, 150, 150)
CONFIDENCE_COLOR = (255, 127, 14)


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{v:02x}" for v in rgb)


KEY = (
    f"<span style='color:{_hex(ADAPTED_COLOR)}'>━ as decided</span>&nbsp; "
    f"<span style='color:{_hex(SOURCE_COLOR)}'>╍ original model</span>&nbsp; "
    f"<span style='color:{_hex(CONFIDENCE_COLOR)}'>━ mean confidence (right axis)</span>"
)
# The bar chart's key (as the running plot's): the adapted model's bar left of the source model's.
BAR_KEY = (
    f"<span style='color:{_hex(ADAPTED_COLOR)}'>■ as decided</span>&nbsp; "
    f"<span style='color:{_hex(SOURCE_COLOR)}'>■ original model</span>"
)
DATASET_TRUTH = "dataset labels"  # a labelled folder's truth (RunStatistics.truth)
GATE_STYLE = "color: #b3261e; background: #fdecea; border: 1px solid #b3261e; padding: 2px;"
Y_TOP = 1.02  # rates and accuracies live in [0, 1]: no headroom beyond that
UPDATES_DISABLED = Qt.WidgetAttribute.WA_UpdatesDisabled
PAINT, UPDATE_REQUEST = QEvent.Type.Paint, QEvent.Type.UpdateRequest
HELD_MS = 200  # the longest a plot's repaint waits for its turn (paint_in_turns)


class PlotsView(QWidget):
    """Two pyqtgraph plots fed with :class:`PlotData` by the controller.

    The running plot draws the adapted model over the source model (so the adapted line is never
    hidden) and the mean confidence on its own axis on the right: it is not an accuracy.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.running = pg.PlotWidget(background="w")
        self.segments = pg.PlotWidget(background="w")
        for plot in (self.running, self.segments):
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setYRange(0, Y_TOP, padding=0)
            plot.setMouseEnabled(x=True, y=False)
            plot.getPlotItem().setMenuEnabled(False)
        self.running.setLabel("bottom", "images processed")
        self.segments.setLabel("bottom", "stream segment (first image)")
        self.running.setClipToView(True)
        self.running.setDownsampling(auto=True, mode="peak")
        # The adapted line is wide and the source line dashed and thin on top of it, so where the
        # two agree both stay visible (the adapted colour shows between the dashes).
        self.adapted_curve = self.running.plot(pen=pg.mkPen(ADAPTED_COLOR, width=3.5), name="as decided")
        self.source_curve = self.running.plot(
            pen=pg.mkPen(SOURCE_COLOR, width=1.5, style=pg.QtCore.Qt.PenStyle.DashLine), name="original model"
        )
        self.source_curve.setZValue(2)
        # Mean confidence on a right-hand axis of its own, linked in x.
        item = self.running.getPlotItem()
        self.confidence_view = pg.ViewBox(enableMenu=False)
        self.confidence_view.setMouseEnabled(x=False, y=False)
        item.showAxis("right")
        item.scene().addItem(self.confidence_view)
        right = item.getAxis("right")
        right.linkToView(self.confidence_view)
        item.setLabel("right", "mean confidence", color=_hex(CONFIDENCE_COLOR))
        right.setPen(pg.mkPen(CONFIDENCE_COLOR))
        right.setTextPen(pg.mkPen(CONFIDENCE_COLOR))
        right.setGrid(False)  # the left axis draws the grid; one set of lines is enough
        self.confidence_view.setXLink(item)
        self.confidence_view.setYRange(0, Y_TOP, padding=0)
        self.confidence_curve = pg.PlotCurveItem(pen=pg.mkPen(CONFIDENCE_COLOR, width=1.5))
        self.confidence_view.addItem(self.confidence_curve)
        item.vb.sigResized.connect(self._sync_confidence_view)
        self.adapted_bars = pg.BarGraphItem(x=[], height=[], width=1, brush=ADAPTED_COLOR, name="as decided")
        self.source_bars = pg.BarGraphItem(
            x=[], height=[], width=1, brush=SOURCE_COLOR, name="original model"
        )
        self.segments.addItem(self.adapted_bars)
        self.segments.addItem(self.source_bars)
        for plot in (self.running, self.segments):
            cache_axes(plot.getPlotItem())
        # What every figure says when the applicability gate fired (hidden otherwise): the plots'
        # accuracies are figures too (they showed 100 % unmarked for a model that did not apply).
        self.caption = plain_label("")
        self.caption.setStyleSheet(GATE_STYLE)
        self.caption.setVisible(False)
        plots = QHBoxLayout()
        plots.addWidget(self.running, 3)
        plots.addWidget(self.segments, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.caption)
        layout.addLayout(plots, 1)
        self.data: PlotData | None = None
        self._waiting: PlotData | None = None  # the newest data, not drawn while the plots are not shown
        self._extent = 1
        self._quantity = "positive rate"
        self._titled = False
        # The plots' viewports, those painted once, those whose repaint waits (paint_in_turns).
        self._viewports = {plot.viewport() for plot in (self.running, self.segments)}
        self._painted: set[QObject] = set()
        self._held: list[QWidget] = []
        self._due = False
        for viewport in self._viewports:
            viewport.installEventFilter(self)
        self.set_data(None)

    def _sync_confidence_view(self) -> None:
        self.confidence_view.setGeometry(self.running.getPlotItem().vb.sceneBoundingRect())
        self.confidence_view.linkedViewChanged(self.running.getPlotItem().vb, self.confidence_view.XAxis)

    def paint_in_turns(self) -> None:
        """Paint each plot in an event of its own, after the window's next repaint, instead of
        all with it: what comes next changes their titles, labels and ranges, and each plot then
        draws its axes afresh. A new folder's first repaint drew both plots' axes with the newly
        shown work area (12-21 ms of the GUI thread's time in one event, issue 41). Until its
        turn a plot keeps the pixels it showed; only plots painted before are held."""
        for plot in (self.running, self.segments):
            viewport = plot.viewport()
            if (
                viewport in self._painted
                and viewport.isVisible()
                and not viewport.testAttribute(UPDATES_DISABLED)
            ):
                viewport.setAttribute(UPDATES_DISABLED, True)  # not setUpdatesEnabled: no repaint
                self._held.append(viewport)
        if self._held:
            self.window().installEventFilter(self)  # each of the window's repaints frees the next
            self._due = False
            QTimer.singleShot(HELD_MS, self, self._paint_held)  # at the latest

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == UPDATE_REQUEST and self._held and not self._due:
            self._due = True  # the next plot repaints after this repaint of the window
            QTimer.singleShot(0, self, self._paint_next)
        elif kind == PAINT and watched in self._viewports:
            self._painted.add(watched)
            watched.removeEventFilter(self)  # painted once is all it tells: no call a repaint after
        return super().eventFilter(watched, event)

    def _paint_next(self) -> None:
        """The first plot held, repainted with the window's next repaint."""
        self._due = False
        if self._held:
            viewport = self._held.pop(0)
            viewport.setAttribute(UPDATES_DISABLED, False)
            viewport.update()
        if not self._held:
            self.window().removeEventFilter(self)

    def _paint_held(self) -> None:
        while self._held:
            self._paint_next()

    def png(self) -> bytes:
        """The panel rendered to PNG bytes (with the newest data, drawn now if it waited)."""
        self._paint_held()
        self._draw_waiting()
        image = self.grab().toImage()
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")  # type: ignore[call-overload]
        buffer.close()
        return bytes(data.data())

    def set_extent(self, total: int, segment_size: int) -> None:
        """Fix the x axes to a stream of ``total`` images, so they are not re-laid out at every update."""
        self._extent = max(total, 1)
        self.running.setXRange(0, self._extent, padding=0.02)
        self.segments.setXRange(0, self._extent + 1, padding=0.02)
        self._title_segments(segment_size if total > 0 else 0)  # nothing open: no segment size to name

    def set_data(self, data: PlotData | None, labelled: bool | None = None) -> None:
        """Redraw from ``data`` (None clears the plots; ``labelled`` then says what they will show).

        Plots the window does not show (another tab in front, their pane collapsed) are not drawn:
        the newest data waits and is drawn when they are shown (:meth:`showEvent`), or when the
        report asks for their picture (:meth:`png`)."""
        self.data = data
        hidden = data is not None and not data.empty and not self.isVisibleTo(self.window())
        self._waiting = data if hidden else None
        if hidden:
            return
        self._draw(data, labelled)

    def showEvent(self, event: QShowEvent) -> None:
        self._draw_waiting()
        super().showEvent(event)

    def _draw_waiting(self) -> None:
        if self._waiting is not None:
            data, self._waiting = self._waiting, None
            self._draw(data, None)

    def _draw(self, data: PlotData | None, labelled: bool | None) -> None:
        caption = data.caption if data is not None else ""
        if caption != self.caption.text().removeprefix("⚠ "):
            self.caption.setText(f"⚠ {caption}" if caption else "")
            self.caption.setVisible(bool(caption))
        if data is None or data.empty:
            for curve in (self.adapted_curve, self.source_curve, self.confidence_curve):
                curve.setData([], [])
            self.adapted_bars.setOpts(x=[], height=[])
            self.source_bars.setOpts(x=[], height=[])
            if labelled is None:
                labelled = data is not None and data.labelled
            # A folder whose files are labelled is measured against its labels: the empty plots
            # are titled as they will be, so the first rows change no title (a title re-lays out
            # the plot and redraws its axes: the longest stall as a run began, issue 41).
            truth = data.truth if data is not None and data.truth else DATASET_TRUTH
            self._set_quantity(f"accuracy (against {truth})" if labelled else "positive rate", data)
            return
        against = f" (against {data.truth})" if data.truth else ""
        self._set_quantity(f"accuracy{against}" if data.labelled else "positive rate", data)
        self.adapted_curve.setData(data.x, data.adapted)
        self.source_curve.setData(data.x, data.source)
        self.confidence_curve.setData(data.x, data.confidence)
        width = data.segment_size * 0.4
        offset = data.segment_size * 0.2
        centres = data.segment_starts + (data.segment_size - 1) / 2.0
        self.adapted_bars.setOpts(x=centres - offset, height=data.segment_adapted, width=width)
        self.source_bars.setOpts(x=centres + offset, height=data.segment_source, width=width)
        end = float(np.max(data.x))
        if end > self._extent:  # more rows than announced (e.g. restored ones): grow in steps
            self.set_extent(int(end * 1.5), data.segment_size)

    def _set_quantity(self, quantity: str, data: PlotData | None) -> None:
        # Titles and labels are re-laid out text items: only touch them when they change.
        if quantity == self._quantity and self._titled:
            return
        self._quantity, self._titled = quantity, True
        self.running.setTitle(f"Running {quantity}<br><span style='font-size:8pt'>{KEY}</span>", color="k")
        self.running.setLabel("left", quantity.split(" (")[0])  # the title names the truth
        self._title_segments(data.segment_size if data is not None else 0)

    def _title_segments(self, size: int) -> None:
        """The bar chart's title with its key under it (which bar is which model); the truth is
        named once, in the running plot's title beside it (both titles did not fit at 1280 px)."""
        quantity = self._quantity.split(" (")[0].capitalize()
        title = f"{quantity} per {size} image{'s' if size != 1 else ''}" if size > 0 else "Per segment"
        self.segments.setTitle(f"{title}<br><span style='font-size:8pt'>{BAR_KEY}</span>", color="k")
