"""The app steps images in batches (offscreen, pytest-qt): the setting chooses the images per step
(0: from the device), a batch decides as one image at a time does, and a stop lands between
batches with the rows and the state in step."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import make_folder
from app_studio import RUN_TIMEOUT_MS, Studio

from app.core.settings import AppSettings
from engine.run.batch import MAX_BATCH


def _rows(studio: Studio, folder: Path, project: str, batch: int) -> list[dict[str, object]]:
    app = studio.open(project=project, batch=batch)
    studio.open_folder(app, folder)
    assert app.worker._batch() == (batch or 16), "0: the device's choice (16 on a CPU)"
    studio.run_to_end(app)
    rows = [dataclasses.asdict(r) for r in app.controller.model.raw_rows]
    for row in rows:
        row.pop("seconds")
    return rows


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)
    return a == b


def test_a_batch_decides_as_one_image_a_step(studio: Studio, tmp_path: Path) -> None:
    """The default method's decisions depend on source passes only: a batch decides every image as
    one image a step does (its uncertainty maps may differ: docs/method.md, "Batches")."""
    folder = make_folder(tmp_path / "f", 23, labelled="csv")
    one = _rows(studio, folder, "one", 1)
    many = _rows(studio, folder, "many", 0)
    assert len(one) == len(many) == 23
    decided = ("key", "prediction", "source_prediction", "decision_path", "decision_reason")
    for a, b in zip(one, many, strict=True):
        assert all(a[k] == b[k] for k in decided), (a, b)
        assert _close(a["source_confidence"], b["source_confidence"]), (a, b)


def test_a_stop_lands_between_batches_and_the_rows_match_the_state(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path / "f", 40, labelled="none")
    app = studio.open(batch=8)
    studio.open_folder(app, folder)
    app.controller.start()
    qtbot.waitUntil(lambda: len(app.controller.model.rows) >= 1, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    with qtbot.waitSignal(app.runFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        app.controller.stop()
    ended = blocker.args[0]
    assert (ended.saved and ended.processed % 8 == 0) or ended.processed == 40, ended.processed
    assert len(app.controller.model.rows) == ended.processed


def test_the_batch_setting_is_kept_and_bounded() -> None:
    assert AppSettings.from_json({"batch": 32}).batch == 32
    assert AppSettings.from_json({"batch": MAX_BATCH + 1}).batch == 0, "out of range: the device's choice"
    assert AppSettings.from_json({"batch": -3}).batch == 0
    assert AppSettings.from_json({"batch": "16"}).batch == 0
