"""The main window: assembles the views and turns user actions into signals (no engine logic here).

Its public methods and signals are the whole surface the controller uses (the controller's tests
run it against a mock of this class), so sub-widgets stay private to the window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolBar,
    QWidget,
)

from app import APP_NAME
from app._engine import FieldInfo
from app.overlay import Overlay
from app.rows import PredictionRow, RowFilter
from app.settings import AppSettings
from app.state import Actions, Phase, Progress
from app.stats import PlotData
from app.views.image_view import ImageView
from app.views.log_view import LogView
from app.views.plots_view import PlotsView
from app.views.slide_view import SlideView
from app.views.table_view import PredictionTable

ICON = Path(__file__).resolve().parents[2] / "resources" / "icons" / "f2tta-studio.svg"
SLIDE_FILTER = (
    "Slides (*.svs *.tif *.tiff *.ndpi *.vms *.vmu *.scn *.mrxs *.svslide *.bif *.dcm);;All files (*)"
)


class MainWindow(QMainWindow):
    """Passive main window; every user request leaves as a signal for the controller."""

    openFolderRequested = Signal(str)
    openSlideRequested = Signal(str)
    orderChanged = Signal(str)
    startRequested = Signal()
    pauseRequested = Signal()
    resumeRequested = Signal()
    stopRequested = Signal()
    resetRequested = Signal()
    exportRequested = Signal(str)
    settingsRequested = Signal()
    aboutRequested = Signal()
    profileSelected = Signal(str)
    newProfileRequested = Signal(str)
    closeRequested = Signal()
    positionSelected = Signal(int)  # the user selected the table row of this stream position
    filterChanged = Signal(object)  # RowFilter
    tileClicked = Signal(int, int)  # slide heat-map cell (row, col)
    opacityChanged = Signal(float)  # overlay opacity (0-1)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(APP_NAME)
        if ICON.exists():
            self.setWindowIcon(QIcon(str(ICON)))
        self.close_allowed = True
        self.image_view = ImageView()
        self.slide_view = SlideView()
        self.table = PredictionTable()
        self.plots = PlotsView()
        self.log = LogView()

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.slide_view)
        left.addWidget(self.image_view)
        self.slide_view.setVisible(False)
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.addTab(self.plots, "Plots")
        self.bottom_tabs.addTab(self.log, "Log")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.table)
        right.addWidget(self.bottom_tabs)
        right.setSizes([420, 300])
        main = QSplitter(Qt.Orientation.Horizontal)
        main.addWidget(left)
        main.addWidget(right)
        main.setSizes([560, 720])
        self.setCentralWidget(main)

        self._make_actions()
        self._make_menus_and_toolbar()
        self.phase_label = QLabel(Phase.EMPTY.value)
        self.phase_label.setMinimumWidth(150)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.progress_bar.setMaximumWidth(260)
        self.progress_label = QLabel("")
        self.progress_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.model_label = QLabel("")
        self.profile_label = QLabel("")
        self.profile_label.setContentsMargins(8, 0, 8, 0)
        self.profile_label.setMinimumWidth(380)
        status = self.statusBar()
        status.addWidget(self.phase_label)
        status.addWidget(self.progress_bar)
        status.addWidget(self.progress_label, 1)
        status.addPermanentWidget(self.profile_label)
        status.addPermanentWidget(self.model_label)
        self.resize(1320, 860)
        self.table.rowSelected.connect(self._on_table_row_selected)
        self.table.filterChanged.connect(self.filterChanged)
        self.slide_view.tileClicked.connect(self.tileClicked)
        self.image_view.opacityChanged.connect(self.opacityChanged)

    # -- construction -------------------------------------------------------------------------
    def _action(
        self, text: str, slot: object, shortcut: str | QKeySequence.StandardKey | None = None
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        return action

    def _make_actions(self) -> None:
        self.open_folder_action = self._action("Open folder…", self._on_open_folder_triggered, "Ctrl+O")
        self.open_slide_action = self._action("Open slide…", self._on_open_slide_triggered, "Ctrl+Shift+O")
        self.export_action = self._action("Export reports…", self._on_export_triggered, "Ctrl+E")
        self.quit_action = self._action("Quit", self.close, QKeySequence.StandardKey.Quit)
        self.start_action = self._action("Start", self.startRequested.emit, "F5")
        self.pause_action = self._action("Pause", self.pauseRequested.emit, "F6")
        self.resume_action = self._action("Resume", self.resumeRequested.emit, "F7")
        self.stop_action = self._action("Stop", self.stopRequested.emit, "F8")
        self.reset_action = self._action("Reset to source model…", self._on_reset_triggered)
        self.settings_action = self._action("Settings…", self.settingsRequested.emit, "Ctrl+,")
        self.about_action = self._action("About", self.aboutRequested.emit)
        self.toggle_overlay_action = self._action("Toggle overlay", self.image_view.toggle_overlay, "O")
        self.fit_action = self._action("Fit image", self.image_view.fit, "F")
        self.new_profile_action = self._action("New profile…", self._on_new_profile_triggered)
        self.order_group = QActionGroup(self)
        self.order_actions: dict[str, QAction] = {}
        for key, text in (("name", "File name"), ("mtime", "Modification time"), ("manifest", "Manifest")):
            action = QAction(text, self, checkable=True)
            action.setData(key)
            action.triggered.connect(self._on_order_triggered)
            self.order_group.addAction(action)
            self.order_actions[key] = action
        self.order_actions["name"].setChecked(True)

    def _make_menus_and_toolbar(self) -> None:
        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        file_menu.addActions([self.open_folder_action, self.open_slide_action])
        order_menu = file_menu.addMenu("Arrival order")
        order_menu.addActions(list(self.order_actions.values()))
        file_menu.addSeparator()
        file_menu.addActions([self.export_action, self.settings_action])
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        run_menu = menu.addMenu("&Run")
        run_menu.addActions([self.start_action, self.pause_action, self.resume_action, self.stop_action])
        run_menu.addSeparator()
        run_menu.addActions([self.new_profile_action, self.reset_action])
        view_menu = menu.addMenu("&View")
        view_menu.addActions([self.toggle_overlay_action, self.fit_action])
        help_menu = menu.addMenu("&Help")
        help_menu.addAction(self.about_action)

        bar = QToolBar("Main")
        bar.setObjectName("main-toolbar")
        bar.setIconSize(QSize(16, 16))
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        bar.addActions([self.open_folder_action, self.open_slide_action])
        bar.addSeparator()
        bar.addActions([self.start_action, self.pause_action, self.resume_action, self.stop_action])
        bar.addSeparator()
        bar.addWidget(QLabel(" Site profile "))
        self.profile_combo = QComboBox()
        self.profile_combo.setMinimumWidth(140)
        self.profile_combo.setToolTip("The adaptation state is kept per site profile")
        bar.addWidget(self.profile_combo)
        bar.addAction(self.new_profile_action)
        bar.addAction(self.reset_action)
        bar.addSeparator()
        bar.addActions([self.settings_action, self.export_action])
        self.addToolBar(bar)
        self.profile_combo.activated.connect(self._on_profile_combo_activated)

    # -- state from the controller ------------------------------------------------------------
    def set_actions(self, phase: Phase, actions: Actions, status: str | None = None) -> None:
        self.phase_label.setText(status or phase.value)
        for action, enabled in (
            (self.open_folder_action, actions.open),
            (self.open_slide_action, actions.open),
            (self.start_action, actions.start),
            (self.pause_action, actions.pause),
            (self.resume_action, actions.resume),
            (self.stop_action, actions.stop),
            (self.reset_action, actions.reset),
            (self.new_profile_action, actions.settings),
            (self.export_action, actions.export),
            (self.settings_action, actions.settings),
        ):
            action.setEnabled(enabled)
        self.profile_combo.setEnabled(actions.settings)
        for action in self.order_actions.values():
            action.setEnabled(actions.settings)

    def set_progress(self, progress: Progress) -> None:
        self.progress_bar.setRange(0, max(progress.total, 1))
        self.progress_bar.setValue(min(progress.done, max(progress.total, 1)))
        self.progress_label.setText(progress.text())

    def set_profiles(self, names: list[str], current: str) -> None:
        self.profile_combo.blockSignals(True)
        self.profile_combo.clear()
        self.profile_combo.addItems(names)
        self.profile_combo.setCurrentText(current)
        self.profile_combo.blockSignals(False)

    def set_profile_summary(self, text: str) -> None:
        self.profile_label.setText(text)

    def set_order(self, order: str) -> None:
        if order in self.order_actions:
            self.order_actions[order].setChecked(True)

    def set_model_text(self, text: str) -> None:
        self.model_label.setText(text)

    def set_source_title(self, text: str) -> None:
        self.setWindowTitle(f"{text} — {APP_NAME}" if text else APP_NAME)

    def log_message(self, level: str, text: str) -> None:
        self.log.add(level, text)

    def show_status(self, text: str, milliseconds: int = 8000) -> None:
        self.statusBar().showMessage(text, milliseconds)

    def set_preferences(self, low_confidence: float, opacity: float) -> None:
        self.table.threshold_spin.setValue(low_confidence)
        self.image_view.set_opacity(opacity)

    # -- results --------------------------------------------------------------------------------
    def clear_results(self, total: int, segment_size: int) -> None:
        """Empty the table, plots and slide map for a new source of ``total`` images."""
        self.table.model.clear()
        self.table.follow_box.setChecked(True)
        self.plots.set_data(None)
        self.plots.set_extent(total, segment_size)
        self.slide_view.setVisible(False)

    def show_slide(
        self, thumbnail: np.ndarray, grid: tuple[int, int], footprint_px: float, title: str
    ) -> None:
        self.slide_view.set_slide(thumbnail, grid, footprint_px, title)
        self.slide_view.setVisible(True)

    def append_rows(self, rows: list[PredictionRow]) -> None:
        self.table.model.append_rows(rows)

    def set_plot_data(self, data: PlotData) -> None:
        self.plots.set_data(data)

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

    def highlight_tile(self, row: int, col: int) -> None:
        self.slide_view.highlight(row, col)

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
        """The plots panel as PNG bytes (immutable, so it may cross to the worker thread)."""
        return self.plots.png()

    # -- questions the controller may ask -----------------------------------------------------
    def confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
        )
        return answer == QMessageBox.StandardButton.Yes

    def show_error(self, title: str, text: str) -> None:
        QMessageBox.warning(self, title, text)

    def edit_settings(
        self, settings: AppSettings, fields: dict[str, list[FieldInfo]], devices: list[str]
    ) -> AppSettings | None:
        """The settings dialog; the edited settings, or None when cancelled."""
        from app.views.settings_dialog import SettingsDialog

        dialog = SettingsDialog(settings, fields, devices, self)
        return dialog.result_settings() if dialog.exec() else None

    def show_about(self, summary: str) -> None:
        from app.views.about_dialog import AboutDialog

        AboutDialog(summary, self).exec()

    def close_now(self) -> None:
        """Close even while the controller would refuse (after a run has stopped and saved)."""
        self.close_allowed = True
        self.close()

    # -- slots --------------------------------------------------------------------------------
    @Slot()
    def _on_open_folder_triggered(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a folder of images")
        if path:
            self.openFolderRequested.emit(path)

    @Slot()
    def _on_open_slide_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a slide", "", SLIDE_FILTER)
        if path:
            self.openSlideRequested.emit(path)

    @Slot()
    def _on_export_triggered(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Export reports into folder")
        if path:
            self.exportRequested.emit(path)

    @Slot()
    def _on_reset_triggered(self) -> None:
        name = self.profile_combo.currentText()
        if self.confirm(
            "Reset to source model",
            f"Reset profile '{name}' to the source model?\n\nIts adaptation state and its record of "
            "processed images are deleted. This cannot be undone.",
        ):
            self.resetRequested.emit()

    @Slot()
    def _on_new_profile_triggered(self) -> None:
        name, ok = QInputDialog.getText(self, "New site profile", "Profile name (e.g. the site):")
        if ok and name.strip():
            self.newProfileRequested.emit(name.strip())

    @Slot(int)
    def _on_table_row_selected(self, source_row: int) -> None:
        self.positionSelected.emit(self.table.model.row_at(source_row).position)

    @Slot(int)
    def _on_profile_combo_activated(self, _index: int) -> None:
        self.profileSelected.emit(self.profile_combo.currentText())

    @Slot()
    def _on_order_triggered(self) -> None:
        action = self.order_group.checkedAction()
        if action is not None:
            self.orderChanged.emit(str(action.data()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closeRequested.emit()
        if self.close_allowed:
            event.accept()
        else:
            event.ignore()
