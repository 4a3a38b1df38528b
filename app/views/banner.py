"""Banners above the work area: what went wrong (or needs a decision) and the fix as a button."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QToolButton, QVBoxLayout, QWidget

from app.core.notices import Banner
from app.views._plain import plain_label

STYLES = {
    "error": ("#fdecea", "#b3261e"),
    "warning": ("#fff4e5", "#9a6700"),
    "info": ("#e8f0fe", "#1a56b0"),
}
MAX_SHOWN = 3  # older banners make room for new ones


class BannerItem(QFrame):
    """One banner: an icon-free coloured strip with the text, the fixes and a close button."""

    actionTriggered = Signal(str, str)  # banner key, action id
    dismissed = Signal(str)  # banner key

    def __init__(self, banner: Banner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.banner = banner
        back, ink = STYLES.get(banner.level, STYLES["info"])
        self.setObjectName("banner")
        self.setStyleSheet(
            f"QFrame#banner {{ background: {back}; border: 1px solid {ink}; border-radius: 3px; }}"
            f"QFrame#banner QLabel {{ color: {ink}; }}"
        )
        self.label = plain_label(banner.text)  # messages name files, folders and classes
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        self.buttons: dict[str, QPushButton] = {}
        for action, text in banner.actions:
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, a=action: self.actionTriggered.emit(self.banner.key, a))
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignVCenter)
            self.buttons[action] = button
        close = QToolButton()
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(lambda: self.dismissed.emit(self.banner.key))
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)


class BannerBar(QWidget):
    """The stack of banners; :meth:`show_banner` adds or replaces one by its key.

    Signals:
        actionTriggered(str, str): the user pressed a fix (banner key, action id); the banner closes.
    """

    actionTriggered = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(4, 2, 4, 2)
        self._layout.setSpacing(2)
        self.items: dict[str, BannerItem] = {}
        self.setVisible(False)

    def show_banner(self, banner: Banner) -> None:
        self.dismiss(banner.key)
        while len(self.items) >= MAX_SHOWN:
            self.dismiss(next(iter(self.items)))
        item = BannerItem(banner, self)
        item.actionTriggered.connect(self._on_item_action_triggered)
        item.dismissed.connect(self.dismiss)
        self.items[banner.key] = item
        self._layout.addWidget(item)
        self.setVisible(True)

    def dismiss(self, key: str) -> None:
        item = self.items.pop(key, None)
        if item is not None:
            self._layout.removeWidget(item)
            item.deleteLater()
        self.setVisible(bool(self.items))

    def clear(self, prefix: str = "") -> None:
        """Dismiss every banner (whose key starts with ``prefix``)."""
        for key in [k for k in self.items if k.startswith(prefix)]:
            self.dismiss(key)

    def _on_item_action_triggered(self, key: str, action: str) -> None:
        self.dismiss(key)
        self.actionTriggered.emit(key, action)
