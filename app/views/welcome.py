"""What the work area shows while nothing is open: what to do, and demo sets to try."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.views._plain import plain_label


class WelcomePanel(QWidget):
    """First-launch guidance: open a folder or a slide, or try a demo set.

    Signals:
        openFolderClicked(), openSlideClicked(): the user wants to choose something to open.
        demoClicked(str): the demo set of this kind ("histology" or "fundus").
    """

    openFolderClicked = Signal()
    openSlideClicked = Signal()
    demoClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel("<h2>Review images from a new site</h2>")
        self.text = QLabel(
            "Open a <b>folder of images</b> (class sub-folders or a <tt>labels.csv</tt> give ground truth) "
            "or a <b>whole-slide image</b>, then press <b>Start</b> (F5). The model adapts to the site "
            "as the images arrive; nothing leaves this computer.<br><br>"
            "New here? Try a demo set: a shifted site of generated images with its ground truth, "
            "run through the matching demo model."
        )
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.folder_button = QPushButton("Open folder… (Ctrl+O)")
        self.slide_button = QPushButton("Open slide… (Ctrl+Shift+O)")
        self.histology_button = QPushButton("Try the histology demo")
        self.fundus_button = QPushButton("Try the fundus demo")
        self.model_label = plain_label("")
        self.model_label.setWordWrap(True)
        self.model_label.setStyleSheet("color: #555;")
        buttons = QGridLayout()
        buttons.addWidget(self.folder_button, 0, 0)
        buttons.addWidget(self.slide_button, 0, 1)
        buttons.addWidget(self.histology_button, 1, 0)
        buttons.addWidget(self.fundus_button, 1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 16, 24, 16)
        layout.addStretch(1)
        layout.addWidget(self.heading)
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

    def set_model_text(self, text: str) -> None:
        self.model_label.setText(text)

    def set_demos(self, available: set[str]) -> None:
        """Offer only the demo sets that are installed."""
        self.histology_button.setVisible("histology" in available)
        self.fundus_button.setVisible("fundus" in available)
