"""The smaller items of issue 27 (item 9), each where a test can see it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from app_fixtures import sample_row
from app_studio import settle

from app.core.phase import Phase, actions_for
from app.core.run_items import image_title


@pytest.fixture
def window(qtbot: object) -> object:
    from app.views.main_window import MainWindow

    w = MainWindow()
    qtbot.addWidget(w)  # type: ignore[attr-defined]
    return w


def test_the_review_column_keeps_its_mark_in_view_and_in_its_tooltip(window: object) -> None:
    """It cut "✓ confirmed · dataset: tumor" to "✓ co…umor" with the mark not in its tooltip, and at
    the window's least width it scrolled off the right edge."""
    from app.core.run_items import ReviewNote
    from app.views.table_model import REVIEW_COLUMN

    w = window
    w.resize(w.minimumSizeHint().width(), 800)  # type: ignore[attr-defined]
    w.show()  # type: ignore[attr-defined]
    w.set_source_title("site")  # type: ignore[attr-defined]
    w.append_rows([sample_row(i, truth=1) for i in range(5)])  # type: ignore[attr-defined]
    note = ReviewNote("✓ confirmed · dataset: tumor", "Confirmed by Ada, 2026-05-01 14:03+02:00")
    w.table.model.replace_row(1, sample_row(1, truth=1), note)  # type: ignore[attr-defined]
    settle()
    view = w.table.table  # type: ignore[attr-defined]
    assert view.horizontalHeader().visualIndex(REVIEW_COLUMN) == 4, "right after the decision"
    rect = view.visualRect(w.table.proxy.index(1, REVIEW_COLUMN))  # type: ignore[attr-defined]
    assert rect.left() >= 0 and rect.right() <= view.viewport().width(), "in view at the least width"
    tip = w.table.model.index(1, REVIEW_COLUMN).data(3)  # type: ignore[attr-defined]  # ToolTipRole
    assert "✓ confirmed · dataset: tumor" in tip and "Confirmed by Ada, 2026-05-01 14:03+02:00" in tip


def test_settings_browse_starts_where_models_are(window: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    from app.core.settings import AppSettings
    from app.views.settings_dialog import SettingsDialog

    asked: list[str] = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (asked.append(a[2]), ("", ""))[1])
    dialog = SettingsDialog(AppSettings(), {}, ["cpu"], window, start_folder="/models")  # type: ignore[arg-type]
    dialog._on_browse_clicked()
    assert asked == ["/models"], "not the working directory"


def test_a_models_source_reference_is_not_offered_as_a_model(qtbot: object, tmp_path: Path) -> None:
    from app.views.project_dialog import NewProjectDialog

    reference = tmp_path / "model.reference.safetensors"
    reference.write_bytes(b"x")
    dialog = NewProjectDialog([], [], lambda path: "Histology · …", "", None)
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    dialog.name_edit.setText("Site B")
    dialog.add_model_file(str(reference))
    assert dialog.answer() is None and "source reference" in dialog._problem()


def test_any_project_can_be_deleted_from_the_list(window: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtWidgets import QInputDialog

    w = window
    w.set_projects(["A", "B", "C"], "B", {}, {})  # type: ignore[attr-defined]
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: ("C", True))
    w.confirm = lambda title, text: "'C'" in text  # type: ignore[attr-defined]
    deleted: list[str] = []
    w.deleteProjectRequested.connect(deleted.append)  # type: ignore[attr-defined]
    w.commands.delete_project.trigger()  # type: ignore[attr-defined]
    w.commands.project_combo.deleteRequested.emit("A")  # type: ignore[attr-defined]  # the list's menu
    assert deleted == ["C"] and "A" not in deleted  # A: the question was answered No
    assert w.commands.project_combo.names() == ["A", "B", "C"]  # type: ignore[attr-defined]


def test_a_new_folder_does_not_inherit_the_review_queue(window: object) -> None:
    w = window
    w.table.set_mode("queue")  # type: ignore[attr-defined]
    w.clear_results(48, 5)  # type: ignore[attr-defined]
    assert w.table.current_filter().mode == "all"  # type: ignore[attr-defined]


def test_greyed_project_controls_say_why(window: object) -> None:
    w = window
    paused = actions_for(Phase.PAUSED, has_session=True, pending=3, has_rows=True)
    w.set_actions(Phase.PAUSED, paused)  # type: ignore[attr-defined]
    combo = w.commands.project_combo  # type: ignore[attr-defined]
    assert not combo.isEnabled() and "Stop the run" in combo.toolTip()
    assert "Stop the run" in w.commands.new_project.toolTip()  # type: ignore[attr-defined]
    done = actions_for(Phase.DONE, has_session=True, pending=0, has_rows=True)
    w.set_actions(Phase.DONE, done)  # type: ignore[attr-defined]
    assert "Stop the run" not in combo.toolTip()


def test_a_long_name_is_cut_in_the_image_title() -> None:
    row = sample_row(0, name="x" * 200 + ".png")
    title = image_title(row)
    assert "…" in title and len(title) < 160 and "— tumor (0.90)" in title


def test_the_slide_pane_names_its_class_shows_its_counts_and_outlines_tissue_when_it_means_something(
    qtbot: object,
) -> None:
    from app.core.slide_display import SlideDisplay
    from app.views.slide_view import SlideView

    view = SlideView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(640, 520)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    tissue = np.zeros((640, 960), bool)  # the thumbnail's grid: 10 slide pixels a thumbnail pixel
    tissue[100:500, 200:800] = True
    display = SlideDisplay(np.full((640, 960, 3), 200, np.uint8), (9600, 6400), (25, 38), 256.0, "s", tissue)
    view.set_slide(dataclasses.replace(display, positive="tumor"))
    settle()
    assert view.colorbar.getAxis("left").labelText == "P(tumor)"
    assert view.counts.minimumWidth() >= view.counts.fontMetrics().horizontalAdvance("0000 tiles")
    assert view.tissue_item.isVisible(), "the whole slide: the outline"
    view.full_resolution()
    settle()
    assert not view.tissue_item.isVisible(), "1:1: no outline of the thumbnail's blocks"
    view.fit()
    settle()
    assert view.tissue_item.isVisible()


def test_help_lists_the_shortcuts_and_a_guide(window: object) -> None:
    from app.views.help_dialogs import GUIDE, shortcut_rows

    rows = dict(shortcut_rows(window.commands.all()))  # type: ignore[attr-defined]
    assert rows["Start"] == "F5" and rows["Confirm prediction"] == "C" and rows["Keyboard shortcuts"] == "F1"
    assert "Review queue" in rows and "Ctrl+E" in rows.values()
    menu = [a.text() for a in window.commands.help_menu.actions()]  # type: ignore[attr-defined]
    assert menu[:2] == ["Keyboard shortcuts", "Quick guide"] and "About" in menu
    assert "review queue" in GUIDE


def test_the_image_pane_does_not_say_press_start_during_a_run(tmp_path: Path) -> None:
    from controller_fakes import opened

    c, view, _, _ = opened(tmp_path)
    assert "Press Start" in view.last("show_image")[2]
    c.start()
    assert "Press Start" not in view.last("show_image")[2]


def test_a_maximised_window_reopens_maximised(tmp_path: Path) -> None:
    from controller_fakes import make

    from app.core.settings import load_settings

    c, view, _, _ = make(tmp_path, persist=True)
    view.answers["is_maximized"] = True
    c.on_window_close_requested()
    c.save_settings()
    assert load_settings(tmp_path / "settings.json").maximized
