"""The toolbar's project list: each entry names the project, its kind of image and the images it
has seen ("Hospital B — Histology · 60 images seen"); the closed box shows the name only, so the
toolbar stays narrow."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import QComboBox, QMenu, QStyle, QStyleOptionComboBox, QStylePainter, QWidget

from app._engine import shown
from app.views._plain import plain_tooltip


class ProjectCombo(QComboBox):
    """A combo box of projects: the item's data is the project's name, its text the full entry.

    Signals:
        deleteRequested(str): "Delete project…" chosen on a project in the open list (right click).
    """

    deleteRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view().setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view().customContextMenuRequested.connect(self._on_list_menu)
        self.setMinimumWidth(120)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(20)  # "Hospital B pathology" whole at 1280 px

    def set_projects(
        self, names: list[str], current: str, entries: dict[str, str], tips: dict[str, str]
    ) -> None:
        """``entries``: each project's line after its name; ``tips``: its tooltip (both may lack a name)."""
        self.blockSignals(True)
        self.clear()
        for name in names:
            entry = entries.get(name, "")
            self.addItem(shown(f"{name} — {entry}" if entry else name), name)
            self.setItemData(self.count() - 1, plain_tooltip(tips.get(name, "")), Qt.ItemDataRole.ToolTipRole)
        index = self.findData(current)
        self.setCurrentIndex(index)
        self.blockSignals(False)
        view = self.view()
        view.setMinimumWidth(view.sizeHintForColumn(0) + 24)  # the popup shows whole entries

    def set_entry(self, name: str, entry: str, tip: str) -> None:
        """The line of project ``name`` (nothing else changes)."""
        index = self.findData(name)
        if index >= 0:
            self.setItemText(index, shown(f"{name} — {entry}" if entry else name))
            self.setItemData(index, plain_tooltip(tip), Qt.ItemDataRole.ToolTipRole)

    def names(self) -> list[str]:
        """Every project in the list."""
        return [str(self.itemData(i)) for i in range(self.count())]

    def _on_list_menu(self, point: QPoint) -> None:
        index = self.view().indexAt(point)
        name = index.data(Qt.ItemDataRole.UserRole) if index.isValid() else None
        if isinstance(name, str):
            menu = QMenu(self.view())
            menu.addAction(f"Delete project '{name}'…", lambda: self.deleteRequested.emit(name))
            menu.exec(self.view().viewport().mapToGlobal(point))

    def current_name(self) -> str:
        """The current project's name (not its entry)."""
        name = self.currentData()
        return name if isinstance(name, str) else self.currentText()

    def paintEvent(self, event: QPaintEvent) -> None:
        """The closed box shows the current project's name only."""
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        option.currentText = shown(self.current_name())
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)
