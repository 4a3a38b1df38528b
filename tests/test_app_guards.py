"""The guards that tell the user when something is wrong, at the point of action (pytest-qt,
offscreen): a wrong model path is refused, sub-folders that are not the model's classes, a
class-sorted stream and a one-class collapse are warned, each as a banner with its fix."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import CLASSES, make_folder, make_model
from app_studio import RUN_TIMEOUT_MS, Studio

from app.core.phase import Phase
from app.core.settings import DEMO_MODEL, AppSettings, available_devices, check_model, method_fields
from app.shell.studio_app import StudioApp
from app.views.main_window import MainWindow


def _banner_text(c: StudioApp, key: str) -> str:
    item = c.window.banners.items.get(key)
    return "" if item is None else item.banner.text


def test_settings_refuse_a_model_that_does_not_load(qtbot: object, tmp_path: Path, model: Path) -> None:
    from app.views.settings_dialog import SettingsDialog

    bad = tmp_path / "weights.safetensors"
    bad.write_bytes(b"not a checkpoint")  # and no card beside it
    for text, reason in ((str(tmp_path / "nowhere.safetensors"), "no such file"), (str(bad), "card")):
        problem = check_model(text)
        assert problem is not None and reason in problem, problem
    assert check_model(str(model)) is None and check_model("") is None  # "" = the demo model

    dialog = SettingsDialog(AppSettings(), method_fields(), available_devices(), check_model=check_model)
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    dialog.show()
    dialog.model_edit.setText(str(bad))
    dialog._on_ok_clicked()
    assert dialog.result() != dialog.DialogCode.Accepted and dialog.isVisible(), "the dialog stays open"
    assert dialog.model_error.isVisible() and "cannot be used" in dialog.model_error.text()
    dialog.model_edit.setText(str(model))
    dialog._on_ok_clicked()
    assert dialog.result() == dialog.DialogCode.Accepted and dialog.result_settings().model == str(model)


def test_a_saved_model_that_is_gone_offers_the_demo_model(qtbot: object, home: Path, tmp_path: Path) -> None:
    if not DEMO_MODEL.is_file():
        pytest.skip("the demo model is not in this checkout")
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    settings = AppSettings(model=str(tmp_path / "moved-away.safetensors"), method="source")
    c = StudioApp(window, settings, home=home, flush_interval_ms=20)
    try:
        with qtbot.waitSignal(c.loadFailed, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            c.controller.load_session()
        text = _banner_text(c, "model")
        assert "No model is loaded" in text and "moved-away.safetensors" in text
        assert "demo-model" in window.banners.items["model"].buttons
        assert not window.commands.open_folder.isEnabled() and window.commands.settings.isEnabled()
        with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            window.banners.items["model"].buttons["demo-model"].click()
        assert (
            c.controller.state.settings.model == ""
            and c.controller.state.usable
            and "model" not in window.banners.items
        )
        saved = json.loads((home / "settings.json").read_text())
        assert saved["model"] == "", "the fix is saved"
    finally:
        with qtbot.waitSignal(c.engine_thread.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            c.shutdown()


def test_subfolders_that_are_not_model_classes_are_warned(studio: Studio, tmp_path: Path) -> None:
    root = tmp_path / "clinic"
    source = make_folder(tmp_path, 8, labelled="folders")
    (source / "tumor").rename(root.parent / "glaucoma-tmp")
    source.rename(root)
    (root.parent / "glaucoma-tmp").rename(root / "glaucoma")
    c = studio.open(method="source", method_config={})
    studio.open_folder(c, root)
    text = _banner_text(c, "source-folders")
    assert "'glaucoma' (4 images)" in text and "normal, tumor" in text and "unlabelled" in text
    assert any("glaucoma" in m for level, m in c.window.log.entries if level == "warning")
    assert sum(r.ground_truth is not None for r in c.controller.model.source.items) == 4  # type: ignore[union-attr]


def test_a_class_sorted_stream_is_warned_and_interleaving_fixes_it(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 16, labelled="folders")
    c = studio.open(method="source", method_config={})
    studio.open_folder(c, folder)
    text = _banner_text(c, "source-sorted")
    assert "sorted by class (normal ×8 → tumor ×8)" in text
    with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.banners.items["source-sorted"].buttons["interleave"].click()
    assert c.controller.model.source.order == "interleaved" and "source-sorted" not in c.window.banners.items  # type: ignore[union-attr]
    assert c.controller.state.settings.order == "name", "the open folder's order only (issue 38)"
    truths = [it.ground_truth for it in c.controller.model.source.items]  # type: ignore[union-attr]
    assert truths[:8] != [0] * 8 and sorted(truths) == [0] * 8 + [1] * 8  # type: ignore[type-var]
    studio.run_to_end(c)
    rows = c.window.table.model.rows
    assert [r.position for r in rows] == list(range(16)) and [r.ground_truth for r in rows] == truths


def test_a_one_class_collapse_is_warned(studio: Studio, tmp_path: Path) -> None:
    biased = make_model(tmp_path, favour=1)
    folder = make_folder(tmp_path, 24, labelled="none")
    c = studio.open(model=str(biased), method="source", method_config={})
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    assert c.controller.phase is Phase.DONE
    text = _banner_text(c, "source-collapse")
    found = re.search(r"Nearly every prediction is 'tumor' \((\d+) of (\d+) images", text)
    assert found is not None and found[1] == found[2] and int(found[1]) >= 20, text
    assert any("Nearly every prediction" in m for level, m in c.window.log.entries if level == "warning")
    # A folder of the same images where the truth says tumour: no warning.
    truth = make_folder(tmp_path / "tumours", 24, labelled="csv")
    (truth / "labels.csv").write_text(
        "file,label\n" + "".join(f"img{i:03d}.png,{CLASSES[1]}\n" for i in range(24))
    )
    studio.open_folder(c, truth)
    studio.run_to_end(c)
    assert "source-collapse" not in c.window.banners.items
