"""The app against a mock of the main window, with a real engine worker in its thread, and the Qt-free
run model the views observe: the controller calls only the window's public methods, and every
result reaches the views through the model. (The controller's logic alone, with a fake window and a
fake worker and no Qt at all, is tested in ``tests/test_controller_plain.py``.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_fixtures import make_folder, make_model, sample_row
from app_studio import drain_worker

from app.core.filters import uncertainty_threshold
from app.core.messages import ItemResult
from app.core.overlay import Overlay
from app.core.phase import Phase
from app.core.run_items import Cell, Selection
from app.core.run_model import RunModel
from app.core.settings import AppSettings
from app.shell.studio_app import StudioApp
from app.views.main_window import MainWindow
from engine import FolderSource, PredictionRow, StreamItem

TIMEOUT_MS = 90_000


def _result(row: PredictionRow) -> ItemResult:
    overlay = Overlay.from_step((2, 2), np.full((2, 2), 0.5), np.array([0]), np.array([3]))
    return ItemResult(row, overlay, np.zeros((4, 4, 3), np.uint8), np.array([0.2, 0.8], np.float32))


def _source(n: int) -> FolderSource:
    items = tuple(StreamItem(i, f"k{i}", f"img{i}.png", path=Path(f"img{i}.png")) for i in range(n))
    return FolderSource(Path("site"), "name", items)


# -- the run model, without Qt ----------------------------------------------------------------
def test_run_model_paces_the_views_and_keeps_everything_they_show() -> None:
    model = RunModel()
    shown: list[list[PredictionRow]] = []
    plots: list[object] = []
    selections: list[Selection] = []
    wanted: list[int] = []
    events: list[PredictionRow] = []
    model.rows_shown.connect(shown.append)
    model.plots_changed.connect(plots.append)
    model.selection_changed.connect(selections.append)
    model.preview_needed.connect(wanted.append)
    model.event_noted.connect(events.append)

    model.open(
        _source(6), done=2, restored=[sample_row(0, unc=0.0), sample_row(1, unc=0.1)], positive_class=1
    )
    assert [r.key for r in shown[0]] == ["k0", "k1"] and model.pending == 4 and len(plots) == 1
    model.add_results(
        [_result(sample_row(2, unc=0.2)), _result(sample_row(3, unc=0.3, guard_message="guard acted"))]
    )
    assert [r.key for r in events] == ["k3"] and model.run_guard_events == 1
    assert len(shown) == 1, "nothing reaches the views before a flush"
    model.flush(follow=True)  # tick 1: the table
    assert [r.key for r in shown[1]] == ["k2", "k3"] and len(plots) == 1
    model.flush(follow=True)  # tick 2: the plots
    assert len(plots) == 2 and not selections
    model.flush(follow=True)  # tick 3: the images, following the newest
    assert selections[-1].position == 3 and selections[-1].preview is not None and selections[-1].keep_view
    model.select(0)  # a restored row: its preview must be read again
    assert selections[-1].preview is None and wanted == [0]
    model.preview_loaded(0, np.ones((4, 4, 3), np.uint8))
    assert selections[-1].position == 0 and selections[-1].preview is not None
    assert model.row_index(3) == 3 and model.pending == 2 and model.progress.done == 4
    assert uncertainty_threshold(model.rows) == pytest.approx(np.quantile([0.0, 0.1, 0.2, 0.3], 0.9))


def test_run_model_fills_the_slide_map_from_rows() -> None:
    model = RunModel()
    cells: list[list[Cell]] = []
    model.cells_changed.connect(cells.append)
    source = _source(2)
    model.open(source, 0, [], 1)
    model.tile_values = np.full((2, 3), np.nan)
    model.add_results([_result(sample_row(0, tile=(2, 1, 0, 0, 8, 8)))])
    model.flush(force=True)
    assert cells == [[Cell(1, 2, pytest.approx(0.9))]] and model.position_of_cell(1, 2) == 0
    assert np.isfinite(model.tile_values).sum() == 1 and model.tile_values[1, 2] == pytest.approx(0.9)


# -- the app against a mock window ------------------------------------------------------------
@pytest.fixture
def mock_window() -> MagicMock:
    window = MagicMock(spec=MainWindow)  # only the class's methods and signals: no sub-widgets
    window.following = True
    window.plot_png.return_value = b"png"
    window.edit_settings.return_value = None
    return window


@pytest.fixture
def app(
    qtbot: Any, mock_window: MagicMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StudioApp]:
    monkeypatch.setenv("F2TTA_STUDIO_HOME", str(tmp_path / "home"))
    model = make_model(tmp_path)
    settings = AppSettings(model=str(model), method_config={"mc_passes": 2}, batch=1)
    app = StudioApp(
        mock_window, settings, home=tmp_path / "home", flush_interval_ms=10, persist_settings=False
    )
    with qtbot.waitSignal(app.sessionChanged, timeout=TIMEOUT_MS):
        app.controller.load_session()
    yield app
    app.shutdown()
    assert not app.engine_thread.isRunning()


def _open(app: StudioApp, qtbot: Any, folder: Path) -> None:
    with qtbot.waitSignal(app.sourceOpened, timeout=TIMEOUT_MS):
        app.controller.open_folder(str(folder))


def _calls(mock: MagicMock) -> list[Any]:
    return [call.args for call in mock.call_args_list]


def test_controller_drives_the_window_through_its_methods_only(
    app: StudioApp, mock_window: MagicMock, qtbot: Any, tmp_path: Path
) -> None:
    _open(app, qtbot, make_folder(tmp_path, 12, labelled="folders"))
    assert _calls(mock_window.clear_results)[-1] == (12, 2, True)
    assert mock_window.set_actions.call_args.args[0] is Phase.READY
    assert mock_window.set_actions.call_args.args[1].start
    with qtbot.waitSignal(app.runFinished, timeout=TIMEOUT_MS) as blocker:
        app.controller.start()
    assert blocker.args[0].reason == "finished" and blocker.args[0].processed == 12
    shown = [row for (rows,) in _calls(mock_window.append_rows) for row in rows]
    assert [r.position for r in shown] == list(range(12)), "every row reached the table once, in order"
    for (changes,) in _calls(mock_window.update_rows):  # the maps that followed the decisions
        for change in changes:
            shown[change.index] = change.row
    assert shown == app.controller.model.rows
    data = mock_window.set_plot_data.call_args.args[0]
    assert data.labelled and data.x.size == 12
    image, overlay, title = mock_window.show_image.call_args.args[:3]
    assert image is not None and overlay is not None and "#12" in title, (
        "following shows the newest image (numbered from 1)"
    )
    assert mock_window.set_actions.call_args.args[0] is Phase.DONE
    levels = {args[0] for args in _calls(mock_window.log_message)}
    assert "error" not in levels and any(
        "Run finished: 12 images" in a[1] for a in _calls(mock_window.log_message)
    )

    # Export reads the run model (not the widgets) and the window's plot image.
    out = tmp_path / "reports"
    with qtbot.waitSignal(app.exportFinished, timeout=TIMEOUT_MS) as exported:
        app.controller.export(str(out))
    assert {p.name for p in exported.args[0]} == {"predictions.csv", "run_config.json", "report.pdf"}
    mock_window.plot_png.assert_called()

    # The user selects a row in the window: the controller shows it (from the model's preview cache).
    app.controller.model.select(4)
    assert "#5" in mock_window.show_image.call_args.args[2]


def test_controller_pause_resume_and_stop(
    app: StudioApp, mock_window: MagicMock, qtbot: Any, tmp_path: Path
) -> None:
    _open(app, qtbot, make_folder(tmp_path, 40, labelled="none"))
    app.controller.start()
    qtbot.waitUntil(lambda: len(app.controller.model.rows) >= 2, timeout=TIMEOUT_MS)
    app.controller.pause()
    qtbot.waitUntil(lambda: app.controller.phase is Phase.PAUSED, timeout=TIMEOUT_MS)
    count = len(app.controller.model.rows)
    drain_worker(app)
    assert not app.worker._pulling, "the paused worker pulls no image"
    assert len(app.controller.model.rows) == count < 40, "nothing is processed while paused"
    with qtbot.waitSignal(app.runFinished, timeout=TIMEOUT_MS) as blocker:
        app.controller.stop()
    ended = blocker.args[0]
    assert ended.reason == "stopped" and ended.saved and ended.processed == count
    maps_left = sum(r.map_status == "pending" for r in app.controller.model.raw_rows)  # maps behind
    assert app.controller.model.pending == 40 - count + maps_left and app.controller.phase is Phase.READY
