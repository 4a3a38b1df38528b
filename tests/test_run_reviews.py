"""``f2tta run --reviews FILE``: review marks (the app's reviews.csv) applied to a run's rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from app_fixtures import CLASSES, sample_row
from PIL import Image
from support import random_images

from engine.cli import main as cli_main
from engine.run.certify import ReviewFileError, certify, read_review_marks, write_certified
from tests.cli_helpers import run_argv


def _reviews(path: Path, marks: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["index", "item", "prediction", "review", "verdict", "reviewed_at"])
        for i, (item, review, at) in enumerate(marks):
            writer.writerow([i, item, "tumor", review, "", at])
    return path


def test_a_harmful_group_is_reverted_and_a_helpful_one_kept(tmp_path: Path) -> None:
    """Group 1: the adapted decisions are wrong on every reviewed disagreement; group 2: right."""
    rows = []
    for i in range(200):
        group = 1 + i % 2
        changed = i % 4 < 2  # half of each group's images are disagreements
        rows.append(sample_row(i, pred=1, src=0 if changed else 1, site_group=group))
    marks = []
    for row in rows:
        if row.changed and len(marks) < 40:
            truth = "normal" if row.site_group == 1 else "tumor"  # group 1: the source was right
            marks.append((row.name, truth, f"2026-11-26T10:{len(marks):02d}:00"))
    marks.append(("not-in-this-run.png", "tumor", "2026-11-26T11:00:00"))
    marks.append((rows[0].name, "glaucoma", "2026-11-26T11:01:00"))  # not a class of the model
    read = read_review_marks(_reviews(tmp_path / "reviews.csv", marks), rows, CLASSES)
    assert len(read.marks) == 40 and read.unknown_items == 1 and read.unknown_classes == 1
    book = certify(rows, read)
    assert book.verdict(1) == "reverted" and book.verdict(2) != "reverted"
    certified, certificates = write_certified(tmp_path / "out.csv", rows, book)
    with certified.open(newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    for line, row in zip(table, rows, strict=True):
        expected = row.source_prediction if row.site_group == 1 else row.prediction
        assert int(line["certified"]) == expected and line["verdict"] == book.verdict(row.site_group)
    groups = json.loads(certificates.read_text(encoding="utf-8"))["groups"]
    assert {g["group"]: g["verdict"] for g in groups}[1] == "reverted"


def test_a_reviews_file_without_the_needed_columns_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("item,label\nimg0.png,tumor\n", encoding="utf-8")
    with pytest.raises(ReviewFileError, match="review, reviewed_at"):
        read_review_marks(bad, [sample_row(0)], CLASSES)


def test_cli_run_with_reviews_writes_the_certified_decisions(tiny_model_path: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    for i, img in enumerate(random_images(6, seed=2)):
        Image.fromarray(img).save(inp / f"img{i}.png")
    reviews = _reviews(tmp_path / "reviews.csv", [("img0.png", "normal", "2026-11-26T10:00:00")])
    out = tmp_path / "out.csv"
    argv = run_argv(tiny_model_path, inp, out, tmp_path / "state", "--reviews", str(reviews))
    assert cli_main(argv) == 0
    with (tmp_path / "out.certified.csv").open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 6
    assert json.loads((tmp_path / "out.certificates.json").read_text(encoding="utf-8"))["groups"]
    missing = run_argv(tiny_model_path, inp, out, tmp_path / "state", "--reviews", str(tmp_path / "none.csv"))
    assert cli_main(missing) == 2
