"""The main window's panes, its status bar and its first size: typed parts of the window.

:class:`Panes` lays the views out (the welcome panel or the images on the left, the table over the
tabs on the right, the banners above both) and moves them (the slide pane, the large slide view,
a collapsed pane); :class:`StatusParts` is the status bar's phase, progress, project, reviewer and
model. Each is built from :class:`~app.views.window_base.Views` and owns what it makes.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import (
    QMainWindow,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QStatusBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.phase import Phase
from app.views._canvas import ElidedLabel
from app.views._plain import plain_label
from app.views.window_base import Views

TABS = ("plots", "metrics", "certificates", "log")  # the bottom tabs, in order
LOG_TAB = TABS.index("log")
PANES = ("images", "table", "tabs")  # what View ▸ (Ctrl+1/2/3) shows or collapses
SLIDE_SHARE = 0.62  # the slide's share of the image column's height while a slide is open
SLIDE_COLUMN_SHARE = 0.45  # the image column's share of the width, at least, while a slide is open
LARGE_SHARE = 0.66  # the slide's share of the width in the large slide view (the tile beside it)


class Panes:
    """The window's panes (see the module notes).

    Attributes:
        central: the window's central widget (banners over the split).
        image_split: the slide over the image (side by side in the large slide view).
        left: the welcome panel or ``image_split``.
        bottom_tabs: plots, metrics, certificates, log.
        right: the table over ``bottom_tabs``.
        main_split: ``left`` beside ``right``.
    """

    def __init__(self, views: Views) -> None:
        self._views = views
        self.image_split = QSplitter(Qt.Orientation.Vertical)
        self.image_split.addWidget(views.slide)
        self.image_split.addWidget(views.image)
        views.slide.setVisible(False)
        self.left = QStackedWidget()
        self.left.addWidget(views.welcome)
        self.left.addWidget(self.image_split)
        self.bottom_tabs = QTabWidget()
        for widget, title in zip(
            (views.plots, views.metrics, views.certificates, views.log),
            ("&Plots", "&Metrics", "&Certificates", "&Log"),
            strict=True,
        ):
            self.bottom_tabs.addTab(widget, title)
        self.right = QSplitter(Qt.Orientation.Vertical)
        self.right.addWidget(views.table)
        self.right.addWidget(self.bottom_tabs)
        self.right.setSizes([420, 300])
        self.main_split = QSplitter(Qt.Orientation.Horizontal)
        self.main_split.addWidget(self.left)
        self.main_split.addWidget(self.right)
        self.main_split.setSizes([490, 790])  # the table has ten columns
        self.central = QWidget()
        column = QVBoxLayout(self.central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(views.banners)
        column.addWidget(self.main_split, 1)
        column.addWidget(views.outlook)
        self._before_large: tuple[list[int], list[int]] | None = None  # the splits' sizes before

    def pane(self, name: str) -> QWidget:
        """The widget of a pane that View ▸ shows or collapses ("images", "table", "tabs")."""
        return {"images": self.left, "table": self._views.table, "tabs": self.bottom_tabs}[name]

    def show_work(self, shown: bool) -> None:
        """The images (something is open) or the welcome panel."""
        self.left.setCurrentWidget(self.image_split if shown else self._views.welcome)

    def badge_log_tab(self, unseen: int, errors: bool = False) -> None:
        """The log tab's title counts the warnings and errors not seen yet (red with an error)."""
        bar = self.bottom_tabs.tabBar()
        if not unseen:
            self.bottom_tabs.setTabText(LOG_TAB, "&Log")
            bar.setTabTextColor(LOG_TAB, self.bottom_tabs.palette().windowText().color())
            return
        self.bottom_tabs.setTabText(LOG_TAB, f"&Log ({unseen} new)")
        bar.setTabTextColor(LOG_TAB, QColor(179, 38, 30) if errors else QColor(154, 103, 0))

    def show_slide(self, shown: bool, window: QWidget) -> None:
        """Show the slide pane over the tile preview, with most of the column's height (or hide it)."""
        slide = self._views.slide
        was_shown = slide.isVisibleTo(window)
        slide.setVisible(shown)
        if shown and not was_shown:
            total = max(sum(self.image_split.sizes()), self.image_split.height(), 2)
            height = int(total * SLIDE_SHARE)
            self.image_split.setSizes([height, total - height])
            sizes = self.main_split.sizes()
            width = sum(sizes)
            left = min(int(width * SLIDE_COLUMN_SHARE), width - self.right.minimumSizeHint().width())
            if left > sizes[0]:  # a wide screen: the slide gets some of the table's room
                self.main_split.setSizes([left, width - left])

    @property
    def large(self) -> bool:
        return self._before_large is not None

    def set_large_slide(self, on: bool) -> None:
        """The large slide view: the slide and the tile beside it take the window (the table and the
        tabs make room; N/P, the review keys and a click on a tile still choose tiles), or back."""
        before = self._before_large
        if on and before is None:
            self.left.setVisible(True)
            self._before_large = (self.main_split.sizes(), self.image_split.sizes())
            self.right.setVisible(False)
            self.image_split.setOrientation(Qt.Orientation.Horizontal)
            total = max(self.main_split.width(), 2)
            slide = int(total * LARGE_SHARE)
            self.image_split.setSizes([slide, total - slide])
        elif not on and before is not None:
            self.image_split.setOrientation(Qt.Orientation.Vertical)
            self.right.setVisible(True)
            self.main_split.setSizes(before[0])
            self.image_split.setSizes(before[1])
            self._before_large = None


