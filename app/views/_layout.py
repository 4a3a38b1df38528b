"""The main window's panes, status bar and first size (built here so the window file stays about
its surface, as :mod:`app.views._actions` builds its actions and menus)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import (
    QProgressBar,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.phase import Phase
from app.views._canvas import ElidedLabel
from app.views._plain import plain_label

# The functions below receive the MainWindow (typed Any: importing it here would be an import cycle).
MainWindow = Any
TABS = ("plots", "metrics", "certificates", "log")  # the bottom tabs, in order
LOG_TAB = TABS.index("log")


def make_panes(w: MainWindow) -> None:
    """The welcome panel or the images on the left, the table over the tabs on the right, the
    banners above both."""
    w.image_split = QSplitter(Qt.Orientation.Vertical)
    w.image_split.addWidget(w.slide_view)
    w.image_split.addWidget(w.image_view)
    w.slide_view.setVisible(False)
    w.split_before_large = None  # the splitters' sizes while the slide view is large
    w.left = QStackedWidget()
    w.left.addWidget(w.welcome)
    w.left.addWidget(w.image_split)
    w.bottom_tabs = QTabWidget()
    w.bottom_tabs.addTab(w.plots, "&Plots")
    w.bottom_tabs.addTab(w.metrics, "&Metrics")
    w.bottom_tabs.addTab(w.certificates, "&Certificates")
    w.bottom_tabs.addTab(w.log, "&Log")
    w.right = QSplitter(Qt.Orientation.Vertical)
    w.right.addWidget(w.table)
    w.right.addWidget(w.bottom_tabs)
    w.right.setSizes([420, 300])
    w.main_split = QSplitter(Qt.Orientation.Horizontal)
    w.main_split.addWidget(w.left)
    w.main_split.addWidget(w.right)
    w.main_split.setSizes([490, 790])  # the table has ten columns
    central = QWidget()
    column = QVBoxLayout(central)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    column.addWidget(w.banners)
    column.addWidget(w.main_split, 1)
    w.setCentralWidget(central)


def badge_log_tab(w: MainWindow, unseen: int, errors: bool = False) -> None:
    """The log tab's title counts the warnings and errors not seen yet (red with an error)."""
    bar = w.bottom_tabs.tabBar()
    if not unseen:
        w.bottom_tabs.setTabText(LOG_TAB, "&Log")
        bar.setTabTextColor(LOG_TAB, w.palette().windowText().color())
        return
    w.bottom_tabs.setTabText(LOG_TAB, f"&Log ({unseen} new)")
    bar.setTabTextColor(LOG_TAB, QColor(179, 38, 30) if errors else QColor(154, 103, 0))


def make_status_bar(w: MainWindow) -> None:
    """Phase, progress, profile and model, the long texts cut where they matter least."""
    w.phase_label = plain_label(Phase.EMPTY.value)
    w.progress_bar = QProgressBar()
    w.progress_bar.setRange(0, 1)
    w.progress_bar.setValue(0)
    w.progress_bar.setMaximumWidth(180)
    w.progress_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
    w.model_label = ElidedLabel("")  # the file name and the method/device stay readable
    # "Project 'x': n images seen" stays whole; the time of the last save goes first.
    w.profile_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
    w.reviewer_label = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
    w.reviewer_label.setToolTip("Each review mark is kept with this name (Settings ▸ Reviewer name)")
    status = w.statusBar()
    status.addWidget(w.phase_label)
    status.addWidget(w.progress_bar)
    status.addWidget(w.progress_label, 2)
    status.addWidget(w.profile_label, 2)
    status.addWidget(w.reviewer_label, 1)
    status.addWidget(w.model_label, 3)


def fit_to_screen(w: MainWindow) -> None:
    """At least 1320x860 where the screen allows; most of a larger screen (main() maximises the
    window on screens smaller than 1500x950)."""
    screen = QGuiApplication.primaryScreen().availableGeometry()
    width = min(max(1320, int(screen.width() * 0.85)), screen.width())
    height = min(max(860, int(screen.height() * 0.85)), screen.height())
    w.resize(width, height)


SLIDE_SHARE = 0.62  # the slide's share of the image column's height while a slide is open
SLIDE_COLUMN_SHARE = 0.45  # the image column's share of the width, at least, while a slide is open
LARGE_SHARE = 0.66  # the slide's share of the width in the large slide view (the tile beside it)


def show_slide_pane(w: MainWindow, shown: bool) -> None:
    """Show the slide pane over the tile preview, with most of the column's height (or hide it, and
    leave the large slide view)."""
    if not shown:
        w.large_slide_action.setChecked(False)
    w.large_slide_action.setEnabled(shown)
    was_shown = w.slide_view.isVisibleTo(w)
    w.slide_view.setVisible(shown)
    if shown and not was_shown:
        total = max(sum(w.image_split.sizes()), w.image_split.height(), 2)
        slide = int(total * SLIDE_SHARE)
        w.image_split.setSizes([slide, total - slide])
        sizes = w.main_split.sizes()
        width = sum(sizes)
        left = min(int(width * SLIDE_COLUMN_SHARE), width - w.right.minimumSizeHint().width())
        if left > sizes[0]:  # a wide screen: the slide gets some of the table's room
            w.main_split.setSizes([left, width - left])


def set_large_slide(w: MainWindow, on: bool) -> None:
    """The large slide view: the slide and the tile beside it take the window (the table and the
    tabs make room; N/P, the review keys and a click on a tile still choose tiles), or back."""
    before: tuple[list[int], list[int]] | None = w.split_before_large
    if on and before is None:
        w.show_pane("images", True)
        w.split_before_large = (w.main_split.sizes(), w.image_split.sizes())
        w.right.setVisible(False)
        w.image_split.setOrientation(Qt.Orientation.Horizontal)
        total = max(w.main_split.width(), 2)
        slide = int(total * LARGE_SHARE)
        w.image_split.setSizes([slide, total - slide])
    elif not on and before is not None:
        w.image_split.setOrientation(Qt.Orientation.Vertical)
        w.right.setVisible(True)
        w.main_split.setSizes(before[0])
        w.image_split.setSizes(before[1])
        w.split_before_large = None
