"""The app's reports without a display: the predictions CSV, the GeoJSON, the run JSON and the PDF page."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from app_fixtures import CLASSES, report_data, sample_row
from app_studio import read_pdf_text

from app.core.stats import RunStatistics
from app.reports.files import config_document, write_csv
from app.reports.qupath import geojson_document
from engine.run.rows import CSV_COLUMNS


# -- reports ----------------------------------------------------------------------------------
def test_csv_is_quoted_and_complete(tmp_path: Path) -> None:
    rows = [sample_row(1, name='odd, "name".png', truth=1), sample_row(0, tile=(1, 2, 64, 128, 64, 64))]
    path = write_csv(tmp_path / "p.csv", rows)
    with open(path, newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    assert list(records[0]) == list(CSV_COLUMNS)
    assert [r["index"] for r in records] == ["0", "1"]
    assert records[1]["item"] == 'odd, "name".png' and records[1]["correct"] == "1"
    assert records[0]["x"] == "64" and records[0]["ground_truth"] == ""


def test_geojson_uses_level0_polygons() -> None:
    doc = geojson_document([sample_row(0, tile=(1, 2, 64, 128, 64, 64)), sample_row(1)], CLASSES, "s.tif")
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 1
    ring = doc["features"][0]["geometry"]["coordinates"][0]
    assert ring[0] == [64, 128] and ring[2] == [128, 192] and ring[-1] == ring[0]
    assert doc["features"][0]["properties"]["classification"]["name"] == "tumor"


def test_config_document_contains_notice_and_fingerprint() -> None:
    data = report_data((sample_row(0),))
    doc = config_document(data)
    assert doc["state_fingerprint"] == "sf" and doc["method"] == "idipt"
    assert doc["notice"].startswith("For research use only")
    assert doc["summary"]["adapted_accuracy"] is None
    assert doc["summary"]["guard_events"] == 0 and doc["guard_events"] == []


def test_reports_list_guard_events(tmp_path: Path) -> None:
    rows = (
        sample_row(0),
        sample_row(4, name="late.png", guard_message="collapse guard after image 4: reset"),
        sample_row(2, name="early.png", guard_message="collapse guard after image 2: bank cleared"),
        sample_row(3, update_skipped=True),
    )
    data = report_data(rows)
    doc = config_document(data)
    assert doc["summary"]["guard_events"] == 2 and doc["summary"]["skipped_updates"] == 1
    assert doc["guard_events"] == [
        {"index": 2, "item": "early.png", "message": "collapse guard after image 2: bank cleared"},
        {"index": 4, "item": "late.png", "message": "collapse guard after image 4: reset"},
    ]
    with open(write_csv(tmp_path / "p.csv", rows), newline="", encoding="utf-8") as fh:
        records = {r["index"]: r for r in csv.DictReader(fh)}
    assert records["4"]["guard_event"] == "collapse guard after image 4: reset"
    assert records["0"]["guard_event"] == "" and records["3"]["update_skipped"] == "1"
    from app.reports.pdf import report_html

    page = report_html(data, with_images=False)
    assert "Guard events</h2>" in page and page.index("early.png") < page.index("late.png")
    quiet = report_html(dataclasses.replace(data, rows=(sample_row(0),)), with_images=False)
    assert "The collapse guard did not act" in quiet


def test_pdf_headings_travel_with_their_content_and_long_tables_are_cut(tmp_path: Path, qapp: object) -> None:
    import re

    from app.reports.pdf import write_pdf
    from app.reports.pdf_blocks import report_blocks
    from app.reports.pdf_html import TABLE_PART_ROWS

    rows = tuple(
        sample_row(i, pred=i % 2, truth=(i // 2) % 2, guard_message=f"collapse guard after image {i}: reset")
        for i in range(60)
    )
    data = report_data(rows)
    from app.core.clinical import clinical_metrics

    data = dataclasses.replace(data, metrics=clinical_metrics(rows, CLASSES))
    blocks = report_blocks(data, width=680)
    for block in blocks:
        assert not re.search(r"</h[123]>\s*(<p[^>]*>[^<]*</p>\s*)?$", block.html), "a heading ends a block"
    guard_parts = [b for b in blocks if "Guard events" in b.html]
    assert len(guard_parts) == -(-50 // TABLE_PART_ROWS), "50 events listed, in parts of a page or less"
    assert all(b.html.count("<tr>") <= TABLE_PART_ROWS + 1 for b in guard_parts)
    pages, text = read_pdf_text(write_pdf(tmp_path / "r.pdf", data))
    assert pages >= 3 and "Per-class results" in text and "Confusion matrix" in text
    assert f"{pages} / {pages}" in text, "every page is numbered"


def test_the_pdf_states_each_applicability_warning_once() -> None:
    """Issue 38: a slide's PDF repeated its summary's warnings on a page of their own, 90 % blank
    before the gallery's page; a note the summary does not state (a sub-folder's name) stays."""
    from app.reports.pdf_blocks import report_blocks

    gate = ("The model card does not record its training resolution.", "Nearly every prediction is tumor.")
    extra = "The folder glaucoma/ is not a class of this model."
    data = report_data((sample_row(0),), gate=gate, gate_caption="Model may not apply", label_notes=gate)
    html = "".join(b.html for b in report_blocks(data, width=680, with_images=False))
    assert "Does the model apply?" not in html and all(html.count(g) == 1 for g in gate)
    data = dataclasses.replace(data, label_notes=(*gate, extra))
    html = "".join(b.html for b in report_blocks(data, width=680, with_images=False))
    assert "Does the model apply?" in html and html.count(gate[0]) == 1 and extra in html


def test_the_summary_names_the_class_it_counts() -> None:
    """Two classes: "Predicted tumor" (the card's positive class), not "Predicted positive"; more
    classes: every class's count, since no class of a grading or tissue model is the positive one
    (a four-class report once said "Predicted positive" of the images called normal)."""
    from app.reports.pdf import report_html

    two = report_data((sample_row(0, pred=1), sample_row(1, pred=0), sample_row(2, pred=1)))
    page = report_html(two, with_images=False)
    assert "Predicted tumor" in page and "Predicted positive" not in page
    assert config_document(two)["summary"]["predicted_by_class"] == {"normal": 1, "tumor": 2}
    four = ("inflamed", "normal", "stroma", "tumour")
    rows = tuple(
        dataclasses.replace(sample_row(i), prediction=p, prediction_label=four[p])
        for i, p in enumerate([2, 2, 0, 1])
    )
    stats = RunStatistics()
    stats.extend(rows)
    data = report_data(rows, classes=four, card={"classes": list(four)}, summary=stats.summary())
    page = report_html(data, with_images=False)
    assert "Predicted, by class" in page and "inflamed 1 · normal 1 · stroma 2 · tumour 0" in page
    assert "Predicted positive" not in page and "Predicted normal" not in page
    assert config_document(data)["summary"]["predicted_by_class"] == {
        "inflamed": 1,
        "normal": 1,
        "stroma": 2,
    }


def test_a_model_of_many_classes_counts_its_most_frequent_calls() -> None:
    from app.reports.pdf import report_html
    from app.reports.pdf_blocks import SHOWN_CLASSES

    many = tuple(f"type {k}" for k in range(SHOWN_CLASSES + 4))
    calls = [k for k in range(SHOWN_CLASSES + 2) for _ in range(k + 1)]  # type k called k + 1 times
    rows = tuple(
        dataclasses.replace(sample_row(i), prediction=p, prediction_label=many[p])
        for i, p in enumerate(calls)
    )
    stats = RunStatistics()
    stats.extend(rows)
    page = report_html(
        report_data(rows, classes=many, card={"classes": list(many)}, summary=stats.summary()),
        with_images=False,
    )
    top = SHOWN_CLASSES + 1  # the most frequent first, the two least frequent together
    assert (
        "Predicted, most frequent classes" in page and f"type {top} {top + 1} · type {top - 1} {top}" in page
    )
    assert f"type {top - SHOWN_CLASSES + 1} {top - SHOWN_CLASSES + 2} · 2 other classes 3" in page
