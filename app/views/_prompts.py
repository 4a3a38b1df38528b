"""What the main window asks the user before it sends a request: a folder or a slide to open, a
folder to export into, a profile's name, whether to reset or delete a profile; and the settings
and About dialogs.

Each asking function takes the window and emits its request signal once the user has answered
(nothing when they cancel); the actions of :mod:`app.views._actions` and the welcome panel call them.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import SignalInstance
from PySide6.QtWidgets import QFileDialog, QInputDialog

from app._engine import FieldInfo
from app.core.settings import AppSettings, ModelCheck

# The functions below receive the MainWindow (typed Any: importing it here would be an import cycle).
MainWindow = Any

SLIDE_FILTER = (
    "Slides (*.svs *.tif *.tiff *.ndpi *.vms *.vmu *.scn *.mrxs *.svslide *.bif *.dcm);;All files (*)"
)


def _ask_folder(w: MainWindow, title: str, request: SignalInstance) -> None:
    path = QFileDialog.getExistingDirectory(w, title)
    if path:
        request.emit(path)


def open_folder(w: MainWindow) -> None:
    _ask_folder(w, "Open a folder of images", w.openFolderRequested)


def export(w: MainWindow) -> None:
    _ask_folder(w, "Export reports into folder", w.exportRequested)


def open_slide(w: MainWindow) -> None:
    path, _ = QFileDialog.getOpenFileName(w, "Open a slide", "", SLIDE_FILTER)
    if path:
        w.openSlideRequested.emit(path)


def reset_profile(w: MainWindow) -> None:
    name = w.profile_combo.currentText()
    if w.confirm(
        "Reset to source model",
        f"Reset profile '{name}' to the source model?\n\nIts adaptation state and its record of "
        "processed images are deleted (review marks are kept). This cannot be undone.",
    ):
        w.resetRequested.emit()


def new_profile(w: MainWindow) -> None:
    name, ok = QInputDialog.getText(w, "New site profile", "Profile name (e.g. the site):")
    if ok and name.strip():
        w.newProfileRequested.emit(name.strip())


def rename_profile(w: MainWindow) -> None:
    old = w.profile_combo.currentText()
    name, ok = QInputDialog.getText(w, "Rename site profile", f"New name for profile '{old}':", text=old)
    if ok and name.strip() and name.strip() != old:
        w.renameProfileRequested.emit(name.strip())


def delete_profile(w: MainWindow) -> None:
    name = w.profile_combo.currentText()
    if w.confirm(
        "Delete site profile",
        f"Delete profile '{name}' with its adaptation state, rows and review marks?\n\nThis cannot be undone.",
    ):
        w.deleteProfileRequested.emit(name)


def settings(
    w: MainWindow,
    current: AppSettings,
    fields: dict[str, list[FieldInfo]],
    devices: list[str],
    check_model: ModelCheck | None = None,
) -> AppSettings | None:
    """The settings dialog; the edited settings, or None when cancelled."""
    from app.views.settings_dialog import SettingsDialog

    dialog = SettingsDialog(current, fields, devices, w, check_model=check_model)
    return dialog.result_settings() if dialog.exec() else None


def about(w: MainWindow, summary: str) -> None:
    from app.views.about_dialog import AboutDialog

    AboutDialog(summary, w).exec()
