"""The outlook's strip is shown or hidden in an event of its own (issue 41, item 4): showing a
widget makes Qt lay out the window above it at once (the plots resized, their axes redrawn),
which inside the handler of an opened folder made that one event 3-4 ms dearer. The sentence is
set at once; the strip appears (or goes) in the window's next turn, before its next repaint."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from controller_fakes import shown
from PySide6.QtWidgets import QApplication

from app.views.main_window import MainWindow


def test_the_outlook_is_shown_and_hidden_without_laying_the_window_out_inside_the_call(qtbot: object) -> None:
    window = shown(qtbot, MainWindow(), 1280, 800)
    QApplication.processEvents()
    outlook, plots = window.views.outlook, window.plots
    assert not outlook.isVisible()
    before = plots.geometry()
    window.set_outlook("No image of this folder has been processed yet.")
    assert outlook.text() == "No image of this folder has been processed yet."
    assert plots.geometry() == before and not outlook.isVisible()  # nothing laid out in the call
    qtbot.waitUntil(outlook.isVisible)  # type: ignore[attr-defined]
    QApplication.processEvents()
    shrunk = plots.geometry()
    assert shrunk.height() < before.height()  # the strip took its room from the views
    window.set_outlook("")
    assert plots.geometry() == shrunk and outlook.isVisible()
    qtbot.waitUntil(lambda: not outlook.isVisible())  # type: ignore[attr-defined]
    QApplication.processEvents()
    assert plots.geometry() == before


def test_a_sentence_set_and_taken_back_in_one_turn_leaves_the_strip_as_it_was(qtbot: object) -> None:
    window = shown(qtbot, MainWindow(), 1280, 800)
    QApplication.processEvents()
    window.set_outlook("Something")
    window.set_outlook("")
    QApplication.processEvents()
    assert not window.views.outlook.isVisible() and window.views.outlook.text() == ""


def test_a_window_not_shown_yet_shows_the_strip_only_with_a_sentence(qtbot: object) -> None:
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.set_outlook("Something")
    QApplication.processEvents()
    assert not window.views.outlook.isHidden()
    window.set_outlook("")
    QApplication.processEvents()
    assert window.views.outlook.isHidden()


def test_the_strip_is_shown_before_what_was_posted_earlier_in_the_same_handler(qtbot: object) -> None:
    """A handler that changed the views before the sentence came (the opened folder's) posted
    their repaints first: the strip's turn comes ahead of them, so the window paints the views
    once, at their new size (not at the old one, then again)."""
    from PySide6.QtCore import QTimer

    window = shown(qtbot, MainWindow(), 1280, 800)
    QApplication.processEvents()
    seen: list[bool] = []
    QTimer.singleShot(0, window, lambda: seen.append(window.views.outlook.isVisible()))
    window.set_outlook("No image of this folder has been processed yet.")
    qtbot.waitUntil(lambda: bool(seen))  # type: ignore[attr-defined]
    assert seen == [True]
