"""The main window's actions, menus and toolbar: a typed part of the window.

:class:`WindowActions` makes every action with its shortcut and connects it to the window's request
signals, to the views or to a question of :mod:`app.views._prompts`; it builds the menus and the
toolbar (with the project list) and shows or collapses the panes it has actions for.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QLabel, QMenu, QMenuBar, QToolBar

from app.core.arrival import ORDER_LABELS
from app.core.recent import InputLine
from app.core.settings import DEMO_NAMES
from app.views import _prompts as ask
from app.views._layout import PANES, Panes
from app.views._plain import plain_tooltip
from app.views.cohort_view import open_cohort_window
from app.views.project_combo import ProjectCombo
from app.views.window_base import Views, WindowBase


def action(
    w: WindowBase,
    text: str,
    slot: Callable[[], object],
    shortcut: str | QKeySequence.StandardKey | None = None,
    short: str | None = None,
    tip: str | None = None,
) -> QAction:
    """An action with an optional shortcut, a shorter toolbar text and a tooltip."""
    act = QAction(text, w)
    if shortcut is not None:
        act.setShortcut(QKeySequence(shortcut))
    if short is not None:
        act.setIconText(short)
    if tip is not None:
        act.setToolTip(tip)
    act.triggered.connect(slot)
    return act


class WindowActions:
    """Every action of the main window, its menus and its toolbar (see the module notes).

    Args:
        w: the window (its request signals and what its questions need).
        views: its views (the image, slide and table actions act on them).
        panes: its panes (shown, collapsed, the large slide view).
    """

    def __init__(self, w: WindowBase, views: Views, panes: Panes) -> None:
        self._w, self._views, self._panes = w, views, panes
        table, image, slide = views.table, views.image, views.slide
        self.project_combo = ProjectCombo()
        name = self.project_combo.current_name
        self.open_folder = action(w, "Open folder…", lambda: ask.open_folder(w), "Ctrl+O", "Open folder")
        self.open_slide = action(w, "Open slide…", lambda: ask.open_slide(w), "Ctrl+Shift+O", "Open slide")
        self.open_cohort = action(
            w,
            "Open cohort…",
            lambda: open_cohort_window(w),
            tip="A cohort run by f2tta run: its sites, their progress, a run in the background, each site's review",
        )
        self.export = action(w, "Export reports…", lambda: ask.export(w), "Ctrl+E", "Export")
        self.quit = action(w, "Quit", w.close, QKeySequence.StandardKey.Quit)
        self.start = action(w, "Start", w.startRequested.emit, "F5", tip="Process the images (F5)")
        self.pause = action(w, "Pause", w.pauseRequested.emit, "F6", tip="Pause after this image (F6)")
        self.resume = action(w, "Resume", w.resumeRequested.emit, "F7", tip="Resume (F7)")
        self.stop = action(w, "Stop", w.stopRequested.emit, "F8", tip="Stop after this image and save (F8)")
        self.reset = action(
            w, "Reset project to the source model…", lambda: ask.reset_project(w, name()), short="Reset…"
        )
        self.settings = action(w, "Settings…", w.settingsRequested.emit, "Ctrl+,", "Settings")
        self.about = action(w, "About", w.aboutRequested.emit)
        self.shortcuts = action(w, "Keyboard shortcuts", lambda: ask.shortcuts(w, self.all()), "F1")
        self.guide = action(w, "Quick guide", lambda: ask.guide(w))
        # The demo sets from any project (they were on an empty project's welcome page only).
        self.demos = {
            kind: action(
                w,
                f"Try the {name} demo",
                partial(w.demoRequested.emit, kind),
                tip=f"The {name} demo set through its demo model, in a project of its own",
            )
            for kind, name in DEMO_NAMES.items()
        }
        self.toggle_overlay = action(w, "Toggle overlay", image.toggle_overlay, "O")
        self.fit = action(w, "Fit image", image.fit, "F")
        self.full_resolution = action(w, "Slide at full resolution", slide.full_resolution, "Z")
        self.fit_slide = action(w, "Whole slide", slide.fit, "Shift+Z")
        self.heat_mode = action(w, "Slide heat map: filled, outlines, off", slide.cycle_heat_mode, "H")
        self.large_slide = QAction("Large slide view", w, checkable=True, shortcut=QKeySequence("L"))
        self.large_slide.setEnabled(False)  # while a slide is open
        self.large_slide.toggled.connect(self._on_large_slide_toggled)
        self.large_slide.toggled.connect(slide.large_button.setChecked)
        slide.large_button.toggled.connect(self.large_slide.setChecked)
        self.new_project = action(
            w,
            "New project…",
            w.newProjectRequested.emit,
            "Ctrl+N",
            "New project…",
            "A project with its own model",
        )
        self.rename_project = action(w, "Rename project…", lambda: ask.rename_project(w, name()))
        self.delete_project = action(
            w, "Delete project…", lambda: ask.delete_project(w, name(), self.project_combo.names())
        )
        self.next = action(w, "Next image", lambda: table.step(1), "N")
        self.previous = action(w, "Previous image", lambda: table.step(-1), "P")
        self.confirm = action(w, "Confirm prediction", table.confirm_selected, "C")
        self.correct = action(w, "Correct prediction…", table.correct_selected, "X")
        self.clear_mark = action(w, "Clear review mark", table.clear_selected_mark, "Backspace")
        self.queue = action(
            w,
            "Review queue",
            w.queueRequested.emit,
            "Q",
            tip=(
                "The images to review, in random order: those a candidate decides otherwise than the rule in "
                "use, a uniform sample, so the certificate holds for all of them (Q)"
            ),
        )
        self.undo = action(w, "Undo review mark", lambda: w.undoRequested.emit(False), "Ctrl+Z")
        self.redo = action(w, "Redo review mark", lambda: w.undoRequested.emit(True), "Ctrl+Shift+Z")
        self.undo.setEnabled(False)
        self.redo.setEnabled(False)
        self.classes: list[QAction] = []
        for digit in range(1, 10):
            act = action(w, f"Mark as class {digit}", partial(table.mark_selected, digit - 1), str(digit))
            act.setVisible(digit <= 2)
            self.classes.append(act)
        self.order_group = QActionGroup(w)
        self.orders: dict[str, QAction] = {}
        for key, text in ORDER_LABELS.items():
            act = QAction(text, w, checkable=True)
            act.setData(key)
            act.triggered.connect(self._emit_order)
            self.order_group.addAction(act)
            self.orders[key] = act
        self.orders["name"].setChecked(True)
        self.panes: dict[str, QAction] = {}
        for key, text, shortcut in zip(
            PANES,
            ("Image panel", "Table", "Plots, metrics and log"),
            ("Ctrl+1", "Ctrl+2", "Ctrl+3"),
            strict=True,
        ):
            act = QAction(text, w, checkable=True)
            act.setChecked(True)
            act.setShortcut(QKeySequence(shortcut))
            act.toggled.connect(partial(self._on_pane_toggled, key))
            self.panes[key] = act
        self.recent_menu = QMenu("Open recent", w)  # the current project's folders and slides
        self.order_menu = QMenu("Arrival order", w)
        self.order_menu.addActions(list(self.orders.values()))
        self.help_menu = QMenu("&Help", w)
        self.help_menu.addActions([self.shortcuts, self.guide])
        self.help_menu.addSeparator()
        self.help_menu.addActions(list(self.demos.values()))
        self.help_menu.addSeparator()
        self.help_menu.addAction(self.about)
        self.project_combo.setToolTip(
            "A project keeps its model, adaptation state, folders and slides, and review marks"
        )
        self.project_combo.activated.connect(lambda _index: w.projectSelected.emit(name()))
        self.project_combo.deleteRequested.connect(lambda project: ask.delete_project(w, project))

    # -- what the window asks of its actions ---------------------------------------------------
    def all(self) -> list[QAction]:
        """Every action, in the order the menus list them."""
        return [a for a in vars(self).values() if isinstance(a, QAction)] + self.classes

    def show_pane(self, pane: str, visible: bool) -> None:
        """Show or collapse a pane ("images", "table", "tabs") so the rest gets the room."""
        self._panes.pane(pane).setVisible(visible)
        if self.panes[pane].isChecked() != visible:
            self.panes[pane].setChecked(visible)

    def show_slide(self, shown: bool) -> None:
        """Show the slide pane (a slide is open) or hide it, and leave the large slide view."""
        if not shown:
            self.large_slide.setChecked(False)
        self.large_slide.setEnabled(shown)
        self._panes.show_slide(shown, self._w)

    def name_classes(self, classes: tuple[str, ...]) -> None:
        """The review keys 1-9 named after the model's classes (those beyond them hidden)."""
        for k, act in enumerate(self.classes):
            act.setText(f"Mark as {classes[k]}" if k < len(classes) else f"Mark as class {k + 1}")
            act.setVisible(k < len(classes))

    def name_undo(self, undo: str, redo: str) -> None:
        """Undo and redo name the image they act on (disabled when there is none)."""
        for act, verb, name in ((self.undo, "Undo", undo), (self.redo, "Redo", redo)):
            act.setEnabled(bool(name))
            act.setText(f"{verb} review mark on {name}" if name else f"{verb} review mark")

    def fill_recent(self, inputs: list[InputLine]) -> None:
        """File ▸ Open recent: the current project's folders and slides, most recent first (a missing
        one is shown, disabled)."""
        self.recent_menu.clear()
        for line in inputs:
            act = self.recent_menu.addAction(line.text)  # an action's text is never markup; its tooltip
            act.setToolTip(plain_tooltip(line.path))  # (the text, unless set) could be taken for it
            act.setEnabled(not line.missing)
            signal = self._w.openFolderRequested if line.kind == "folder" else self._w.openSlideRequested
            act.triggered.connect(lambda _checked=False, s=signal, path=line.path: s.emit(path))
        if not inputs:
            self.recent_menu.addAction("No folders or slides opened in this project yet").setEnabled(False)

    # -- menus and toolbar ---------------------------------------------------------------------
    def build_menus(self, menu: QMenuBar) -> None:
        file_menu = menu.addMenu("&File")
        file_menu.addActions([self.new_project, self.open_folder, self.open_slide, self.open_cohort])
        file_menu.addMenu(self.recent_menu)
        self.fill_recent([])
        file_menu.addMenu(self.order_menu)
        file_menu.addSeparator()
        file_menu.addActions([self.export, self.settings])
        file_menu.addSeparator()
        file_menu.addAction(self.quit)
        menu.addMenu("&Edit").addActions([self.undo, self.redo])
        menu.addMenu("&Run").addActions([self.start, self.pause, self.resume, self.stop])
        menu.addMenu("&Project").addActions(
            [self.new_project, self.rename_project, self.delete_project, self.reset]
        )
        review_menu = menu.addMenu("Re&view")
        review_menu.addActions([self.queue, self.next, self.previous, self.confirm, self.correct])
        review_menu.addAction(self.clear_mark)
        review_menu.addSeparator()
        review_menu.addActions(self.classes)
        view_menu = menu.addMenu("&View")
        view_menu.addActions(list(self.panes.values()))
        view_menu.addSeparator()
        view_menu.addActions(
            [
                self.toggle_overlay,
                self.fit,
                self.full_resolution,
                self.fit_slide,
                self.heat_mode,
                self.large_slide,
            ]
        )
        menu.addMenu(self.help_menu)

    def build_toolbar(self) -> QToolBar:
        bar = QToolBar("Main")
        bar.setObjectName("main-toolbar")
        bar.setIconSize(QSize(16, 16))
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        bar.addActions([self.open_folder, self.open_slide])
        bar.addSeparator()
        bar.addActions([self.start, self.pause, self.resume, self.stop])
        bar.addSeparator()
        bar.addWidget(QLabel(" Project "))
        bar.addWidget(self.project_combo)
        bar.addAction(self.new_project)
        bar.addAction(self.reset)
        bar.addSeparator()
        bar.addActions([self.settings, self.export])
        return bar

    # -- slots ---------------------------------------------------------------------------------
    def _emit_order(self) -> None:
        act = self.order_group.checkedAction()
        if act is not None:
            self._w.orderChanged.emit(str(act.data()))

    def _on_pane_toggled(self, pane: str, shown: bool) -> None:
        self.show_pane(pane, shown)
        if pane != "images" or not shown:  # a pane shown or hidden by the user ends the large view
            self.large_slide.setChecked(False)

    def _on_large_slide_toggled(self, on: bool) -> None:
        if on:
            self.show_pane("images", True)
        self._panes.set_large_slide(on)
