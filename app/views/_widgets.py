"""Pieces several views build alike: a dialog that shows one thing and an OK button, a table that
is only read."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)


class OkDialog(QDialog):
    """A dialog titled ``title`` that shows ``content`` above an OK button, which closes it."""

    def __init__(self, title: str, content: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok)
        buttons.accepted.connect(self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(content)
        layout.addWidget(buttons)


def read_only_table(rows: int, columns: int) -> QTableWidget:
    """A table of ``rows`` by ``columns`` cells that cannot be edited, without row numbers."""
    table = QTableWidget(rows, columns)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    return table
