"""The review stays true in every output (issue 27, item 3): the dataset's label and the reviewer's
class are stated apart -- "Truth: tumor (labels.csv) · reviewer: normal" -- in the PDF, the JSON and
the CSVs, for a mark that agrees with the dataset's label, one that disagrees with it and one on an
image the dataset does not label. An image marked "normal" against labels.csv's "tumor" was
captioned "Truth: tumor (review)" in the PDF's gallery.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import threading
from pathlib import Path

import numpy as np
from app_fixtures import sample_row
from app_studio import read_pdf_text
from controller_fakes import ended, labelled_folder, make, results_of, session_info

from app.reports.files import CONFIG_NAME, CSV_NAME, REVIEWS_NAME
from app.reports.pdf import pdf_bytes
from app.worker.exporting import TabularExport


def test_truth_and_reviewer_are_stated_apart_in_the_pdf_the_json_and_the_csvs(
    tmp_path: Path, qapp: object
) -> None:
    c, view, _, _ = make(tmp_path)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    truths = [1, 1, None]  # the dataset (labels.csv) labels the first two "tumor", not the third
    c.sessions.on_worker_source_ready(labelled_folder(tmp_path, truths, "labels.csv"))
    c.start()
    rows = [sample_row(i, pred=0, src=0, truth=truths[i], conf=0.95) for i in range(3)]
    preview = np.zeros((8, 8, 3), np.uint8)
    c.on_worker_results_ready(tuple(dataclasses.replace(r, preview=preview) for r in results_of(rows)))
    c.on_worker_run_ended(ended("finished", 3, tmp_path))
    view.answers["confirm"] = True  # "Keep both" for the mark against the dataset's label
    c.on_window_review_requested(0, 1)  # agrees with labels.csv: tumor
    c.on_window_review_requested(1, 0)  # disagrees with labels.csv: normal (the model's)
    c.on_window_review_requested(2, 1)  # no dataset label: tumor
    assert len(view.of("confirm")) == 1 and len(c.model.marks) == 3

    data = c.report_data()
    assert data is not None
    export = TabularExport(tmp_path / "out", data, lambda _p: preview, threading.Event())
    for _ in export.steps():
        pass
    _, text = read_pdf_text(_pdf(tmp_path / "r.pdf", export.data))
    assert "Truth: tumor (labels.csv) · reviewer: tumor" in text
    assert "Truth: tumor (labels.csv) · reviewer: normal" in text
    assert "Truth: not labelled in the dataset · reviewer: tumor" in text
    assert "(review)" not in text

    staged = {n: (tmp_path / "out" / f".{n}.export.tmp").read_bytes() for n in export.staged.names}  # type: ignore[union-attr]
    config = json.loads(staged[CONFIG_NAME])
    marks = {m["item"]: m for m in config["review_marks"]}
    assert (marks["img0.png"]["truth"], marks["img0.png"]["reviewer_class"]) == ("tumor", "tumor")
    assert marks["img0.png"]["truth_from"] == "labels.csv" and marks["img0.png"]["agrees_with_truth"] is True
    assert (marks["img1.png"]["truth"], marks["img1.png"]["reviewer_class"]) == ("tumor", "normal")
    assert marks["img1.png"]["agrees_with_truth"] is False and marks["img1.png"]["verdict"] == "confirmed"
    assert (marks["img2.png"]["truth"], marks["img2.png"]["reviewer_class"]) == (None, "tumor")
    assert marks["img2.png"]["agrees_with_truth"] is None and marks["img2.png"]["truth_from"] is None

    predictions = list(csv.DictReader(io.StringIO(staged[CSV_NAME].decode())))
    truth_column = next(k for k in predictions[0] if k in ("ground_truth", "truth", "truth_label"))
    assert [p[truth_column] for p in predictions] == ["tumor", "tumor", ""], "the dataset's, never a mark"
    reviews = {r["item"]: r for r in csv.DictReader(io.StringIO(staged[REVIEWS_NAME].decode()))}
    assert [
        (reviews[f"img{i}.png"]["dataset_truth"], reviews[f"img{i}.png"]["review"]) for i in range(3)
    ] == [
        ("tumor", "tumor"),
        ("tumor", "normal"),
        ("", "tumor"),
    ]


def _pdf(path: Path, data: object) -> Path:
    path.write_bytes(pdf_bytes(data))  # type: ignore[arg-type]
    return path
