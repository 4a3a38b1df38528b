"""The main window: the views, laid out and given actions (no engine logic here).

It is made of typed parts (:mod:`app.views.window_base` declares its signals and makes the views;
:class:`~app.views._layout.Panes` and :class:`~app.views._layout.StatusParts` lay them out;
:class:`~app.views._actions.WindowActions` holds the actions, menus and toolbar). Its public
methods are what the controller may ask of it (the protocol :class:`app.control.view.View`; the
controller's tests use a fake of it) and its signals are wired to the controller in
:mod:`app.shell.wiring`, so sub-widgets stay private to the window. It fits a 1280×800 screen:
every pane can be collapsed (View menu, Ctrl+1/2/3), labels that could widen the window are
elided, and failures appear as banners above the work area with their fixes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QCoreApplication, QEvent, Qt, QUrl, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices, QIcon
from PySide6.QtWidgets import QWidget

from app import APP_NAME
from app._engine import Certificate, FieldInfo
from app.core.certificates import QueueState
from app.core.figures import Figures
from app.core.filters import PredictionRow, RowFilter
from app.core.notices import Banner
from app.core.overlay import Overlay
from app.core.phase import Actions, Phase, export_tip
from app.core.progress import Progress
from app.core.project_lines import ModelChoice
from app.core.recent import InputLine
from app.core.run_items import ReviewNote, RowChange
from app.core.settings import AppSettings, ModelCheck
from app.core.slide_display import SlideDisplay
from app.core.stats import PlotData
from app.views import _prompts as ask
from app.views._actions import WindowActions
from app.views._layout import LOG_TAB, TABS, Panes, StatusParts, fit_to_screen
from app.views._plain import plain_tooltip, warn
from app.views.window_base import Views, WindowBase

ICON = Path(__file__).resolve().parents[2] / "resources" / "icons" / "f2tta-studio.svg"
OUTLOOK_EVENT = QEvent.Type(QEvent.registerEventType())  # the outlook strip shown or hidden in its turn


class MainWindow(WindowBase):
    """Passive main window; every user request leaves as a signal for the controller.

    Attributes:
        views: the views; ``image_view``, ``slide_view``, ``table``, ``plots``, ``metrics``,
            ``certificates``, ``log``, ``banners`` and ``welcome`` name them too.
        panes: how they are laid out. commands: the actions, menus and toolbar.
        status_parts: the status bar's labels and progress bar.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(APP_NAME)
        if ICON.exists():
            self.setWindowIcon(QIcon(str(ICON)))
        self.close_allowed = True
        self._unseen_log = 0
        self.views = views = Views()
        self.image_view, self.slide_view, self.table = views.image, views.slide, views.table
        self.plots, self.metrics, self.certificates = views.plots, views.metrics, views.certificates
        self.log, self.banners, self.welcome = views.log, views.banners, views.welcome
        self.panes = Panes(views)
        self.setCentralWidget(self.panes.central)
        self.commands = WindowActions(self, views, self.panes)
        self.commands.build_menus(self.menuBar())
        self.addToolBar(self.commands.build_toolbar())
        self.status_parts = StatusParts(self.statusBar())
        fit_to_screen(self)
        self.table.rowSelected.connect(self._on_table_row_selected)
        self.table.filterChanged.connect(self.filterChanged)
        self.table.reviewRequested.connect(self.reviewRequested)
        self.slide_view.tileClicked.connect(self.tileClicked)
        self.slide_view.regionRequested.connect(self.regionRequested)
        self.image_view.opacityChanged.connect(self.opacityChanged)
        self.banners.actionTriggered.connect(self.bannerActionTriggered)
        self.metrics.confidentErrorsRequested.connect(lambda: self.table.set_mode("confident_errors"))
        self.welcome.openFolderClicked.connect(lambda: ask.open_folder(self))
        self.welcome.openSlideClicked.connect(lambda: ask.open_slide(self))
        self.welcome.demoClicked.connect(self.demoRequested)
        self.welcome.newProjectClicked.connect(self.newProjectRequested)
        self.welcome.inputClicked.connect(self._on_welcome_input_clicked)
        self.welcome.reportsClicked.connect(self.open_location)
        self.panes.bottom_tabs.currentChanged.connect(self._on_bottom_tabs_current_changed)
        self.status_parts.export_cancel.clicked.connect(self.cancelExportRequested)
        self._export_allowed = False  # what the phase allows; an export under way allows no other
        self._phase = Phase.EMPTY
        self._project_tip = ""  # the project list's tooltip (a run under way says why it is greyed)

    # -- state from the controller ------------------------------------------------------------
    def set_actions(self, phase: Phase, actions: Actions, status: str | None = None) -> None:
        self.status_parts.phase_label.setText(status or phase.value)
        c = self.commands
        for act, enabled in (
            (c.open_folder, actions.open),
            (c.open_slide, actions.open),
            (c.start, actions.start),
            (c.pause, actions.pause),
            (c.resume, actions.resume),
            (c.stop, actions.stop),
            (c.reset, actions.reset),
            (c.new_project, actions.settings),
            (c.rename_project, actions.settings),
            (c.delete_project, actions.settings),
            (c.export, actions.export and not self.status_parts.export_cancel.isVisibleTo(self)),
            (c.settings, actions.settings),
        ):
            act.setEnabled(enabled)
        self._export_allowed, self._phase = actions.export, phase
        c.export.setToolTip(
            export_tip(phase, actions.export, self.status_parts.export_cancel.isVisibleTo(self))
        )
        c.project_combo.setEnabled(actions.settings)
        for act in c.demos.values():  # a demo opens in a project of its own: as a project change
            act.setEnabled(actions.settings)
        busy = phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED, Phase.STOPPING)
        why = "Stop the run (F8) to change the project or the settings" if busy else ""
        for act, tip in ((c.new_project, "A project with its own model"), (c.settings, ""), (c.reset, "")):
            act.setToolTip(why or tip or act.text().replace("&", ""))
        c.project_combo.setToolTip(why or self._project_tip)
        for act in c.orders.values():
            act.setEnabled(actions.settings)
        self.welcome.set_allowed(actions.open, actions.settings)

    def set_progress(self, progress: Progress) -> None:
        self.status_parts.show_progress(progress.done, progress.total, progress.text())

    def set_projects(
        self,
        names: list[str],
        current: str,
        details: dict[str, str] | None = None,
        entries: dict[str, str] | None = None,
    ) -> None:
        """The project list; ``details``: each project's model and images seen (its tooltip);
        ``entries``: the short line after each name in the list (kind of image, images seen)."""
        details = details or {}
        combo = self.commands.project_combo
        combo.set_projects(names, current, entries or {}, details)
        self._project_tip = plain_tooltip(f"Project '{current}'\n{details.get(current, '')}".strip())
        combo.setToolTip(self._project_tip)
        self.welcome.set_project(current, details.get(current, ""))

    def set_inputs(self, inputs: list[InputLine]) -> None:
        """The current project's folders and slides: the welcome page and File ▸ Open recent."""
        self.welcome.set_inputs(inputs)
        self.commands.fill_recent(inputs)

    def set_start_folders(self, folders: dict[str, str]) -> None:
        self.start_folders = dict(folders)

    def set_start_folder(self, kind: str, folder: str) -> None:
        """Where the ``kind`` file dialog starts ("" : the dialog's own choice)."""
        self.start_folders[kind] = folder

    def show_export_progress(self, what: str, done: int, total: int) -> None:
        """An export under way: its step in the status bar with Cancel; Export waits for it."""
        self.status_parts.show_export((what, done, total))
        self.commands.export.setEnabled(False)
        self.commands.export.setToolTip(export_tip(Phase.DONE, False, exporting=True))

    def hide_export_progress(self) -> None:
        self.status_parts.show_export(None)
        self.commands.export.setEnabled(self._export_allowed)
        self.commands.export.setToolTip(export_tip(self._phase, self._export_allowed))

    def set_project_entry(self, name: str, entry: str, tooltip: str) -> None:
        """One project's line in the list (its images seen as they change)."""
        self.commands.project_combo.set_entry(name, entry, tooltip)
        if name == self.commands.project_combo.current_name():
            self._project_tip = plain_tooltip(f"Project '{name}'\n{tooltip}")
            self.commands.project_combo.setToolTip(self._project_tip)
            self.welcome.set_project(name, tooltip)

    def set_project_summary(self, text: str) -> None:
        self.status_parts.project_label.set_full_text(text)

    def set_order(self, order: str) -> None:
        if order in self.commands.orders:
            self.commands.orders[order].setChecked(True)

    def set_model_text(self, text: str) -> None:
        self.status_parts.model_label.set_full_text(text)
        self.welcome.set_model_text(f"Model: {text}" if text else "")

    def set_classes(self, classes: tuple[str, ...]) -> None:
        """The model's classes, for the review keys (digit k marks class k)."""
        self.table.set_classes(classes)
        self.commands.name_classes(classes)

    def set_demos(self, available: set[str]) -> None:
        self.welcome.set_demos(available)
        for kind, act in self.commands.demos.items():
            act.setVisible(kind in available)

    def set_source_title(self, text: str) -> None:
        self.setWindowTitle(f"{text} — {APP_NAME}" if text else APP_NAME)
        self.panes.show_work(bool(text))

    def log_message(self, level: str, text: str) -> None:
        self.log.add(level, text)
        if level in ("warning", "error") and self.panes.bottom_tabs.currentIndex() != LOG_TAB:
            self._unseen_log += 1
            self.panes.badge_log_tab(self._unseen_log, level == "error" or bool(self.log.count("error")))

    def show_status(self, text: str, milliseconds: int = 8000) -> None:
        self.statusBar().showMessage(text, milliseconds)

    def show_banner(self, banner: Banner) -> None:
        self.banners.show_banner(banner)

    def dismiss_banner(self, key: str) -> None:
        self.banners.dismiss(key)

    def clear_banners(self, prefix: str = "") -> None:
        self.banners.clear(prefix)

    def set_preferences(self, low_confidence: float, opacity: float) -> None:
        self.table.threshold_spin.setValue(low_confidence)
        self.image_view.set_opacity(opacity)

    def show_tab(self, tab: str) -> None:
        """Bring the bottom tab "plots", "metrics", "certificates" or "log" to the front (its pane shown)."""
        self.show_pane("tabs", True)
        self.panes.bottom_tabs.setCurrentIndex(TABS.index(tab))

    def show_pane(self, pane: str, visible: bool) -> None:
        """Show or collapse a pane ("images", "table", "tabs") so the rest gets the room."""
        self.commands.show_pane(pane, visible)

    # -- results --------------------------------------------------------------------------------
    def clear_results(self, total: int, segment_size: int, labelled: bool = False) -> None:
        """Empty the table, plots and slide map for a new source of ``total`` images.

        ``labelled``: the source has ground truth (the plots will show accuracy).
        """
        self.table.model.clear()
        self.table.set_mode("all")  # a filter of the folder before (the review queue) goes with it
        self.table.follow_box.setChecked(True)
        self.plots.paint_in_turns()  # their axes drawn afresh, not all in the window's next repaint
        self.plots.set_data(None, labelled)
        self.plots.set_extent(total, segment_size)
        self.metrics.set_metrics(None)
        self.certificates.set_lines([])
        self.commands.show_slide(False)

    def show_slide(self, display: SlideDisplay) -> None:
        self.commands.show_slide(True)
        self.slide_view.set_slide(display)

    def set_slide_region(self, x: int, y: int, width: int, height: int, rgb: np.ndarray) -> None:
        self.slide_view.set_region(x, y, width, height, rgb)

    def append_rows(self, rows: list[PredictionRow]) -> None:
        self.table.append_rows(rows)

    def update_rows(self, changes: list[RowChange]) -> None:
        """Rows whose ground truth changed (review marks)."""
        for change in changes:
            self.table.model.replace_row(change.index, change.row, change.review)

    def set_reviews(self, reviews: dict[int, ReviewNote]) -> None:
        self.table.model.set_reviews(reviews)

    def open_queue(self) -> None:
        self.table.open_queue()

    def set_queue(self, queue: QueueState) -> None:
        self.table.set_queue(queue)  # the review queue's order and the groups' verdicts

    def set_certificates(self, lines: list[Certificate]) -> None:
        self.certificates.set_lines(lines)  # the review certificates per site group

    def set_outlook(self, text: str) -> None:
        """What decides the open folder now and what reviewing could change (empty: nothing open)."""
        self.views.outlook.setText(text)
        if self.views.outlook.isHidden() == bool(text):  # shown or hidden as the window is or not
            # Showing or hiding the strip lays the window out at once (Qt activates the layouts
            # above a widget shown): in an event of its own, not inside the handler of the opened
            # folder, which it made 3-4 ms dearer (the plots' resize); the text is already set.
            # Posted ahead of what the handler posted, so nothing is painted before it (the
            # window would paint the views at their old size, then again at the new one).
            QCoreApplication.postEvent(self, QEvent(OUTLOOK_EVENT), Qt.EventPriority.HighEventPriority.value)
        self.metrics.set_outlook(text)

    def customEvent(self, event: QEvent) -> None:
        if event.type() == OUTLOOK_EVENT:
            self._show_outlook()
        super().customEvent(event)

    def _show_outlook(self) -> None:
        self.views.outlook.setVisible(bool(self.views.outlook.text()))

    def set_reviewer(self, name: str) -> None:
        self.status_parts.reviewer_label.set_full_text(
            f"Reviewer: {name}"
        )  # the name each review mark is made under

    def set_undo_texts(self, undo: str, redo: str) -> None:
        self.commands.name_undo(undo, redo)  # the images the next undo and redo act on ("": none)

    def set_plot_data(self, data: PlotData) -> None:
        self.plots.set_data(data)

    def set_metrics(self, figures: Figures | None) -> None:
        self.metrics.set_metrics(figures)

    def set_tile_values(self, cells: list[tuple[int, int, float]]) -> None:
        self.slide_view.set_values(cells)

    def show_image(
        self,
        image: np.ndarray | None,
        overlay: Overlay | None,
        title: str,
        keep_view: bool = False,
        levels: tuple[float, float] | None = None,
    ) -> None:
        """Show an image with its overlay, or ``title`` alone when ``image`` is None."""
        if image is None:
            self.image_view.clear(title)
        else:
            self.image_view.show_image(image, overlay, title, keep_view, levels)

    def highlight_tile(self, row: int, col: int, centre: bool = False) -> None:
        self.slide_view.highlight(row, col, centre)

    @property
    def following(self) -> bool:
        """Whether "follow newest" is on (the newest image is shown as it arrives)."""
        return self.table.follow

    def select_row(self, index: int, follow: bool = False) -> None:
        """Select the table row ``index`` (in arrival order) without announcing it."""
        self.table.follow_box.setChecked(follow)
        self.table.select_source_row(index)

    def scroll_to_newest(self) -> None:
        self.table.scroll_to_newest()

    def apply_filter(self, row_filter: RowFilter) -> None:
        self.table.set_filter(row_filter)

    def plot_png(self) -> bytes:
        """The plots panel as PNG bytes (immutable, so it may cross to the worker thread); laid out
        with the outlook's strip as the window will show it, if its turn has not come yet."""
        self._show_outlook()
        return self.plots.png()

    # -- questions the controller may ask -----------------------------------------------------
    def show_error(self, title: str, text: str) -> None:
        warn(self, title, text)

    def edit_settings(
        self,
        settings: AppSettings,
        fields: dict[str, list[FieldInfo]],
        devices: list[str],
        check_model: ModelCheck | None = None,
    ) -> AppSettings | None:
        """The settings dialog; the edited settings, or None when cancelled."""
        return ask.settings(self, settings, fields, devices, check_model)

    def ask_new_project(
        self, choices: list[ModelChoice], taken: list[str], describe: Callable[[str], str], name: str = ""
    ) -> tuple[str, str] | None:
        """The New project dialog (``name`` offered): the name and the model's path, or None when cancelled."""
        return ask.new_project(self, choices, taken, describe, name)

    def ask_model_file(self, start: str) -> str | None:
        """A model checkpoint to use (the project's moved model), or None when cancelled."""
        return ask.model_file(self, start)

    def show_about(self, summary: str) -> None:
        ask.about(self, summary)

    def open_location(self, path: str) -> None:
        """Show a folder in the desktop's file manager."""
        QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    def is_maximized(self) -> bool:
        return self.isMaximized()

    def close_now(self) -> None:
        """Close even while the controller would refuse (after a run has stopped and saved)."""
        self.close_allowed = True
        self.close()

    # -- slots --------------------------------------------------------------------------------
    @Slot(int)
    def _on_table_row_selected(self, source_row: int) -> None:
        self.positionSelected.emit(self.table.model.row_at(source_row).position)

    @Slot(str, str)
    def _on_welcome_input_clicked(self, path: str, kind: str) -> None:
        (self.openFolderRequested if kind == "folder" else self.openSlideRequested).emit(path)

    @Slot(int)
    def _on_bottom_tabs_current_changed(self, index: int) -> None:
        if index == LOG_TAB:
            self._unseen_log = 0
            self.panes.badge_log_tab(0)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.ActivationChange and self.isActiveWindow():
            self.windowActivated.emit()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closeRequested.emit()
        if self.close_allowed:
            event.accept()
        else:
            event.ignore()
