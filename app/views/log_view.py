"""The status/log panel: timestamped messages, errors in red, with counts."""

from __future__ import annotations

import html
from datetime import datetime

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

LEVEL_COLORS = {"info": "#303030", "warning": "#9a6700", "error": "#b3261e"}


class LogView(QWidget):
    """Read-only log; the controller calls :meth:`add`."""

    def __init__(self, parent: QWidget | None = None, max_lines: int = 5000) -> None:
        super().__init__(parent)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(max_lines)
        self.counts = QLabel("")
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.clear)
        self.entries: list[tuple[str, str]] = []  # (level, message), kept for tests and the report
        bar = QHBoxLayout()
        bar.addWidget(self.counts, 1)
        bar.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.text, 1)
        layout.addLayout(bar)
        self._update_counts()

    def add(self, level: str, message: str) -> None:
        self.entries.append((level, message))
        stamp = datetime.now().strftime("%H:%M:%S")
        colour = LEVEL_COLORS.get(level, LEVEL_COLORS["info"])
        weight = "bold" if level == "error" else "normal"
        self.text.appendHtml(
            f'<span style="color:#777">{stamp}</span> '
            f'<span style="color:{colour}; font-weight:{weight}">{level.upper()}: {html.escape(message)}</span>'
        )
        self._update_counts()

    def clear(self) -> None:
        self.entries.clear()
        self.text.clear()
        self._update_counts()

    def count(self, level: str) -> int:
        return sum(1 for lvl, _ in self.entries if lvl == level)

    def _update_counts(self) -> None:
        self.counts.setText(f"{self.count('error')} errors · {self.count('warning')} warnings")
