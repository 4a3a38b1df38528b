"""The parts of the main window that ``_actions`` and ``_layout`` make, declared for the type checker."""

from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QLabel, QMenu, QProgressBar, QSplitter, QStackedWidget, QTabWidget

from app.views._canvas import ElidedLabel
from app.views.project_combo import ProjectCombo


class WindowParts:
    """Attributes :class:`~app.views.main_window.MainWindow` gets from ``app.views._actions``
    (``make_actions``, ``make_menus_and_toolbar``) and ``app.views._layout`` (``make_panes``,
    ``make_status_bar``); only annotations, no behaviour."""

    # made by app.views._actions
    open_folder_action: QAction
    open_slide_action: QAction
    export_action: QAction
    quit_action: QAction
    start_action: QAction
    pause_action: QAction
    resume_action: QAction
    stop_action: QAction
    reset_action: QAction
    settings_action: QAction
    about_action: QAction
    toggle_overlay_action: QAction
    fit_action: QAction
    full_resolution_action: QAction
    fit_slide_action: QAction
    heat_mode_action: QAction
    large_slide_action: QAction  # checkable: the slide and the tile beside it fill the window
    new_profile_action: QAction
    rename_profile_action: QAction
    delete_profile_action: QAction
    next_action: QAction
    previous_action: QAction
    confirm_action: QAction
    correct_action: QAction
    clear_mark_action: QAction
    queue_action: QAction
    undo_action: QAction
    redo_action: QAction
    class_actions: list[QAction]
    order_group: QActionGroup
    order_actions: dict[str, QAction]
    pane_actions: dict[str, QAction]
    profile_combo: ProjectCombo
    recent_menu: QMenu  # File ▸ Open recent: the current project's folders and slides
    # made by app.views._layout
    image_split: QSplitter  # the slide over the image
    left: QStackedWidget  # the welcome panel or image_split
    bottom_tabs: QTabWidget  # plots, metrics, certificates, log
    right: QSplitter  # the table over bottom_tabs
    main_split: QSplitter
    phase_label: QLabel
    progress_bar: QProgressBar
    progress_label: ElidedLabel
    model_label: ElidedLabel
    profile_label: ElidedLabel
    reviewer_label: ElidedLabel
