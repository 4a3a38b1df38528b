"""What the main window asks the user before it sends a request: a folder or a slide to open, a
folder to export into, a new project's name and model, a project's new name, whether to reset or
delete a project; and the settings and About dialogs.

Each asking function takes the window (its signals and shared state,
:class:`~app.views.window_base.WindowBase`) and emits its request signal once the user has answered
(nothing when they cancel); the actions of :mod:`app.views._actions` and the welcome panel call them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QInputDialog

from app._engine import FieldInfo
from app.core.project_lines import ModelChoice
from app.core.settings import AppSettings, ModelCheck
from app.views.window_base import WindowBase

SLIDE_FILTER = (
    "Slides (*.svs *.tif *.tiff *.ndpi *.vms *.vmu *.scn *.mrxs *.svslide *.bif *.dcm);;All files (*)"
)


def _ask_folder(w: WindowBase, title: str, request: SignalInstance, kind: str) -> None:
    path = QFileDialog.getExistingDirectory(w, title, w.start_folders.get(kind, ""))
    if path:
        request.emit(path)


def open_folder(w: WindowBase) -> None:
    _ask_folder(w, "Open a folder of images", w.openFolderRequested, "folder")


def export(w: WindowBase) -> None:
    _ask_folder(w, "Export reports into folder", w.exportRequested, "export")


def open_slide(w: WindowBase) -> None:
    path, _ = QFileDialog.getOpenFileName(w, "Open a slide", w.start_folders.get("slide", ""), SLIDE_FILTER)
    if path:
        w.openSlideRequested.emit(path)


MODEL_FILTER = "Models (*.safetensors *.pt *.pth);;All files (*)"


def model_file(w: WindowBase, start: str) -> str | None:
    """A model checkpoint the user points at (None: cancelled)."""
    path, _ = QFileDialog.getOpenFileName(w, "Locate the model", start, MODEL_FILTER)
    return path or None


def reset_project(w: WindowBase, name: str) -> None:
    if w.confirm(
        "Reset to source model",
        f"Reset project '{name}' to the source model?\n\nIts adaptation state and its record of "
        "processed images are deleted (review marks are kept). This cannot be undone.",
    ):
        w.resetRequested.emit()


def new_project(
    w: WindowBase,
    choices: list[ModelChoice],
    taken: list[str],
    describe: Callable[[str], str],
    name: str = "",
) -> tuple[str, str] | None:
    """The New project dialog (``name`` offered): the name and the model's path, or None when cancelled."""
    from app.views.project_dialog import NewProjectDialog

    dialog = NewProjectDialog(choices, taken, describe, w.start_folders.get("model", ""), w)
    dialog.name_edit.setText(name)
    return dialog.answer() if dialog.exec() else None


def rename_project(w: WindowBase, old: str) -> None:
    name, ok = QInputDialog.getText(w, "Rename project", f"New name for project '{old}':", text=old)
    if ok and name.strip() and name.strip() != old:
        w.renameProjectRequested.emit(name.strip())


def delete_project(w: WindowBase, name: str, names: list[str] | None = None) -> None:
    """Delete a project: chosen from ``names`` (the open one offered first), after a question."""
    if names and len(names) > 1:
        offered = [name, *(n for n in names if n != name)]
        name, ok = QInputDialog.getItem(w, "Delete project", "Project to delete:", offered, 0, False)
        if not ok or not name:
            return
    if w.confirm(
        "Delete project",
        f"Delete project '{name}' with its adaptation state, rows, review marks and list of folders and "
        "slides? The images themselves are not touched.\n\nThis cannot be undone.",
    ):
        w.deleteProjectRequested.emit(name)


def settings(
    w: WindowBase,
    current: AppSettings,
    fields: dict[str, list[FieldInfo]],
    devices: list[str],
    check_model: ModelCheck | None = None,
) -> AppSettings | None:
    """The settings dialog; the edited settings, or None when cancelled."""
    from app.views.settings_dialog import SettingsDialog

    start = w.start_folders.get("model", "") or str(current.model_path().parent)
    dialog = SettingsDialog(current, fields, devices, w, check_model=check_model, start_folder=start)
    return dialog.result_settings() if dialog.exec() else None


def shortcuts(w: WindowBase, actions: list[QAction]) -> None:
    from app.views.help_dialogs import ShortcutsDialog

    ShortcutsDialog(actions, w).exec()


def guide(w: WindowBase) -> None:
    from app.views.help_dialogs import GuideDialog

    GuideDialog(w).exec()


def about(w: WindowBase, summary: str) -> None:
    from app.views.about_dialog import AboutDialog

    AboutDialog(summary, w).exec()
