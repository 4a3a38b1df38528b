"""The review certificates per site group: what the reviews have shown so far, and what they decided."""

from __future__ import annotations

import math

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

from app._engine import REVERTED, VERIFIED
from app.core.certificates import GroupLine, group_name
from app.views._plain import plain_tooltip

HEADERS = (
    ("Group", "The site group (–: images judged in no group)"),
    ("Images", "Images of the group processed so far"),
    ("Disagreements", "Images whose adapted decision differs from the source model's (the ones to review)"),
    ("Reviews", "Reviewed disagreements of the group"),
    (
        "Harm bound",
        "How much adapting may harm the group at most, in points of its images (95 % confidence)",
    ),
    ("Verdict", "verified: adapting helps (95 %) · reverted: the source model's decisions · undecided"),
    ("What next", "How many more reviews would likely decide the group"),
)
INTRO = (
    "Each review of a disagreement (the adapted and the source model's decisions differ) tests, per "
    "site group, whether adapting helps. Verified: it helps, at 95 % confidence. Reverted: the reviews "
    "show that it harms: the group's decisions are the source model's from now on. Undecided: the "
    "adapted decisions stand, unverified. Q opens the review queue."
)
INK = {VERIFIED: QColor(30, 130, 60), REVERTED: QColor(179, 38, 30)}


def _bound(line: GroupLine) -> str:
    if not line.reviews:
        return "not measured"
    if line.lower > 0:
        return "none (it helps)"
    return "–" if not math.isfinite(line.harm_bound) else f"≤ {100 * line.harm_bound:.1f} pts"


class CertificatesView(QWidget):
    """One line per site group (see :class:`~app.core.certificates.GroupLine`)."""

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
        self.lines: list[GroupLine] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.intro)
        layout.addWidget(self.table, 1)

    def set_lines(self, lines: list[GroupLine]) -> None:
        self.lines = list(lines)
        self.table.setRowCount(len(lines))
        for r, line in enumerate(lines):
            values = (
                group_name(line.group),
                str(line.images),
                f"{line.disagreements} ({line.disagreements / line.images:.0%})" if line.images else "0",
                str(line.reviews),
                _bound(line),
                line.verdict,
                line.decision,
            )
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if 0 < col < 5:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == 5 and line.verdict in INK:
                    item.setForeground(QBrush(INK[line.verdict]))
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(r, col, item)
