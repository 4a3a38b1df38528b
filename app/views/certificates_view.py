"""The site's review certificates: each comparison of its ladder, what its reviews have shown so
far and what they decided (``docs/review-certificates.md``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app._engine import PROMOTED, REVERTED, VERIFIED
from app.core.certificates import ComparisonLine
from app.views._plain import plain_tooltip

HEADERS = (
    ("#", "The comparison's place in this folder's review (each is tested at a smaller error level)"),
    (
        "Tests",
        "What is tested against the rule in use: adapting itself (the operating point), or a candidate",
    ),
    ("Images", "The folder's first images it was frozen on when it started"),
    (
        "To review",
        "Of those, the images it decides otherwise than the rule in use (a random sample is reviewed)",
    ),
    ("Reviews", "Reviews used, in the comparison's random order"),
    (
        "Gain per changed decision",
        "Confidence bounds on the mean gain per changed decision (+1: every change a fix, −1: every change an error)",
    ),
    (
        "Verdict",
        "verified · promoted: decides the images its certificate covers · reverted: the source model decides "
        "· not better",
    ),
    ("What it says", "The verdict with its confidence level and the images it covers"),
)
INTRO = (
    "Each comparison tests, on a uniformly random sample of the images it would change, whether a rule "
    "is better than the one in use. Verified: adapting helps. Promoted: a stronger candidate decides the "
    "images its certificate covers; images that arrive later show its call as provisional until the queue's "
    "answers cover them. Reverted: adapting harms; the source model decides. Not better: it is not used. "
    "Q opens the review queue (it covers later images first, then starts the next comparison)."
)
INK = {VERIFIED: QColor(30, 130, 60), PROMOTED: QColor(30, 130, 60), REVERTED: QColor(179, 38, 30)}
VERDICT_COLUMN = 6


class CertificatesView(QWidget):
    """One line per comparison (see :class:`~app.core.certificates.ComparisonLine`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.intro = QLabel(INTRO)
        self.intro.setWordWrap(True)
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        for col, (text, tip) in enumerate(HEADERS):
            item = QTableWidgetItem(text)
            item.setToolTip(plain_tooltip(tip))
            self.table.setHorizontalHeaderItem(col, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(HEADERS) - 1, QHeaderView.ResizeMode.Stretch)
        self.lines: list[ComparisonLine] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.intro)
        layout.addWidget(self.table, 1)

    def set_lines(self, lines: list[ComparisonLine]) -> None:
        self.lines = list(lines)
        self.table.setRowCount(len(lines))
        for r, line in enumerate(lines):
            share = f" ({line.disagreements / line.covers:.0%})" if line.covers else ""
            verdict = line.verdict
            values = (
                str(line.number),
                line.what,
                str(line.covers),
                f"{line.disagreements}{share}",
                str(line.reviews),
                line.bounds,
                verdict,
                line.says,
            )
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col in (0, 2, 3, 4):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == len(values) - 1:
                    item.setToolTip(plain_tooltip(value))
                if col == VERDICT_COLUMN and line.verdict in INK:
                    item.setForeground(QBrush(INK[line.verdict]))
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(r, col, item)
