"""Names and classes reach Qt as plain text (issue 21, cases 7 and 8).

The image caption was rich text: a class name ``<img src="/local/file.png">`` drew that local file
in the app; tooltips and the "Loading …" caption turned file names that start with a tag into rich
text; Qt dropped the bytes of names that are not UTF-8 (``caf\\udce9.png`` showed as ``caf.png``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from app_studio import RUN_TIMEOUT_MS, Studio
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QLabel, QToolTip, QWidget

HOSTILE_CLASSES = ('<img src="/tmp/f2tta-trap.png">', "<b>tumor</b>")
HOSTILE_NAMES = ("<img src=trap.png>a.png", "<b>bold.png", os.fsdecode(b"caf\xe9.png"))


@pytest.fixture
def hostile_model(tmp_path: Path) -> Path:
    import torch

    from engine import ModelCard, save_model

    card = ModelCard(
        arch="vit_tiny_patch16_224",
        classes=HOSTILE_CLASSES,
        img_size=32,
        model_kwargs={"depth": 2, "patch_size": 8},
    )
    torch.manual_seed(0)
    path = tmp_path / "model" / "m.safetensors"
    path.parent.mkdir()
    save_model(card.build(), card, path)
    return path


def _folder(root: Path) -> Path:
    root.mkdir()
    rng = np.random.default_rng(0)
    for name in HOSTILE_NAMES:
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(root / name, format="PNG")
    return root


def _rich_labels(window: QWidget) -> list[str]:
    """Labels showing a hostile name or class as rich text: by their format, or by Qt's guess."""
    from PySide6.QtGui import Qt as QtGui

    found = []
    for label in window.findChildren(QLabel):
        text = label.text()
        if not any(marker in text for marker in (*HOSTILE_CLASSES, *HOSTILE_NAMES[:2])):
            continue
        fmt = label.textFormat()
        if fmt == Qt.TextFormat.RichText or (fmt == Qt.TextFormat.AutoText and QtGui.mightBeRichText(text)):
            found.append(text)
    return found


def test_names_and_classes_are_plain_text_in_the_app(
    qtbot: object, home: Path, hostile_model: Path, tmp_path: Path
) -> None:
    studio = Studio(qtbot, home, hostile_model)
    try:
        c = studio.open()
        folder = _folder(tmp_path / "in")
        studio.open_folder(c, folder)
        studio.run_to_end(c)
        window = c.window
        table = window.table
        assert table.model.rowCount() == 3
        seen_titles = []
        for row in range(3):
            table.table.selectRow(row)
            qtbot.waitUntil(lambda: "Loading" not in window.image_view.title.text(), timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
            seen_titles.append(window.image_view.title.text())
            assert not _rich_labels(window), _rich_labels(window)
        caption = " ".join(seen_titles)
        assert any(cls in caption for cls in HOSTILE_CLASSES), "class names shown as the text they are"
        assert "caf\ufffd.png" in caption, "a name that is not UTF-8 shown with U+FFFD, not cut"
        names = {table.model.index(r, 1).data() for r in range(3)}
        assert names == {"<img src=trap.png>a.png", "<b>bold.png", "caf\ufffd.png"}

        # The table's tooltips: shown as text (escaped), whatever the name starts with.
        view = table.table
        for row in range(3):
            index = table.proxy.index(row, 1)
            rect = view.visualRect(index)
            event = QHelpEvent(
                QHelpEvent.Type.ToolTip, rect.center(), view.viewport().mapToGlobal(rect.center())
            )
            QApplication.sendEvent(view.viewport(), event)
            text = QToolTip.text()
            assert text and "<img src=trap" not in text and "<b>bold" not in text, text
        # The "Loading …" caption (shown before a preview arrives) is plain text too.
        window.show_image(None, None, f"Loading {HOSTILE_NAMES[0]} …")
        assert window.image_view.title.textFormat() == Qt.TextFormat.PlainText
        assert window.image_view.title.text() == f"Loading {HOSTILE_NAMES[0]} …"
        # Tooltips of labels that elide names (status bar) escape them.
        tips = [
            w.toolTip()
            for w in window.findChildren(QWidget)
            if "<img" in w.toolTip() or "<b>bold" in w.toolTip()
        ]
        assert not tips, tips
    finally:
        for studio_app in studio.apps:
            studio.close(studio_app)


def test_a_plain_tooltip_is_shown_as_it_is(qapp: object) -> None:
    from PySide6.QtGui import Qt as QtGui

    from app.views._plain import plain_tooltip

    tip = plain_tooltip('<img src="/etc/x.png"> two\nlines \u202e')
    assert "&lt;img" in tip and "<img" not in tip and "\\u202e" in tip
    assert "two\nlines" in tip, "line breaks stay breaks (they showed as a visible \\n)"
    assert QtGui.mightBeRichText(tip), "escaped into rich text, so Qt does not guess"


def test_a_question_keeps_its_line_breaks_and_escapes_what_a_name_hides(
    qapp: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete question read "…not touched.\\n\\nThis cannot be undone." with visible escapes."""
    from PySide6.QtWidgets import QMessageBox, QWidget

    from app.views._plain import ask_yes_no

    shown_texts: list[str] = []

    def answer(box: QMessageBox) -> int:
        shown_texts.append(box.text())
        return int(QMessageBox.StandardButton.Yes.value)

    monkeypatch.setattr(QMessageBox, "exec", answer)
    assert ask_yes_no(QWidget(), "Delete project", "Delete project 'a\u202eb'?\n\nThis cannot be undone.")
    (text,) = shown_texts
    assert text.split("\n")[-1] == "This cannot be undone." and "\\n" not in text
    assert "\u202e" not in text, "a bidi control in a name is still made visible"


def test_every_tooltip_and_banner_shows_a_path_as_text(qtbot: object, tmp_path: Path) -> None:
    """Markup in a folder's path (``<img src=trap.png>``) reached rich-text tooltips on the welcome
    page's input rows and the banners (issue 29, case 14): every tooltip and banner that can hold a
    path shows it as text."""
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QLabel, QWidget

    from app.core import advice
    from app.core.recent import InputLine
    from app.views.main_window import MainWindow

    trap = str(tmp_path / "<img src=trap.png>" / "<b>site</b>")
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.set_inputs([InputLine(trap, "folder", f"{trap} (folder)", False, 4, trap)])
    window.show_banner(advice.exported(trap, ["report.pdf"]))
    window.show_banner(advice.model_missing("P", Path(trap) / "model.safetensors"))
    window.show_banner(advice.project_damaged("P", f"profile.json of project 'P' ({trap}): not JSON"))
    window.set_projects(["P"], "P", {"P": f"model file missing: {trap}"}, {"P": "damaged"})
    window.set_project_summary(f"Project 'P' {trap}")
    window.set_model_text(trap)
    tips = [w.toolTip() for w in window.findChildren(QWidget)]
    tips += [a.toolTip() for a in window.findChildren(QAction)]
    carrying = [t for t in tips if "trap.png" in t]
    assert len(carrying) >= 8, carrying  # the input row, its buttons, the banners, the status, the list
    for tip in carrying:
        assert "<img" not in tip and "<b>site" not in tip, tip  # escaped: shown as the text it is
    banner_labels = [label for label in window.banners.findChildren(QLabel) if "trap.png" in label.text()]
    assert banner_labels and all(label.textFormat() == Qt.TextFormat.PlainText for label in banner_labels)
