"""The About dialog: version, the research-use notice and the loaded model."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app import APP_NAME, RESEARCH_NOTICE, __version__
from app.views._widgets import OkDialog


class AboutDialog(OkDialog):
    def __init__(self, model_summary: str = "", parent: QWidget | None = None) -> None:
        text = (
            f"<h2>{html.escape(APP_NAME)}</h2>"
            f"<p>Version {html.escape(__version__)}</p>"
            "<p>Review images from a new hospital site, review first: the original model decides every "
            "image until your answers in the review queue show that a rule fitted to the site is "
            "better (I-DiPT+; the paper's test-time adaptation, I-DiPT, image-level disentangled prompt "
            "tuning, is one of the rules tested).</p>"
            f'<p style="color:#b3261e"><b>{html.escape(RESEARCH_NOTICE)}</b></p>'
        )
        if model_summary:
            text += f"<p><b>Model</b><br>{html.escape(model_summary)}</p>"
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        super().__init__(f"About {APP_NAME}", label, parent)
        self.label = label
        self.setMinimumWidth(420)
