"""Help ▸ Keyboard shortcuts and Help ▸ Quick guide (the Help menu held only About).

The shortcuts are read from the window's actions, so the list cannot drift from what the keys do;
the guide is a page of the app's own words (a frozen bundle carries no docs folder).
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidgetItem, QWidget

from app import APP_NAME
from app.core.names import ANSWERS_WHEN_CLEARLY_BETTER
from app.views._widgets import OkDialog, read_only_table

GUIDE = (
    f"<h3>{APP_NAME}: a day's work</h3>"
    "<ol>"
    "<li><b>Project.</b> A project keeps one model, its adaptation state at a site, the folders and slides "
    "opened in it and your review marks. Make one for each site (Project ▸ New project, Ctrl+N).</li>"
    "<li><b>Open</b> a folder of images (Ctrl+O) or a slide (Ctrl+Shift+O). Class sub-folders or a "
    "<tt>labels.csv</tt> give ground truth. A banner says when the model may not apply.</li>"
    "<li><b>Start</b> (F5). The original model decides every image; the newest image shows with its "
    "uncertainty overlay (O toggles it). Meanwhile site rules are fitted to the images (a threshold "
    "fitted to this site, a shift or class-balance correction, I-DiPT's adapted network), but none "
    "decides anything until your answers show it is better. Pause (F6), resume (F7), stop and save "
    "(F8).</li>"
    "<li><b>Review first.</b> Q opens the review queue: it asks about images chosen at random among "
    f"those a candidate rule would decide differently. A handful of answers is enough (about "
    f"{ANSWERS_WHEN_CLEARLY_BETTER} when the rule is clearly better): when they show the rule is better, it "
    "decides the folder and a banner says so; otherwise it is not used. <b>Nothing changes without "
    "answers.</b> C confirms the decision on screen, X corrects it, 1-9 mark a class, Backspace "
    "clears; Ctrl+Z undoes. A mark never replaces the dataset's label: both are kept.</li>"
    "<li><b>Certificates.</b> The Certificates tab lists each rule your answers tested, on which "
    "images, with how many answers, and what was decided.</li>"
    "<li><b>Export</b> (Ctrl+E): predictions, reviews, the PDF report and, for a slide, QuPath's "
    "GeoJSON, written as one set; Cancel leaves the folder as it was.</li>"
    "</ol>"
    "<p>For research use only. Not for use in diagnostic procedures.</p>"
)


def shortcut_rows(actions: Iterable[QAction]) -> list[tuple[str, str]]:
    """(what, keys) of every action with a shortcut, as the menus name them."""
    rows = []
    for act in actions:
        keys = act.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        if keys:
            rows.append((act.text().replace("&", "").rstrip("…"), keys))
    return rows


class ShortcutsDialog(OkDialog):
    """Every keyboard shortcut of the window, read from its actions."""

    def __init__(self, actions: Iterable[QAction], parent: QWidget | None = None) -> None:
        rows = shortcut_rows(actions)
        table = read_only_table(len(rows), 2)
        table.setHorizontalHeaderLabels(["Action", "Keys"])
        table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for r, (what, keys) in enumerate(rows):
            table.setItem(r, 0, QTableWidgetItem(what))
            table.setItem(r, 1, QTableWidgetItem(keys))
        super().__init__("Keyboard shortcuts", table, parent)
        self.table = table
        self.resize(460, 560)


class GuideDialog(OkDialog):
    """The quick guide: a day's work in six steps."""

    def __init__(self, parent: QWidget | None = None) -> None:
        label = QLabel(GUIDE)  # the app's own fixed text: no name or path in it
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        super().__init__("Quick guide", label, parent)
        self.label = label
        self.setMinimumWidth(560)
