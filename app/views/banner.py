"""Banners above the work area: what went wrong (or needs a decision) and the fix as a button.

Each banner is keyed by its cause (the controller dismisses it when the cause is gone); banners that
offer the same fix are shown as one (:func:`app.core.notices.merged`), and each shows at most
:data:`MAX_LINES` lines (one when several are shown), the whole text in its tooltip, so the stack
stays a few lines tall on a 1280×800 screen."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

from app.core.notices import Banner, merged
from app.views._plain import plain_tooltip

STYLES = {
    "error": ("#fdecea", "#b3261e"),
    "warning": ("#fff4e5", "#9a6700"),
    "info": ("#e8f0fe", "#1a56b0"),
}
MAX_SHOWN = 3  # banners shown at once (after merging); older ones make room for new ones
MAX_LINES = 2  # lines of text a banner shows alone (one when several are shown)


class ElidedLabel(QLabel):
    """A label that shows at most ``lines`` lines of its text, ending in "…" when cut (the whole
    text in its tooltip)."""

    def __init__(self, text: str, lines: int = MAX_LINES) -> None:
        super().__init__()
        self.full_text, self.lines = text, lines
        self.setTextFormat(Qt.TextFormat.PlainText)  # messages name files, folders and classes
        self.setWordWrap(lines > 1)
        self.setToolTip(plain_tooltip(text))  # the whole message, as text
        self._fit()

    def set_lines(self, lines: int) -> None:
        self.lines = lines
        self.setWordWrap(lines > 1)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        metrics = self.fontMetrics()
        width = max(self.width(), 200)
        flat = " ".join(self.full_text.split())
        # Wrapped lines break at spaces: leave a few characters' room per line.
        room = self.lines * width - (self.lines - 1) * 12 * metrics.averageCharWidth()
        self.setText(metrics.elidedText(flat, Qt.TextElideMode.ElideRight, max(room, 50)))
        self.setMaximumHeight(self.lines * metrics.lineSpacing() + 4)


class BannerItem(QFrame):
    """One banner: an icon-free coloured strip with the text, the fixes and a close button.

    Signals carry the banner's key; a merged banner's close and fixes act for every key it holds.
    """

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
        self.label = ElidedLabel(banner.text)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
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

    Attributes:
        items: the item that shows each banner key (a merged item shows several).

    Signals:
        actionTriggered(str, str): the user pressed a fix (banner key, action id); the banner closes.
    """

    actionTriggered = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(4, 2, 4, 2)
        self._layout.setSpacing(2)
        self._banners: dict[str, Banner] = {}  # by key, oldest first
        self.items: dict[str, BannerItem] = {}
        self.setVisible(False)

    def banners(self) -> list[Banner]:
        """The banners as shown, merged, oldest first."""
        return merged(list(self._banners.values()))

    def show_banner(self, banner: Banner) -> None:
        self._banners.pop(banner.key, None)
        self._banners[banner.key] = banner
        while len(self.banners()) > MAX_SHOWN:
            self._banners.pop(next(iter(self._banners)))
        self._rebuild()

    def dismiss(self, key: str) -> None:
        """Dismiss the banner ``key`` (of a merged one, every banner it stands for)."""
        item = self.items.get(key)
        keys = item.banner.keys if item is not None else (key,)
        if any(self._banners.pop(k, None) is not None for k in keys):
            self._rebuild()

    def clear(self, prefix: str = "") -> None:
        """Dismiss every banner (whose key starts with ``prefix``)."""
        keys = [k for k in self._banners if k.startswith(prefix)]
        for key in keys:
            del self._banners[key]
        if keys:
            self._rebuild()

    def _rebuild(self) -> None:
        for item in set(self.items.values()):
            self._layout.removeWidget(item)
            item.deleteLater()
        self.items = {}
        shown = self.banners()
        for banner in shown:
            item = BannerItem(banner, self)
            item.label.set_lines(MAX_LINES if len(shown) == 1 else 1)
            item.actionTriggered.connect(self._on_item_action_triggered)
            item.dismissed.connect(self.dismiss)
            for key in banner.keys:
                self.items[key] = item
            self._layout.addWidget(item)
        self.setVisible(bool(shown))

    def _on_item_action_triggered(self, key: str, action: str) -> None:
        self.dismiss(key)
        self.actionTriggered.emit(key, action)
