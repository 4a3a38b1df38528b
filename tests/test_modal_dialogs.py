"""A modal dialog in a test fails it at once (the autouse fixture in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest
from support import ModalDialogInTest


def test_a_modal_message_fails_the_test_at_once(qtbot: object) -> None:
    from PySide6.QtWidgets import QWidget

    from app.views._plain import ask_yes_no

    widget = QWidget()
    with pytest.raises(ModalDialogInTest, match="Delete project"):
        ask_yes_no(widget, "Delete project", "Delete it?")


def test_a_file_dialog_fails_the_test_at_once(qtbot: object) -> None:
    from PySide6.QtWidgets import QFileDialog, QWidget

    with pytest.raises(ModalDialogInTest, match="Open a folder"):
        QFileDialog.getExistingDirectory(QWidget(), "Open a folder")
