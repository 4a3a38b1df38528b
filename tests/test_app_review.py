"""A review survives a restart (pytest-qt, offscreen): review marks made with the keyboard actions
are kept with the project, shown in the table, counted as ground truth and exported; overlays come
back with the rows of an earlier session and reach the PDF."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import CLASSES, make_folder
from app_studio import RUN_TIMEOUT_MS, Studio, read_pdf_text

from app.shell.studio_app import StudioApp


def _select(c: StudioApp, index: int) -> None:
    """Select table row ``index`` as a click would (the image is shown)."""
    table = c.window.table
    table.table.selectRow(table.proxy.mapFromSource(table.model.index(index, 0)).row())


def test_review_marks_survive_a_restart_and_count_as_ground_truth(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 12, labelled="none")  # no ground truth: the review supplies it
    c = studio.processed(folder, "Review")
    rows = list(c.controller.model.rows)
    window = c.window
    _select(c, 0)
    window.commands.confirm.trigger()  # C: the prediction is right; moves on to row 1
    assert window.table.selected_source_row() == 1
    window.commands.correct.trigger()  # X: two classes, so the other one; moves on to row 2
    window.commands.classes[1].trigger()  # 2: mark as class 2 (tumor)
    window.commands.next.trigger()  # N: skip row 3
    window.commands.clear_mark.trigger()  # nothing to clear on row 4
    marks = c.controller.model.marks
    assert set(marks) == {rows[0].key, rows[1].key, rows[2].key}
    assert marks[rows[0].key].label == rows[0].prediction and marks[rows[0].key].confirmed
    assert marks[rows[1].key].label == 1 - rows[1].prediction and not marks[rows[1].key].confirmed
    assert marks[rows[2].key].label == 1
    texts = [window.table.model.review_at(i) for i in range(4)]
    assert texts[0] == f"✓ confirmed {rows[0].prediction_label}" and texts[3] == ""
    assert texts[1] == f"✎ {rows[1].prediction_label} → {CLASSES[1 - rows[1].prediction]}"
    assert [r.ground_truth is not None for r in c.controller.model.rows[:4]] == [True, True, True, False]
    figures = c.controller.model.figures()
    assert (figures.dataset.labelled, figures.reviewed.labelled, figures.review.reviewed) == (0, 3, 3)
    third = rows[2].prediction == 1  # marked as class 1: a confirmation where that was on screen
    assert (figures.review.confirmed, figures.review.agree_now) == (1 + third, 1 + third)
    assert window.metrics.figures is not None and window.metrics.figures.review.reviewed == 3
    assert not window.metrics.reviewed.isHidden() and window.metrics.dataset.isHidden()
    assert window.metrics.reviewed.title.text() == "Against the reviewers' marks (3 reviewed images)"
    data = window.plots.data
    assert data is not None and data.labelled and data.x.size == 3, "plots count the marks as ground truth"
    assert data.truth == "review marks", "and say so"
    # Take one mark back: it is gone from the model, the table and the file.
    _select(c, 1)
    window.commands.clear_mark.trigger()
    assert rows[1].key not in c.controller.model.marks and window.table.model.review_at(1) == ""
    studio.close(c)

    again = studio.open_with(folder, "Review")
    assert set(again.controller.model.marks) == {rows[0].key, rows[2].key}, "marks come back with the project"
    assert again.window.table.model.review_at(0) == f"✓ confirmed {rows[0].prediction_label}"
    assert again.window.table.model.review_at(1) == "" and again.window.table.model.review_at(2) != ""
    assert again.controller.model.figures().review.reviewed == 2
    out = tmp_path / "reports"
    with qtbot.waitSignal(again.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        again.controller.export(str(out))
    with open(out / "reviews.csv", newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    assert [r["item"] for r in records] == [rows[0].name, rows[2].name]
    assert records[0]["verdict"] == "confirmed" and records[1]["review"] == "tumor"
    config = json.loads((out / "run_config.json").read_text())
    assert config["summary"]["reviewed"] == 2 and config["summary"]["reviews"]["reviewed"] == 2
    with open(out / "predictions.csv", newline="", encoding="utf-8") as fh:
        assert all(r["ground_truth"] == "" for r in csv.DictReader(fh)), "the CSV keeps the dataset's truth"
    _, text = read_pdf_text(out / "report.pdf")
    assert "Reviewed 2 images reviewed: " in text and "Per-class results" in text


def test_overlays_come_back_after_a_restart_and_reach_the_pdf(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 10, labelled="csv")
    c = studio.processed(folder, "Overlays")
    before = {r.key: c.controller.model.overlays[r.position] for r in c.controller.model.rows}
    studio.close(c)

    again = studio.open_with(folder, "Overlays")
    assert all(r.restored for r in again.controller.model.rows)
    after = {r.key: again.controller.model.overlays[r.position] for r in again.controller.model.rows}
    assert after.keys() == before.keys()
    for key, overlay in after.items():
        assert overlay.grid == before[key].grid
        assert overlay.uncertain_tokens.tolist() == before[key].uncertain_tokens.tolist()
        assert overlay.uncertainty is not None and before[key].uncertainty is not None
        assert (overlay.uncertainty == before[key].uncertainty).all()
    _select(again, 3)  # an image of an earlier session: read again from disk
    view = again.window.image_view
    qtbot.waitUntil(lambda: "Loading" not in view.title.text(), timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    assert "no overlay" not in view.title.text() and view.heat_item.image is not None
    assert view.uncertain_item.path().elementCount() > 0, "the masked patches are drawn"
    out = tmp_path / "reports"
    with qtbot.waitSignal(again.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        again.controller.export(str(out))
    data = again.controller.report_data()
    assert data is not None and data.gallery, "the gallery is chosen from the restored rows"
    _, text = read_pdf_text(out / "report.pdf")
    assert "Cases to look at" in text and "Shown as:" in text
    assert "no overlay kept" not in text, "every case shown has its overlay"


def test_an_image_that_cannot_be_read_again_is_named_not_left_loading(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 6, labelled="csv")
    c = studio.processed(folder, "Gone")
    studio.close(c)
    (folder / "img003.png").write_bytes(b"not an image any more")  # damaged after the run

    again = studio.open_with(folder, "Gone")
    index = next(i for i, r in enumerate(again.controller.model.rows) if r.name == "img003.png")
    _select(again, index)  # an image of an earlier session: read again from disk, which fails
    view = again.window.image_view
    qtbot.waitUntil(lambda: "Loading" not in view.title.text(), timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    assert view.title.text().startswith("Cannot be shown") and "img003.png" in view.title.text()


def test_a_mark_against_the_folders_label_asks_and_keeps_the_dataset_figures(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_folder(tmp_path, 12, labelled="folders")
    c = studio.open(project="Truth", order="interleaved")  # sub-folders by name arrive class by class
    studio.open_folder(c, folder)
    studio.run_to_end(c)
    model, window = c.controller.model, c.window
    row = model.rows[0]
    # C on a wrong row, X on a right one: either way the mark disagrees with the folder's label.
    press = window.commands.confirm if row.correct is False else window.commands.correct
    asked: list[str] = []

    def answer(title: str, text: str) -> bool:
        asked.append(text)
        return len(asked) > 1  # No the first time, Yes the second

    monkeypatch.setattr(window, "confirm", answer)
    _select(c, 0)
    press.trigger()
    assert len(asked) == 1 and f"The folder says '{row.truth_label}'" in asked[0]
    assert not model.marks and window.table.model.review_at(0) == "", "No records nothing"
    selected = window.table.selected_row()
    assert selected is not None and selected.position == row.position, "and keeps the image selected"
    before = model.figures()
    assert before.dataset.labelled == 12 and before.reviewed.labelled == 0
    _select(c, 0)
    press.trigger()
    assert len(asked) == 2 and model.marks[row.key].label != row.ground_truth
    selected = window.table.selected_row()
    assert selected is not None and selected.position != row.position, "a recorded mark moves on"
    assert window.table.model.review_at(0).endswith(f" · dataset: {row.truth_label}")
    after = model.figures()
    assert model.rows[0].ground_truth == row.ground_truth, "the folder's label stays the truth"
    assert after.dataset.accuracy == before.dataset.accuracy
    assert after.dataset.confident_errors == before.dataset.confident_errors
    assert (after.reviewed.labelled, after.reviewed.accuracy) == (1, float(press is window.commands.confirm))
    metrics = window.metrics
    assert metrics.dataset.title.text() == "Against the dataset's labels (12 images)"
    assert metrics.reviewed.title.text() == "Against the reviewers' marks (1 reviewed image)"
    assert not metrics.reviewed.isHidden() and "lead with the figures against the dataset's labels" in (
        metrics.summary.text()
    )
    assert "against dataset labels" in window.plots.running.getPlotItem().titleLabel.text
    bars = window.plots.segments.getPlotItem().titleLabel.text
    assert bars.startswith("Accuracy per ") and "against" not in bars, "named once: the titles fit at 1280 px"
    window.commands.undo.trigger()  # undo asks nothing and takes the mark back
    assert not model.marks and len(asked) == 2 and model.figures().reviewed.labelled == 0
    window.commands.redo.trigger()
    assert model.marks[row.key].label != row.ground_truth and len(asked) == 2
    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    config = json.loads((out / "run_config.json").read_text())
    assert config["metrics"]["measured_against"] == "the dataset's labels"
    assert config["metrics"]["labelled"] == 12 and config["reviewed_metrics"]["labelled"] == 1
    assert config["metrics"]["accuracy"] == round(before.dataset.accuracy, 6)
    _, text = read_pdf_text(out / "report.pdf")
    assert "Figures measured against" in text and "Per-class results: against the dataset's labels" in text
    assert "Per-class results: against the reviewers' marks (1 reviewed image)" in text
