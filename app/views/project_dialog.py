"""The New project dialog: a name and the project's model, shown by what its card says.

The model is chosen when the project is made -- one of the models offered (the current project's,
the demo models that are installed) or a checkpoint file -- and the dialog shows the chosen card's
description (kind of image, classes, network, training site) before anything is created, so a new
project never takes the last-used model silently.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.project_lines import REFERENCE_SUFFIX, UNUSABLE, ModelChoice, model_file_problem
from app.core.projects import ProjectError, check_name
from app.views._plain import plain_label, plain_tooltip

MODEL_FILTER = "Model checkpoints (*.safetensors);;All files (*)"


class NewProjectDialog(QDialog):
    """Asks for a new project's name and model.

    Args:
        choices: the models offered in the list (a file can be added with "Choose a file…").
        taken: the names of the existing projects (refused).
        describe: a checkpoint's card in one line, or why it cannot be used.
        start_folder: where the file chooser starts ("" for the working directory).
    """

    def __init__(
        self,
        choices: list[ModelChoice],
        taken: list[str],
        describe: Callable[[str], str],
        start_folder: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("New project")
        self.setMinimumWidth(560)
        self._taken = {name.casefold() for name in taken}
        self._describe = describe
        self._start_folder = start_folder
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. the site: Hospital B, pathology")
        self.model_combo = QComboBox()
        for choice in choices:
            self.model_combo.addItem(choice.label, choice.path)
        self.file_button = QPushButton("Choose a file…")
        self.model_text = plain_label("")
        self.model_text.setWordWrap(True)
        self.problem = plain_label("")
        self.problem.setStyleSheet("color: #a40000;")
        self.problem.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Create project")
        form = QFormLayout()
        form.addRow("Project name", self.name_edit)
        form.addRow("Model", self.model_combo)
        form.addRow("", self.file_button)
        form.addRow("This model", self.model_text)
        intro = plain_label(
            "A project keeps one model, the adaptation state it reaches at a site, the folders and "
            "slides opened in it, their review marks and reports. Choose the model that was trained "
            "on the kind of images this site sends."
        )
        intro.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        self.name_edit.textChanged.connect(self._check)
        self.model_combo.currentIndexChanged.connect(self._check)
        self.file_button.clicked.connect(self._choose_file)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self._check()

    def add_model_file(self, path: str) -> None:
        """Offer ``path`` in the list and choose it."""
        index = self.model_combo.findData(path)
        if index < 0:
            self.model_combo.addItem(f"File: {Path(path).name}", path)
            index = self.model_combo.count() - 1
        self.model_combo.setCurrentIndex(index)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose the project's model", self._start_folder, MODEL_FILTER
        )
        if path:
            self.add_model_file(path)

    def model_path(self) -> str:
        data = self.model_combo.currentData()
        return str(data) if data else ""

    def answer(self) -> tuple[str, str] | None:
        """The name and the model's path, or None while either cannot be used."""
        return (self.name_edit.text().strip(), self.model_path()) if not self._problem() else None

    def _problem(self) -> str:
        path = self.model_path()
        if not path:
            return "Choose the project's model."
        if path.endswith(REFERENCE_SUFFIX):  # a model's source reference is not a model
            return f"This file cannot be used: {model_file_problem(Path(path))}."
        text = self._describe(path)
        if text.startswith(UNUSABLE):
            return f"This model cannot be used: {text}."
        name = self.name_edit.text().strip()
        if not name:
            return "Name the project."
        try:
            check_name(name)
        except ProjectError as exc:
            return str(exc)
        if name.casefold() in self._taken:
            return f"A project named '{name}' exists already."
        return ""

    def _check(self) -> None:
        path = self.model_path()
        self.model_text.setText(self._describe(path) if path else "")
        self.model_text.setToolTip(plain_tooltip(path))
        problem = self._problem()
        self.problem.setText(problem)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(not problem)
