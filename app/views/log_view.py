"""The status/log panel: timestamped messages, errors in red, with counts."""

from __future__ import annotations

import html
from collections import deque
from datetime import datetime

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app._engine import shown

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
        # (level, message) of the lines shown, for tests; bounded like the text, so a night of
        # per-image errors cannot grow it, and counted incrementally so adding a line stays O(1).
        self.entries: deque[tuple[str, str]] = deque(maxlen=max_lines)
        self._counts: dict[str, int] = {}
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
        self._counts[level] = self._counts.get(level, 0) + 1
        stamp = datetime.now().strftime("%H:%M:%S")
        colour = LEVEL_COLORS.get(level, LEVEL_COLORS["info"])
        weight = "bold" if level == "error" else "normal"
        self.text.appendHtml(
            f'<span style="color:#777">{stamp}</span> '
            f'<span style="color:{colour}; font-weight:{weight}">{level.upper()}: {html.escape(shown(message))}</span>'
        )
        self._update_counts()

    def clear(self) -> None:
        self.entries.clear()
        self._counts.clear()
        self.text.clear()
        self._update_counts()

    def count(self, level: str) -> int:
        """Messages of ``level`` since the last clear (including lines no longer shown)."""
        return self._counts.get(level, 0)

    def _update_counts(self) -> None:
        self.counts.setText(f"{self.count('error')} errors · {self.count('warning')} warnings")
