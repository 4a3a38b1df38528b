"""Projects and layout (pytest-qt, offscreen): each project remembers its model and method,
projects can be renamed and deleted, and the window and the settings dialog fit a 1280×800 screen."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import make_folder, make_model
from app_studio import RUN_TIMEOUT_MS, Studio, settle

from app.core.projects import ProjectError, ProjectStore
from app.core.settings import AppSettings, available_devices, method_fields
from app.views.main_window import MainWindow
from engine import DEFAULT_METHOD


def test_each_project_remembers_its_model_and_method(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    other_model = make_model(tmp_path, mpp=None, img_size=32)
    c = studio.open(project="Site A")  # the studio's model, the default method
    info = ProjectStore(studio.home).info("Site A")
    assert info is not None and info.model_path == str(studio.model) and info.method == DEFAULT_METHOD
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        settings = dataclasses.replace(
            c.controller.state.settings, model=str(other_model), method="source", method_config={}
        )
        c.controller.projects.create("Site B", settings)
    assert c.controller.state.info is not None and c.controller.state.info.method == "source"
    # Back to Site A: its model and method come with it.
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.projectSelected.emit("Site A")
    assert (
        c.controller.state.settings.model == str(studio.model)
        and c.controller.state.settings.method == DEFAULT_METHOD
    )
    assert c.controller.state.settings.method_config == {"mc_passes": 2} and c.controller.state.usable
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.projectSelected.emit("Site B")
    assert (
        c.controller.state.settings.model == str(other_model)
        and c.controller.state.settings.method == "source"
    )


def test_projects_are_renamed_and_deleted(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    folder = make_folder(tmp_path, 4, labelled="none")
    c = studio.open(project="Old name", method="source", method_config={})
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.renameProjectRequested.emit("New name")
    store = ProjectStore(studio.home)
    assert "Old name" not in store.names() and "New name" in store.names()
    assert c.controller.state.settings.project == "New name" and c.controller.state.info is not None
    assert c.controller.state.info.project.name == "New name" and c.controller.state.info.images_seen == 4, (
        "its state moved with it"
    )
    assert c.window.commands.project_combo.current_name() == "New name"
    with pytest.raises(ProjectError, match="in use"):
        store.delete("New name")  # this window holds it
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.deleteProjectRequested.emit("New name")
    assert "New name" not in store.names() and c.controller.state.settings.project == "default"
    assert c.controller.state.info is not None and c.controller.state.info.project.name == "default"


def test_the_window_and_the_settings_dialog_fit_1280_by_800(qtbot: object) -> None:
    from app.views.settings_dialog import SettingsDialog

    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 740, hint  # 800 less title bar and panel
    for pane in ("images", "table", "tabs"):
        window.commands.panes[pane].setChecked(False)
        assert not {"images": window.panes.left, "table": window.table, "tabs": window.panes.bottom_tabs}[
            pane
        ].isVisibleTo(window)
        window.commands.panes[pane].setChecked(True)
    dialog = SettingsDialog(AppSettings(), method_fields(), available_devices(), window)
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    dialog.advanced_toggle.setChecked(True)  # every hyper-parameter shown: the form scrolls
    assert dialog.minimumSizeHint().height() <= 700 and dialog.sizeHint().height() <= 760
    assert dialog.minimumSizeHint().width() <= 1200


def test_the_overlay_key_keeps_the_image_where_it_is(qtbot: object) -> None:
    import numpy as np

    from app.core.overlay import Overlay
    from app.views.image_view import ImageView

    view = ImageView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(500, 400)
    view.show()
    overlay = Overlay.from_step((4, 4), np.linspace(0, 1, 16).reshape(4, 4), np.array([1]), np.array([2]))
    view.show_image(np.zeros((64, 64, 3), np.uint8), overlay, "x", levels=(0.0, 1.0))
    settle()
    view.viewbox.scaleBy((0.5, 0.5))  # the user zoomed in
    before = view.viewbox.viewRect()
    view.toggle_overlay()
    settle()
    assert not view.overlay_visible and view.viewbox.viewRect() == before
    view.toggle_overlay()
    assert view.overlay_visible and view.viewbox.viewRect() == before


def test_no_rate_or_time_left_unless_running() -> None:
    from app.core.progress import ProgressMeter

    clock = iter(float(t) for t in range(100))
    meter = ProgressMeter(clock=lambda: next(clock))
    meter.start(0, 10)
    meter.add(2)
    meter.add(2)
    assert "img/s" in meter.progress().text() and "left" in meter.progress().text()
    assert meter.progress(running=False).text() == "4 / 10"


def test_every_shortcut_is_live(qtbot: object) -> None:
    """An action's shortcut works only when the action sits in a menu or on a widget."""
    from PySide6.QtGui import QAction

    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    keyed = [a for a in window.findChildren(QAction) if not a.shortcut().isEmpty()]
    assert len(keyed) >= 25
    dead = [a.text() for a in keyed if not a.associatedObjects()]
    assert not dead, f"shortcuts that never fire: {dead}"
    sequences = [a.shortcut().toString() for a in keyed]
    assert len(sequences) == len(set(sequences)), "no shortcut is bound twice"