class StatusParts:
    """The status bar: phase, progress, project and model, the long texts cut where they matter least."""

    def __init__(self, status: QStatusBar) -> None:
        self.phase_label = plain_label(Phase.EMPTY.value)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.progress_bar.setMaximumWidth(180)
        self.progress_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
        self.model_label = ElidedLabel("")  # the file name and the method/device stay readable
        # "Project 'x': n images seen" stays whole; the time of the last save goes first.
        self.project_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
        self.reviewer_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
        self.reviewer_label.setToolTip("Each review mark is kept with this name (Settings ▸ Reviewer name)")
        # An export under way: what it does, how far, and its Cancel (hidden otherwise).
        self.export_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
        # Room for "Writing report.pdf, page 12 (3 of 9)" even while a message covers the bar: a
        # fixed width (an elided label's "ignored" size let the status bar lay the progress bar
        # over it at 1280x800: "W" was all that showed).
        self.export_label.setFixedWidth(self.export_label.fontMetrics().horizontalAdvance("x" * 34))
        self.export_label.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self.export_bar = QProgressBar()
        self.export_bar.setMaximumWidth(140)
        self.export_cancel = QPushButton("Cancel export")
        self.export_cancel.setToolTip("Stop the export: the folder stays as it was")
        status.addWidget(self.phase_label)
        status.addWidget(self.progress_bar)
        status.addWidget(self.progress_label, 2)
        status.addWidget(self.project_label, 2)
        status.addWidget(self.reviewer_label, 1)
        status.addWidget(self.model_label, 3)
        for widget in (self.export_label, self.export_bar, self.export_cancel):
            status.addPermanentWidget(widget)
        self.show_export(None)

    def show_progress(self, done: int, total: int, text: str) -> None:
        """The run's count on the bar and its text beside it. The bar is marked for the window's
        next repaint, not repainted at once: ``QProgressBar.setValue`` repaints synchronously,
        and a synchronous repaint of one widget paints everything the window has to paint (the
        table's new rows, the plots) inside the views' timer's turn (issue 41)."""
        bar, top = self.progress_bar, max(total, 1)
        value = min(done, top)
        if bar.maximum() != top or bar.minimum() != 0 or bar.value() != value:
            blocked = bar.testAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled)
            bar.setAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled, True)
            try:
                bar.setRange(0, top)
                bar.setValue(value)
            finally:
                bar.setAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled, blocked)
            bar.update()
        self.progress_label.set_full_text(text)

    def show_export(self, step: tuple[str, int, int] | None) -> None:
        """An export's step ``(what, done, total)`` (total 0: how far is not known), or None: no export."""
        for widget in (self.export_label, self.export_bar, self.export_cancel):
            widget.setVisible(step is not None)
        if step is None:
            return
        what, done, total = step
        self.export_label.set_full_text(f"{what} ({done} of {total})" if total else what)
        self.export_bar.setRange(0, max(total, 0))  # 0, 0: a busy bar
        self.export_bar.setValue(min(done, total))


def fit_to_screen(window: QMainWindow) -> None:
    """At least 1320x860 where the screen allows; most of a larger screen (main() maximises the
    window on screens smaller than 1500x950)."""
    screen = QGuiApplication.primaryScreen().availableGeometry()
    width = min(max(1320, int(screen.width() * 0.85)), screen.width())
    height = min(max(860, int(screen.height() * 0.85)), screen.height())
    window.resize(width, height)
