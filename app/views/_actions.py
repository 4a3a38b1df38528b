"""The main window's actions, menus and toolbar (built here so the window file stays about layout)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QLabel, QToolBar

from app.core.arrival import ORDER_LABELS
from app.core.recent import InputLine
from app.views import _prompts as ask
from app.views._layout import set_large_slide
from app.views.project_combo import ProjectCombo

# The functions below receive the MainWindow (typed Any: importing it here would be an import cycle).
MainWindow = Any


def action(
    window: MainWindow,
    text: str,
    slot: Callable[[], object],
    shortcut: str | QKeySequence.StandardKey | None = None,
    short: str | None = None,
    tip: str | None = None,
) -> QAction:
    """An action with an optional shortcut, a shorter toolbar text and a tooltip."""
    act = QAction(text, window)
    if shortcut is not None:
        act.setShortcut(QKeySequence(shortcut))
    if short is not None:
        act.setIconText(short)
    if tip is not None:
        act.setToolTip(tip)
    act.triggered.connect(slot)
    return act


def make_actions(w: MainWindow) -> None:
    w.open_folder_action = action(w, "Open folder…", lambda: ask.open_folder(w), "Ctrl+O", "Open folder")
    w.open_slide_action = action(w, "Open slide…", lambda: ask.open_slide(w), "Ctrl+Shift+O", "Open slide")
    w.export_action = action(w, "Export reports…", lambda: ask.export(w), "Ctrl+E", "Export")
    w.quit_action = action(w, "Quit", w.close, QKeySequence.StandardKey.Quit)
    w.start_action = action(w, "Start", w.startRequested.emit, "F5", tip="Process the images (F5)")
    w.pause_action = action(w, "Pause", w.pauseRequested.emit, "F6", tip="Pause after this image (F6)")
    w.resume_action = action(w, "Resume", w.resumeRequested.emit, "F7", tip="Resume (F7)")
    w.stop_action = action(w, "Stop", w.stopRequested.emit, "F8", tip="Stop after this image and save (F8)")
    w.reset_action = action(
        w, "Reset project to the source model…", lambda: ask.reset_profile(w), short="Reset…"
    )
    w.settings_action = action(w, "Settings…", w.settingsRequested.emit, "Ctrl+,", "Settings")
    w.about_action = action(w, "About", w.aboutRequested.emit)
    w.toggle_overlay_action = action(w, "Toggle overlay", w.image_view.toggle_overlay, "O")
    w.fit_action = action(w, "Fit image", w.image_view.fit, "F")
    w.full_resolution_action = action(w, "Slide at full resolution", w.slide_view.full_resolution, "Z")
    w.fit_slide_action = action(w, "Whole slide", w.slide_view.fit, "Shift+Z")
    w.heat_mode_action = action(w, "Slide heat map: filled, outlines, off", w.slide_view.cycle_heat_mode, "H")
    w.large_slide_action = QAction("Large slide view", w, checkable=True, shortcut=QKeySequence("L"))
    w.large_slide_action.setEnabled(False)  # while a slide is open
    w.large_slide_action.toggled.connect(lambda on: set_large_slide(w, on))
    w.large_slide_action.toggled.connect(w.slide_view.large_button.setChecked)
    w.slide_view.large_button.toggled.connect(w.large_slide_action.setChecked)
    w.new_profile_action = action(
        w,
        "New project…",
        w.newProfileRequested.emit,
        "Ctrl+N",
        "New project…",
        "A project with its own model",
    )
    w.rename_profile_action = action(w, "Rename project…", lambda: ask.rename_profile(w))
    w.delete_profile_action = action(w, "Delete project…", lambda: ask.delete_profile(w))
    w.next_action = action(w, "Next image", lambda: w.table.step(1), "N")
    w.previous_action = action(w, "Previous image", lambda: w.table.step(-1), "P")
    w.confirm_action = action(w, "Confirm prediction", w.table.confirm_selected, "C")
    w.correct_action = action(w, "Correct prediction…", w.table.correct_selected, "X")
    w.clear_mark_action = action(w, "Clear review mark", w.table.clear_selected_mark, "Backspace")
    w.queue_action = action(
        w,
        "Review queue",
        w.table.open_queue,
        "Q",
        tip="The images whose adapted decision differs from the source model's, the most useful first (Q)",
    )
    w.undo_action = action(w, "Undo review mark", lambda: w.undoRequested.emit(False), "Ctrl+Z")
    w.redo_action = action(w, "Redo review mark", lambda: w.undoRequested.emit(True), "Ctrl+Shift+Z")
    w.undo_action.setEnabled(False)
    w.redo_action.setEnabled(False)
    w.class_actions = []
    for digit in range(1, 10):
        act = action(w, f"Mark as class {digit}", partial(w.table.mark_selected, digit - 1), str(digit))
        act.setVisible(digit <= 2)
        w.class_actions.append(act)
    w.order_group = QActionGroup(w)
    w.order_actions = {}
    for key, text in ORDER_LABELS.items():
        act = QAction(text, w, checkable=True)
        act.setData(key)
        act.triggered.connect(lambda: _emit_order(w))
        w.order_group.addAction(act)
        w.order_actions[key] = act
    w.order_actions["name"].setChecked(True)
    w.pane_actions = {}
    for key, text, shortcut in (
        ("images", "Image panel", "Ctrl+1"),
        ("table", "Table", "Ctrl+2"),
        ("tabs", "Plots, metrics and log", "Ctrl+3"),
    ):
        act = QAction(text, w, checkable=True)
        act.setChecked(True)
        act.setShortcut(QKeySequence(shortcut))
        act.toggled.connect(lambda on, k=key: w.show_pane(k, on))
        act.toggled.connect(lambda on, k=key: _leave_large_slide(w, k, on))
        w.pane_actions[key] = act


def _leave_large_slide(w: MainWindow, pane: str, shown: bool) -> None:
    """A pane shown or hidden by the user ends the large slide view (which hides the table and tabs)."""
    if pane != "images" or not shown:
        w.large_slide_action.setChecked(False)


def name_class_actions(w: MainWindow, classes: tuple[str, ...]) -> None:
    """The review keys 1-9 named after the model's classes (those beyond them hidden)."""
    for k, act in enumerate(w.class_actions):
        act.setText(f"Mark as {classes[k]}" if k < len(classes) else f"Mark as class {k + 1}")
        act.setVisible(k < len(classes))


