"""The site's review certificates: each comparison of its ladder, what its reviews have shown so
far and what they decided (``docs/review-certificates.md``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHeaderView,
    QLabel,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app._engine import Certificate, Verdict
from app.views._plain import plain_tooltip
from app.views._widgets import read_only_table

HEADERS = (
    ("#", "The comparison's place in this folder's review"),
    ("Rule\ntested", "The rule your answers compare with the one in use (its tooltip says what it does)"),
    ("Images", "The folder's first images it was compared on (its certificate's reach, once it is in use)"),
    (
        "Calls\notherwise",
        "Of those, the images it calls otherwise than the rule in use (some are asked in the queue)",
    ),
    ("Answers", "Your answers it used, in its random order"),
    (
        "Verdict",
        "better, in use: it decides the images its certificate covers · better, replaced: a later "
        "rule your answers showed better decides instead · worse, turned back · not shown better: not used",
    ),
    ("What your answers showed", "What the comparison showed and what it decides"),
    ("Level", "Details: the confidence level it is tested at (each comparison at a smaller error level)"),
    (
        "Gain\nbounds",
        "Details: confidence bounds on the mean gain per changed decision (+1: every change a fix, "
        "−1: every change an error)",
    ),
)
INTRO = (
    "Each line compares a rule with the one in use, from your answers about images chosen at random among "
    "those it would call otherwise (a threshold fitted to your answers counts those it was fitted on as "
    "given, and asks about the others). Better, in use: it decides this folder's images its certificate covers; "
    "images that arrive later show its call as provisional until your answers cover them. Worse, turned "
    "back: the original model decides. Not shown better: it is not used. Q opens the review queue."
)
INK = {
    Verdict.VERIFIED: QColor(30, 130, 60),
    Verdict.PROMOTED: QColor(30, 130, 60),
    Verdict.REVERTED: QColor(179, 38, 30),
}
RULE_COLUMN = 1
VERDICT_COLUMN = 5
SHOWED_COLUMN = 6  # what the answers showed: the sentence, wrapped whole in its cell
DETAIL_COLUMNS = (7, 8)  # shown with "Show details"


class CertificatesView(QWidget):
    """One line per comparison (an engine :class:`~engine.run.certificates.Certificate`); the
    statistics (level, bounds) are details, shown on request."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.intro = QLabel(INTRO)
        self.intro.setWordWrap(True)
        self.details = QCheckBox("Show details (levels, bounds)")
        self.details.setToolTip(plain_tooltip("The statistics behind each line: its level and gain bounds"))
        self.details.toggled.connect(self._show_details)
        self.table = read_only_table(0, len(HEADERS))
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        # The sentence wraps in its cell and its row is as tall as it needs: at 1280x800 it was cut
        # at the cell's end ("... was shown better by 6 ans..."), one 22-px line, whole only in its tooltip.
        self.table.setWordWrap(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.table.verticalHeader().setMinimumSectionSize(22)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        for col, (text, tip) in enumerate(HEADERS):
            item = QTableWidgetItem(text)
            item.setToolTip(plain_tooltip(tip))
            self.table.setHorizontalHeaderItem(col, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(SHOWED_COLUMN, QHeaderView.ResizeMode.Stretch)
        # The other columns leave the sentence its room (two-line headings; a long rule's name wraps
        # as the sentence does), also with the details' columns shown at 1280x800.
        header.setSectionResizeMode(RULE_COLUMN, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(RULE_COLUMN, self.fontMetrics().horizontalAdvance("best-fit threshold") + 14)
        self.lines: list[Certificate] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.intro)
        layout.addWidget(self.details)
        layout.addWidget(self.table, 1)
        self._show_details(False)

    def _show_details(self, on: bool) -> None:
        for col in DETAIL_COLUMNS:
            self.table.setColumnHidden(col, not on)

    def set_lines(self, lines: list[Certificate]) -> None:
        self.lines = list(lines)
        self.table.setRowCount(len(lines))
        for r, line in enumerate(lines):
            share = f" ({line.disagreements / line.covers:.0%})" if line.covers else ""
            what = line.candidate.short + (f", {line.part.partition(' (')[0]}" if line.part else "")
            values = (
                str(line.number),
                what,
                str(line.covers),
                f"{line.disagreements}{share}",
                f"{line.reviews} + {line.earlier} earlier" if line.earlier else str(line.reviews),
                line.verdict_words,
                line.says[:1].upper() + line.says[1:],
                f"{100 * line.level:.1f} %".replace(".0 %", " %"),
                line.bounds,
            )
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col in (0, 2, 3, 4):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == 1:
                    item.setToolTip(plain_tooltip(f"{line.candidate.short}: {line.candidate.means}"))
                if col == SHOWED_COLUMN:
                    item.setToolTip(plain_tooltip(f"{value}\n\nDetails: {line.details}"))
                if (
                    col == VERDICT_COLUMN
                    and line.verdict in INK
                    and (line.in_use or line.verdict != Verdict.PROMOTED)
                ):
                    item.setForeground(QBrush(INK[line.verdict]))
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(r, col, item)
