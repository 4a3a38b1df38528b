"""What the work area shows while nothing is open: the current project, its folders and slides to
resume, what to do, and demo sets to try."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.names import ANSWERS_WHEN_CLEARLY_BETTER
from app.core.recent import InputLine
from app.core.settings import DEMO_NAMES
from app.views._plain import plain_label, plain_tooltip

SHOWN_INPUTS = 8  # the welcome page lists this many; File ▸ Open recent lists them all


class WelcomePanel(QWidget):
    """The current project and its inputs to resume; first-launch guidance: open a folder or a
    slide, make a project, or try a demo set.

    Signals:
        openFolderClicked(), openSlideClicked(): the user wants to choose something to open.
        demoClicked(str): the demo set of this kind ("histology", "fundus" or "tissue").
        newProjectClicked(): the user wants a new project.
        inputClicked(str, str): open this folder or slide again (path, "folder" or "slide").
        reportsClicked(str): show the folder the reports of an input were written into.
    """

    openFolderClicked = Signal()
    openSlideClicked = Signal()
    demoClicked = Signal(str)
    newProjectClicked = Signal()
    inputClicked = Signal(str, str)
    reportsClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel("<h2>Review images from a new site</h2>")
        self.project_label = plain_label("")
        self.project_label.setWordWrap(True)
        self.project_label.setStyleSheet("font-weight: bold;")
        self.inputs_heading = plain_label("")
        self.inputs_box = QVBoxLayout()
        self.inputs_box.setSpacing(2)
        self.input_rows: list[tuple[QLabel, QPushButton]] = []
        self.report_buttons: list[QPushButton] = []  # an input's "Reports", where it has some
        self._open_allowed = True
        self.text = QLabel(
            "Open a <b>folder of images</b> (class sub-folders or a <tt>labels.csv</tt> give ground truth) "
            "or a <b>whole-slide image</b>, then press <b>Start</b> (F5). The original model decides "
            "every image; nothing leaves this computer. Then press <b>Q</b>: the review queue asks about "
            "images chosen at random among those a site rule would decide differently. When your "
            f"answers show the rule is better (a handful: about {ANSWERS_WHEN_CLEARLY_BETTER} when it "
            "clearly is), it decides the folder; without answers nothing changes.<br><br>"
            "New here? Try a demo set: a shifted site of generated images with its ground truth, "
            "run through the matching demo model."
        )
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.folder_button = QPushButton("Open folder… (Ctrl+O)")
        self.slide_button = QPushButton("Open slide… (Ctrl+Shift+O)")
        self.histology_button = QPushButton("Try the histology demo")
        self.fundus_button = QPushButton("Try the fundus demo")
        self.tissue_button = QPushButton(f"Try the {DEMO_NAMES['tissue']} demo")
        self.new_project_button = QPushButton("New project… (Ctrl+N)")
        self.model_label = plain_label("")
        self.model_label.setWordWrap(True)
        self.model_label.setStyleSheet("color: #555;")
        buttons = QGridLayout()
        buttons.addWidget(self.folder_button, 0, 0)
        buttons.addWidget(self.slide_button, 0, 1)
        buttons.addWidget(self.histology_button, 1, 0)
        buttons.addWidget(self.fundus_button, 1, 1)
        buttons.addWidget(self.tissue_button, 2, 0)
        buttons.addWidget(self.new_project_button, 2, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 16, 24, 16)
        layout.addStretch(1)
        layout.addWidget(self.heading)
        layout.addWidget(self.project_label)
        layout.addWidget(self.inputs_heading)
        layout.addLayout(self.inputs_box)
        layout.addSpacing(8)
        layout.addWidget(self.text)
        layout.addSpacing(8)
        layout.addLayout(buttons)
        layout.addSpacing(8)
        layout.addWidget(self.model_label)
        layout.addStretch(2)
        self.folder_button.clicked.connect(self.openFolderClicked)
        self.slide_button.clicked.connect(self.openSlideClicked)
        self.histology_button.clicked.connect(lambda: self.demoClicked.emit("histology"))
        self.fundus_button.clicked.connect(lambda: self.demoClicked.emit("fundus"))
        self.tissue_button.clicked.connect(lambda: self.demoClicked.emit("tissue"))
        self.new_project_button.clicked.connect(self.newProjectClicked)
        self.set_inputs([])

    def set_model_text(self, text: str) -> None:
        self.model_label.setText(text)

    def set_demos(self, available: set[str]) -> None:
        """Offer only the demo sets that are installed."""
        self.histology_button.setVisible("histology" in available)
        self.fundus_button.setVisible("fundus" in available)
        self.tissue_button.setVisible("tissue" in available)

    def set_project(self, name: str, details: str) -> None:
        """The current project and its model (by its card) and images seen."""
        self.project_label.setText(
            f"Project '{name}' · {details.replace(chr(10), ' · ')}" if details else f"Project '{name}'"
        )

    def set_inputs(self, inputs: list[InputLine]) -> None:
        """The project's folders and slides, most recent first, each with an Open button (a missing
        one is listed as missing, without a button)."""
        for widget in [w for row in self.input_rows for w in row] + self.report_buttons:
            widget.deleteLater()
        while self.inputs_box.count():
            item = self.inputs_box.takeAt(0)
            if item is not None and item.layout() is not None:
                item.layout().deleteLater()  # type: ignore[union-attr]
        self.input_rows, self.report_buttons = [], []
        self.inputs_heading.setText(
            "Folders and slides of this project (most recent first):"
            if inputs
            else "No folders or slides opened in this project yet."
        )
        for line in inputs[:SHOWN_INPUTS]:
            label = plain_label(line.text)
            label.setWordWrap(
                True
            )  # a long line must not widen the left pane (the table's names were cut to "no…ng")
            label.setToolTip(plain_tooltip(line.path))  # a path is text, never markup
            button = QPushButton("Missing" if line.missing else "Resume" if line.images else "Open")
            button.setEnabled(not line.missing and self._open_allowed)
            button.setToolTip(plain_tooltip(line.path))
            button.clicked.connect(
                lambda _checked=False, p=line.path, k=line.kind: self.inputClicked.emit(p, k)
            )
            row = QHBoxLayout()
            row.addWidget(label, 1)
            row.addWidget(button)
            if line.reports is not None:  # the project's reports of it: open their folder
                reports = QPushButton("Reports")
                reports.setToolTip(plain_tooltip(line.reports))
                reports.clicked.connect(lambda _checked=False, p=line.reports: self.reportsClicked.emit(p))
                row.addWidget(reports)
                self.report_buttons.append(reports)
            self.inputs_box.addLayout(row)
            self.input_rows.append((label, button))

    def set_allowed(self, open_allowed: bool, settings_allowed: bool) -> None:
        """Opening (folders, slides, the project's inputs) and changing project (new, demos) are
        possible only while no run goes on and a model is loaded."""
        self._open_allowed = open_allowed
        for button in (self.folder_button, self.slide_button):
            button.setEnabled(open_allowed)
        for _label, button in self.input_rows:
            button.setEnabled(open_allowed and button.text() != "Missing")
        for button in (self.histology_button, self.fundus_button, self.new_project_button):
            button.setEnabled(settings_allowed)
