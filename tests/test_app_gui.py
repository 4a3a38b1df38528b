"""The desktop app end to end under pytest-qt (offscreen): runs, pause/resume, stop and continue,
exports, slides, the command line. Every test ends with the worker thread finished."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_fixtures import make_folder, make_slide
from app_studio import RUN_TIMEOUT_MS, Studio, drain_worker, read_pdf_text, table_keys

from app.core.phase import Phase
from app.core.projects import ProjectStore
from app.core.settings import AppSettings
from engine import DEFAULT_METHOD


def test_folder_runs_to_the_end(studio: Studio, tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 24, labelled="csv")  # mixed arrival: the gate does not fire
    c = studio.open()
    studio.open_folder(c, folder)
    assert c.controller.phase is Phase.READY and c.controller.model.pending == 24
    ended = studio.run_to_end(c)
    assert ended.reason == "finished" and ended.processed == 24 and ended.saved  # type: ignore[attr-defined]
    window = c.window
    assert window.table.model.rowCount() == 24 and sorted(table_keys(c)) == sorted(set(table_keys(c)))
    assert window.table.proxy.rowCount() == 24
    assert (
        c.controller.phase is Phase.DONE
        and not window.commands.start.isEnabled()
        and window.commands.export.isEnabled()
    )
    # Plots: labelled data -> running accuracy over the 24 images, consistent with the rows.
    data = window.plots.data
    assert data is not None and data.labelled and data.x.size == 24
    correct = np.cumsum([r.correct for r in window.table.model.rows]) / np.arange(1, 25)
    np.testing.assert_allclose(data.adapted, correct)
    x, _ = window.plots.adapted_curve.getData()
    assert len(x) == 24
    # The saved state: the project reports every image, and the engine state exists.
    info = ProjectStore(studio.home).open("default").info()
    assert info.images_seen == 24 and info.state_fingerprint == ended.state_fingerprint  # type: ignore[attr-defined]
    assert (studio.home / "profiles" / "default" / "state").is_dir()
    assert (
        window.status_parts.progress_bar.value() == 24
        and "24 / 24" in window.status_parts.progress_label.text()
    )
    # Selecting a row shows that image with its overlay; the hotkey action toggles the overlay.
    window.table.table.selectRow(5)
    shown = window.table.model.row_at(window.table.proxy.mapToSource(window.table.proxy.index(5, 0)).row())
    assert (
        c.controller.model.selected == shown.position
        and f"#{shown.position + 1}" in window.image_view.title.text()
    )
    assert window.image_view.heat_item.isVisible() or window.image_view.heat_item.image is not None
    window.commands.toggle_overlay.trigger()
    assert not window.image_view.overlay_visible and not window.image_view.uncertain_item.isVisible()
    window.commands.toggle_overlay.trigger()
    assert window.image_view.overlay_visible
    # Filters (proxy): changed-by-adaptation and low confidence.
    rows = window.table.model.rows
    window.table.mode_combo.setCurrentIndex(window.table.mode_combo.findData("changed"))
    assert window.table.proxy.rowCount() == sum(r.changed for r in rows)
    window.table.mode_combo.setCurrentIndex(window.table.mode_combo.findData("low_confidence"))
    window.table.threshold_spin.setValue(0.99)
    assert window.table.proxy.rowCount() == sum(r.confidence < 0.99 for r in rows)


# Images of a folder a test pauses or stops mid-run: enough that the request lands before the run
# ends (on a quiet machine the images after the fourth row of a 30-image folder, or after the third
# of a 40-image one, were all processed before the window's stop or pause reached the worker).
N = 160


def test_pause_and_resume(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    folder = make_folder(tmp_path, N, labelled="none")
    c = studio.open()
    studio.start_and_wait(c, folder, 3)
    c.controller.pause()
    assert c.controller.phase is Phase.PAUSING and not c.window.commands.resume.isEnabled()
    qtbot.waitUntil(lambda: c.controller.phase is Phase.PAUSED, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    assert c.window.commands.resume.isEnabled() and not c.window.commands.pause.isEnabled()
    count = c.window.table.model.rowCount()
    drain_worker(c)
    assert not c.worker._pulling, "the paused worker pulls no image"
    assert c.window.table.model.rowCount() == count < N, "nothing is processed while paused"
    with qtbot.waitSignal(c.runFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.resume()
    assert c.window.table.model.rowCount() == N and len(set(table_keys(c))) == N
    data = c.window.plots.data
    assert data is not None and not data.labelled and data.x.size == N  # positive rate without truth


def test_stop_then_reopen_project_and_continue(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    # enough images that the stop lands before the run ends: on a quiet machine the 26 images
    # after the fourth row of a 30-image folder were all processed before the window's stop
    folder = make_folder(tmp_path, N, labelled="csv")
    first = studio.open(project="Site A")
    studio.start_and_wait(first, folder, 4)
    with qtbot.waitSignal(first.runFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        first.controller.stop()
    ended = blocker.args[0]
    assert ended.reason == "stopped" and ended.saved
    done_first = table_keys(first)
    assert 4 <= len(done_first) < N and first.controller.phase is Phase.READY
    assert ProjectStore(studio.home).open("Site A").info().images_seen == len(done_first)
    studio.close(first)

    second = studio.open(project="Site A")
    assert second.controller.state.info is not None and second.controller.state.info.images_seen == len(
        done_first
    )
    studio.open_folder(second, folder)
    assert table_keys(second) == done_first, "earlier rows come back from the project"
    assert all(r.restored for r in second.window.table.model.rows)
    maps_left = sum(r.map_status == "pending" for r in second.controller.model.raw_rows)  # maps behind
    assert second.controller.model.pending == N - len(done_first) + maps_left
    studio.run_to_end(second)
    keys = table_keys(second)
    assert len(keys) == N and len(set(keys)) == N, "no image lost or processed twice"
    indices = sorted(r.index for r in second.window.table.model.rows)
    assert indices == list(range(N)), "arrival indices continue across sessions"
    assert ProjectStore(studio.home).open("Site A").info().images_seen == N
    # Opening the folder again: nothing left to do.
    studio.open_folder(second, folder)
    assert (
        second.controller.model.pending == 0
        and second.controller.phase is Phase.DONE
        and len(table_keys(second)) == N
    )


def test_reset_to_source_model(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_folder(tmp_path, 6, labelled="none")
    c = studio.open()
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    monkeypatch.setattr(c.window, "confirm", lambda *a: False)
    c.window.commands.reset.trigger()
    assert ProjectStore(studio.home).open("default").info().images_seen == 6, "declined: nothing reset"
    monkeypatch.setattr(c.window, "confirm", lambda *a: True)
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.commands.reset.trigger()
    assert c.controller.model.pending == 6 and c.window.table.model.rowCount() == 0
    assert ProjectStore(studio.home).open("default").info().images_seen == 0
    assert "0 images seen" in c.window.status_parts.project_label.full_text()


def test_unreadable_file_is_logged_and_the_run_continues(studio: Studio, tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 8, labelled="none")
    (folder / "broken.png").write_bytes(b"not an image at all")
    c = studio.open()
    studio.open_folder(c, folder)
    ended = studio.run_to_end(c)
    assert ended.failed == 1 and ended.processed == 8  # type: ignore[attr-defined]
    errors = [m for level, m in c.window.log.entries if level == "error"]
    assert any("broken.png" in m for m in errors)
    assert c.window.table.model.rowCount() == 8


def test_export_all_report_kinds(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    folder = make_folder(tmp_path, 12, labelled="folders")
    odd = folder / "tumor" / 'odd, "quoted".png'
    (folder / "tumor" / "img001.png").rename(odd)
    c = studio.open(order="interleaved")  # class sub-folders in name order arrive class by class
    studio.open_folder(c, folder)
    ended = studio.run_to_end(c)
    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        c.controller.export(str(out))
    assert {p.name for p in blocker.args[0]} == {"predictions.csv", "run_config.json", "report.pdf"}
    with open(out / "predictions.csv", newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    assert len(records) == 12 and {r["item"] for r in records} >= {'tumor/odd, "quoted".png'}
    assert all(r["ground_truth"] in ("normal", "tumor") for r in records)
    config = json.loads((out / "run_config.json").read_text())
    assert config["method"] == DEFAULT_METHOD and config["run"]["method_config"]["mc_passes"] == 2
    assert config["state_fingerprint"] == ended.state_fingerprint  # type: ignore[attr-defined]
    assert config["summary"]["images"] == 12
    pages, text = read_pdf_text(out / "report.pdf")
    assert pages >= 2
    flat = " ".join(text.split())
    for needle in (
        "For research use only. Not for use in diagnostic procedures.",
        "Images processed 12",
        ended.state_fingerprint,  # type: ignore[attr-defined]
        "vit_tiny_patch16_224",
        "mc_passes 2",
        "Accuracy, as decided",
        "Per-class results",
        "Sensitivity",
        "Confusion matrix",
        "Cases to look at",
        "Appendix: hyper-parameters",
        "mc_passes 2 (changed) 10 D: Monte-Carlo dropout passes",
    ):
        assert needle in flat, needle


def test_slide_tiles_are_processed_and_exported(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    slide = make_slide(tmp_path / "slide.tif", size=(768, 512), mpp=0.5)
    c = studio.open()  # model card: 1.0 µm/px -> level 1 of this 0.5 µm/px slide
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        c.controller.open_slide(str(slide))
    source = blocker.args[0].source
    assert source.plan.matched and source.plan.level == 1 and source.plan.footprint == 64
    assert c.window.slide_view.isVisibleTo(c.window)
    tiles = len(source.items)
    studio.run_to_end(c)
    assert c.window.table.model.rowCount() == tiles
    values = c.window.slide_view.values
    assert np.isfinite(values).sum() == tiles, "the heat map is filled for every processed tile"
    positions = [(r.tile[1], r.tile[0]) for r in c.window.table.model.rows]  # type: ignore[index]
    assert positions == sorted(positions), "tiles are fed in reading order"
    # Clicking a tile selects its row.
    first = c.window.table.model.rows[3]
    c.controller.selection.on_window_tile_clicked(first.tile[1], first.tile[0])  # type: ignore[index]
    assert c.controller.model.selected == first.position
    out = tmp_path / "slide_reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    geo = json.loads((out / "tiles.geojson").read_text())
    assert len(geo["features"]) == tiles
    ring = geo["features"][0]["geometry"]["coordinates"][0]
    assert (ring[2][0] - ring[0][0], ring[2][1] - ring[0][1]) == (64, 64)
    assert all(v % 64 == 0 for v in ring[0]), "level-0 pixel coordinates"
    _, text = read_pdf_text(out / "report.pdf")
    assert "Tile predictions" in text and "resolution matched yes" in text, "booleans read yes/no"


def test_slide_resolution_mismatch_is_warned(
    studio: Studio, tmp_path: Path, qtbot: object, model: Path
) -> None:
    slide = make_slide(tmp_path / "slide.tif", size=(512, 384), mpp=2.0)  # coarser than the model's 1.0
    c = studio.open()
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.open_slide(str(slide))
    warnings = [m for level, m in c.window.log.entries if level == "warning"]
    assert any("coarser than the model's training resolution" in m for m in warnings)
    (tmp_path / "plain.png").write_bytes(b"\x89PNG broken")
    c.controller.open_slide(str(tmp_path / "plain.png"))
    qtbot.waitUntil(lambda: any("plain.png" in m for lvl, m in c.window.log.entries if lvl == "error"))  # type: ignore[attr-defined]


def test_settings_dialog_exposes_method_hyperparameters(qtbot: object) -> None:
    from app.core.settings import available_devices, method_fields
    from app.views.settings_dialog import SettingsDialog

    dialog = SettingsDialog(AppSettings(method_config={"mc_passes": 3}), method_fields(), available_devices())
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    assert "cpu" in [dialog.device_combo.itemData(i) for i in range(dialog.device_combo.count())]
    assert dialog._editors["mc_passes"].value() == 3  # type: ignore[attr-defined]
    dialog.set_field("lr", 0.01)
    dialog.set_field("use_pgd", False)
    result = dialog.result_settings()
    assert result.method_config == {"mc_passes": 3, "lr": 0.01, "use_pgd": False}
    dialog.method_combo.setCurrentIndex(dialog.method_combo.findData("source"))
    assert dialog.result_settings().method == "source" and dialog.result_settings().method_config == {}


def test_about_dialog_carries_the_notice(qtbot: object) -> None:
    from app.views.about_dialog import AboutDialog

    dialog = AboutDialog("tiny model")
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    assert "For research use only. Not for use in diagnostic procedures." in dialog.label.text()


def test_switching_method_with_a_foreign_project_state_reports_it(studio: Studio, tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 4, labelled="none")
    c = studio.open(project="mixed")
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    other = studio.open(project="mixed", method="source", method_config={})
    assert other.controller.state.info is not None and other.controller.state.info.project_error
    assert any("cannot be used" in m for lvl, m in other.window.log.entries if lvl == "error")
    assert not other.window.commands.start.isEnabled() and other.window.commands.reset.isEnabled()


def test_log_view_stays_bounded_and_counts_everything(qtbot: object) -> None:
    from app.views.log_view import LogView

    log = LogView(max_lines=3)
    qtbot.addWidget(log)  # type: ignore[attr-defined]
    for i in range(5):
        log.add("error" if i % 2 else "warning", f"message {i}")
    assert [m for _, m in log.entries] == ["message 2", "message 3", "message 4"]
    assert log.text.document().blockCount() == 3
    assert (log.count("error"), log.count("warning")) == (2, 3)
    assert log.counts.text() == "2 errors · 3 warnings"
    log.clear()
    assert not log.entries and log.count("warning") == 0


def test_a_pdf_that_cannot_be_written_is_reported(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PDF is written on the GUI thread after the worker's tables; its failure still ends the
    export, and the reports are replaced as one set: none of them is written (issue 21)."""
    import app.reports.pdf

    def refuse(render: object) -> Iterator[tuple[str, int, int]]:
        yield "Laying out the PDF", 0, 1  # a generator, as PdfRender.steps is, that fails on
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(app.reports.pdf.PdfRender, "steps", refuse)
    c = studio.open()
    studio.open_folder(c, make_folder(tmp_path, 4, labelled="csv"))
    studio.run_to_end(c)
    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportError, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        c.controller.export(str(out))
    assert "No space left on device" in blocker.args[0] and str(out) in blocker.args[0]
    assert not any(out.iterdir()), "no report, and no staged file left behind"