def name_undo_actions(w: MainWindow, undo: str, redo: str) -> None:
    """Undo and redo name the image they act on (disabled when there is none)."""
    for act, verb, name in ((w.undo_action, "Undo", undo), (w.redo_action, "Redo", redo)):
        act.setEnabled(bool(name))
        act.setText(f"{verb} review mark on {name}" if name else f"{verb} review mark")


def fill_recent_menu(w: MainWindow, inputs: list[InputLine]) -> None:
    """File ▸ Open recent: the current project's folders and slides, most recent first (a missing
    one is shown, disabled)."""
    w.recent_menu.clear()
    for line in inputs:
        act = w.recent_menu.addAction(line.text)
        act.setEnabled(not line.missing)
        signal = w.openFolderRequested if line.kind == "folder" else w.openSlideRequested
        act.triggered.connect(lambda _checked=False, s=signal, path=line.path: s.emit(path))
    if not inputs:
        w.recent_menu.addAction("No folders or slides opened in this project yet").setEnabled(False)


def _emit_order(w: MainWindow) -> None:
    act = w.order_group.checkedAction()
    if act is not None:
        w.orderChanged.emit(str(act.data()))


def make_menus_and_toolbar(w: MainWindow) -> None:
    menu = w.menuBar()
    file_menu = menu.addMenu("&File")
    file_menu.addActions([w.new_profile_action, w.open_folder_action, w.open_slide_action])
    w.recent_menu = file_menu.addMenu("Open recent")
    fill_recent_menu(w, [])
    order_menu = file_menu.addMenu("Arrival order")
    order_menu.addActions(list(w.order_actions.values()))
    file_menu.addSeparator()
    file_menu.addActions([w.export_action, w.settings_action])
    file_menu.addSeparator()
    file_menu.addAction(w.quit_action)
    edit_menu = menu.addMenu("&Edit")
    edit_menu.addActions([w.undo_action, w.redo_action])
    run_menu = menu.addMenu("&Run")
    run_menu.addActions([w.start_action, w.pause_action, w.resume_action, w.stop_action])
    project_menu = menu.addMenu("&Project")
    project_menu.addActions(
        [w.new_profile_action, w.rename_profile_action, w.delete_profile_action, w.reset_action]
    )
    review_menu = menu.addMenu("Re&view")
    review_menu.addActions(
        [w.queue_action, w.next_action, w.previous_action, w.confirm_action, w.correct_action]
    )
    review_menu.addAction(w.clear_mark_action)
    review_menu.addSeparator()
    review_menu.addActions(w.class_actions)
    view_menu = menu.addMenu("&View")
    view_menu.addActions(list(w.pane_actions.values()))
    view_menu.addSeparator()
    view_menu.addActions(
        [
            w.toggle_overlay_action,
            w.fit_action,
            w.full_resolution_action,
            w.fit_slide_action,
            w.heat_mode_action,
            w.large_slide_action,
        ]
    )
    help_menu = menu.addMenu("&Help")
    help_menu.addAction(w.about_action)

    bar = QToolBar("Main")
    bar.setObjectName("main-toolbar")
    bar.setIconSize(QSize(16, 16))
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    bar.addActions([w.open_folder_action, w.open_slide_action])
    bar.addSeparator()
    bar.addActions([w.start_action, w.pause_action, w.resume_action, w.stop_action])
    bar.addSeparator()
    bar.addWidget(QLabel(" Project "))
    w.profile_combo = ProjectCombo()
    w.profile_combo.setToolTip(
        "A project keeps its model, adaptation state, folders and slides, and review marks"
    )
    bar.addWidget(w.profile_combo)
    bar.addAction(w.new_profile_action)
    bar.addAction(w.reset_action)
    bar.addSeparator()
    bar.addActions([w.settings_action, w.export_action])
    w.addToolBar(bar)
    w.profile_combo.activated.connect(lambda _index: w.profileSelected.emit(w.profile_combo.current_name()))
