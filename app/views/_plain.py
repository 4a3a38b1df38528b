"""Names and classes shown as the text they are, never as markup (issue 21, case 8).

A ``QLabel`` and a tooltip decide by themselves whether their text is rich text (it starts with a
tag), so a class name ``<img src="/local/file.png">`` drew that file in the image caption, and a
file name starting with a tag turned tooltips and the "Loading …" caption into rich text. Every
label that can show a name is made with :func:`plain_label` (or set to plain text), every tooltip
that can hold one goes through :func:`plain_tooltip`, and the table's tooltips through
:class:`PlainToolTips`. Names also pass through :func:`app._engine.shown` on the way: Qt drops the
bytes of a name that are not UTF-8 (``caf\\udce9.png`` became ``caf.png``) and lays out a
right-to-left override; they are shown as U+FFFD and as a visible escape instead.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QMessageBox,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolTip,
    QWidget,
)

from app._engine import shown


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    """A label whose text is never taken for markup."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(shown(text))
    return label


def shown_lines(text: str) -> str:
    """``text`` made safe to show line by line: :func:`shown` escapes a line break into a visible
    ``\\n`` (the delete question read "…not touched.\\n\\nThis cannot be undone."), so each line
    is made safe on its own and the breaks stay breaks."""
    return "\n".join(shown(line) for line in text.split("\n"))


def _message(
    parent: QWidget, icon: QMessageBox.Icon, title: str, text: str, buttons: QMessageBox.StandardButton
) -> int:
    box = QMessageBox(icon, title, shown_lines(text), buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)  # the text names projects, folders and files
    answer: int = box.exec()
    return answer


def ask_yes_no(parent: QWidget, title: str, text: str) -> bool:
    """A yes/no question in plain text; True for yes."""
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    return _message(parent, QMessageBox.Icon.Question, title, text, buttons) == QMessageBox.StandardButton.Yes


def warn(parent: QWidget, title: str, text: str) -> None:
    """A warning in plain text."""
    _message(parent, QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok)


def plain_tooltip(text: str) -> str:
    """``text`` as a tooltip Qt shows as it is: escaped into a rich-text paragraph that keeps its
    line breaks (each line :func:`shown` on its own: ``shown`` would make a break a visible ``\\n``,
    and the table's row tooltips showed "(engine image index 5)\\nadapted: …" on one line)."""
    if not text:
        return ""
    # Line by line (shown_lines): shown() would make the line breaks visible "\n" escapes (every
    # table tooltip read "…\nadapted: …"); a name that holds a line break is escaped by whoever
    # puts it in.
    return f"<p style='white-space:pre-wrap'>{html.escape(shown_lines(text))}</p>"


class PlainToolTips(QStyledItemDelegate):
    """An item delegate whose tooltips (the model's ``ToolTipRole``) are shown as plain text.

    Only :meth:`helpEvent` is Python; painting stays in C++.
    """

    def helpEvent(
        self,
        event: QHelpEvent,
        view: QAbstractItemView,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> bool:
        text = index.data(Qt.ItemDataRole.ToolTipRole) if index.isValid() else None
        if not isinstance(text, str) or not text:
            return super().helpEvent(event, view, option, index)
        QToolTip.showText(event.globalPos(), plain_tooltip(text), view)
        return True