def test_first_launch_offers_the_demo_sets_and_each_opens_with_its_model(
    studio: Studio, qtbot: object
) -> None:
    from app.core.settings import FUNDUS_DEMO_MODEL, available_demos

    if available_demos() != {"histology", "fundus", "tissue"}:
        pytest.skip("the demo models or sets are not in this checkout")
    c = studio.open(method="source", method_config={})
    window = c.window
    assert window.panes.left.currentWidget() is window.welcome, "nothing open: the window says what to do"
    assert window.welcome.fundus_button.isEnabled() and window.welcome.histology_button.isEnabled()
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        window.welcome.fundus_button.click()
    source = blocker.args[0].source
    assert c.controller.state.info is not None and c.controller.state.info.card.classes == (
        "glaucoma",
        "normal",
    )
    assert (
        c.controller.state.settings.model == str(FUNDUS_DEMO_MODEL)
        and c.controller.state.settings.project == "Demo fundus"
    )
    assert len(source.items) == 160 and all(it.ground_truth is not None for it in source.items)
    assert window.panes.left.currentWidget() is not window.welcome and not window.banners.items
    # the four-class demo, from the Help menu's action as from any project
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        window.commands.demos["tissue"].trigger()
    assert c.controller.state.info is not None and c.controller.state.info.card.classes == (
        "inflamed",
        "normal",
        "stroma",
        "tumour",
    )
    assert c.controller.state.settings.project == "Demo tissue types"
    assert len(blocker.args[0].source.items) == 160 and not window.banners.items


def test_a_long_line_on_the_welcome_page_leaves_the_tables_names_readable(qtbot: object) -> None:
    """At 1280×800 the project's list of folders (long names, dates) once widened the left pane so
    far that the table cut every name to "no…ng"."""
    from app.core.recent import InputLine

    def item_width(inputs: list[InputLine]) -> tuple[int, int]:
        window = MainWindow()
        qtbot.addWidget(window)  # type: ignore[attr-defined]
        window.resize(1280, 760)
        window.set_inputs(inputs)
        window.show()
        qtbot.waitExposed(window)  # type: ignore[attr-defined]
        table = window.table.table
        return table.columnWidth(1), table.fontMetrics().horizontalAdvance("0")

    long_name = "histology-site-3-from-the-second-hospital-scanned-2026"
    text = f"{long_name} (folder) · 60 images processed · opened 2026-11-27 00:59"
    plain, em = item_width([])
    with_line, _ = item_width([InputLine(f"/data/{long_name}", "folder", text, False, 60)])
    assert with_line == plain and plain >= 12 * em, (with_line, plain, em)
