"""The main window's signals and the views it is made of, apart from how they are laid out.

:class:`WindowBase` declares every request the window sends the controller (its signals, wired in
:mod:`app.shell.wiring`) and the little state its parts share (where each file dialog starts,
the question it asks). :class:`Views` makes the passive views. The window's parts --
:class:`~app.views._layout.Panes`, :class:`~app.views._layout.StatusParts`,
:class:`~app.views._actions.WindowActions` and the questions of :mod:`app.views._prompts` -- are
typed against these two, not against :class:`~app.views.main_window.MainWindow`, so each is a
typed object of its own and nothing is assigned onto the window from outside.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMainWindow, QWidget

from app.views._plain import ask_yes_no, plain_label
from app.views.banner import BannerBar
from app.views.certificates_view import CertificatesView
from app.views.image_view import ImageView
from app.views.log_view import LogView
from app.views.metrics_view import MetricsView
from app.views.plots_view import PlotsView
from app.views.slide_view import SlideView
from app.views.table_view import PredictionTable
from app.views.welcome import WelcomePanel


class Views:
    """The passive views of the main window (each emits what the user asked for)."""

    def __init__(self) -> None:
        self.image = ImageView()
        self.slide = SlideView()
        self.table = PredictionTable()
        self.plots = PlotsView()
        self.metrics = MetricsView()
        self.certificates = CertificatesView()
        self.log = LogView()
        self.banners = BannerBar()
        self.welcome = WelcomePanel()
        # What decides the open folder now and what reviewing could change: always in view, above
        # the status bar (the engine's outlook sentence; hidden while nothing is open).
        self.outlook = plain_label("")
        self.outlook.setWordWrap(True)
        self.outlook.setObjectName("outlook")
        self.outlook.setStyleSheet(
            "QLabel#outlook { background: #eef3fb; border-top: 1px solid #c5d3ea; padding: 3px 6px; }"
        )
        self.outlook.setVisible(False)
        # Two lines' room from the start: the sentence grows from one line to two as the first
        # rows come, and a label that grows lays the window out again (the table and the plots
        # resized and painted whole, the plots' axes drawn afresh: the longest event of a run's
        # start, 45-50 ms of the GUI thread's time, issue 41).
        self.outlook.ensurePolished()
        self.outlook.setText("x\nx")
        self.outlook.setMinimumHeight(self.outlook.sizeHint().height())
        self.outlook.setText("")


class WindowBase(QMainWindow):
    """The main window's requests to the controller and the state its parts share."""

    openFolderRequested = Signal(str)
    openSlideRequested = Signal(str)
    orderChanged = Signal(str)
    startRequested = Signal()
    pauseRequested = Signal()
    resumeRequested = Signal()
    stopRequested = Signal()
    resetRequested = Signal()
    exportRequested = Signal(str)
    cancelExportRequested = Signal()  # stop the export under way (its folder stays as it was)
    settingsRequested = Signal()
    aboutRequested = Signal()
    projectSelected = Signal(str)
    newProjectRequested = Signal()  # the controller asks for the new project's name and model
    renameProjectRequested = Signal(str)  # the new name of the current project
    deleteProjectRequested = Signal(str)  # the project to delete (after the user confirmed)
    closeRequested = Signal()
    windowActivated = Signal()  # the window came to the front (a folder may have grown meanwhile)
    positionSelected = Signal(int)  # the user selected the table row of this stream position
    filterChanged = Signal(object)  # RowFilter
    tileClicked = Signal(int, int)  # slide heat-map cell (row, col)
    opacityChanged = Signal(float)  # overlay opacity (0-1)
    reviewRequested = Signal(int, int)  # stream position, the right class (-1 clears the mark)
    queueRequested = Signal()  # the review queue (Q): the controller starts a comparison if none is open
    undoRequested = Signal(bool)  # take the last review mark change back (True: redo the last undone one)
    bannerActionTriggered = Signal(str, str)  # banner key, action id
    demoRequested = Signal(str)  # "histology", "fundus" or "tissue" (app.core.settings.DEMO_MODELS)
    cohortSiteRequested = Signal(
        object
    )  # a cohort's site to review (app.core.cohort_sites.CohortSiteRequest)
    regionRequested = Signal(int, int, int, int, int)  # slide rectangle (level 0) at this many pixels

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.start_folders: dict[str, str] = {}  # where each file dialog starts ("folder", "slide", …)

    def confirm(self, title: str, text: str) -> bool:
        """A yes/no question in plain text; True for yes."""
        return ask_yes_no(self, title, text)
