"""``f2tta run --reviews FILE``: review marks made elsewhere (the app's ``reviews.csv``) applied to a run.

The marks name images by their item (the folder-relative path the predictions CSV also shows)
and give the reviewer's class and the time of the review. Each mark on a disagreement (an image
whose adapted decision differs from the source model's) is one review of that image's site group
(:class:`engine.review.CertificateBook`, ``docs/review-certificates.md``): a group whose
certificate turns *reverted* goes back to the source model's decisions, every other group keeps
the label-free decisions. The journal and the predictions CSV are left as they are (they are the
label-free record); the certified decisions go to their own files beside ``--out``:

* ``<out>.certified.csv``: per image the adapted, the source and the certified decision, its
  group and the group's verdict;
* ``<out>.certificates.json``: per group the reviews used, the bounds and the verdict.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import F2TTAError
from engine.io.tables import table_rows
from engine.review import CertificateBook
from engine.run.outputs import certified_paths
from engine.run.rows import PredictionRow, escape_cell, unescape_cell
from engine.util.atomic import atomic_write_bytes

#: Columns the reviews file must have (the app's ``reviews.csv`` has these and more).
REVIEW_FILE_COLUMNS = ("item", "review", "reviewed_at")
CERTIFIED_COLUMNS = ("index", "item", "site_group", "adapted", "source", "certified", "verdict")


class ReviewFileError(F2TTAError):
    """The reviews file cannot be used; the message says why."""


@dataclass(frozen=True)
class ReviewMarks:
    """The usable marks of a reviews file and what was left out."""

    marks: tuple[tuple[PredictionRow, int], ...]  # (row, reviewer's class index), in review order
    unknown_items: int  # marks naming no processed image of this run
    unknown_classes: int  # marks giving a class the model does not have


def read_review_marks(path: Path, rows: Sequence[PredictionRow], classes: Sequence[str]) -> ReviewMarks:
    """The marks of ``path`` matched to ``rows`` by item, in the order they were made.

    The last mark of an item wins (a reviewer who changed their mind); marks are ordered by their
    time, then by their line.

    Raises:
        ReviewFileError: the file cannot be read or lacks a needed column.
    """
    try:
        lines = table_rows(path)
        header = next(lines, None)
    except F2TTAError as exc:
        raise ReviewFileError(str(exc)) from exc
    if header is None:
        raise ReviewFileError(f"{path}: empty")
    names = [h.strip() for h in header[1]]
    missing = [c for c in REVIEW_FILE_COLUMNS if c not in names]
    if missing:
        raise ReviewFileError(f"{path}: no {', '.join(missing)} column (the app's reviews.csv has them)")
    at = {c: names.index(c) for c in REVIEW_FILE_COLUMNS}
    by_item = {row.name: row for row in rows}
    class_index = {c: i for i, c in enumerate(classes)}
    latest: dict[str, tuple[str, int, int]] = {}  # item -> (time, line, class)
    unknown_items = unknown_classes = 0
    try:
        for line, cells in lines:
            if len(cells) < len(names):
                continue
            item = unescape_cell(cells[at["item"]])
            label = class_index.get(unescape_cell(cells[at["review"]]).strip())
            if item not in by_item:
                unknown_items += 1
            elif label is None:
                unknown_classes += 1
            else:
                latest[item] = (cells[at["reviewed_at"]], line, label)
    except F2TTAError as exc:
        raise ReviewFileError(str(exc)) from exc
    ordered = sorted(latest.items(), key=lambda kv: (kv[1][0], kv[1][1]))
    return ReviewMarks(
        tuple((by_item[item], label) for item, (_, _, label) in ordered), unknown_items, unknown_classes
    )


def certify(rows: Sequence[PredictionRow], marks: ReviewMarks) -> CertificateBook:
    """The certificates of a run's rows (in arrival order) and its review marks."""
    return CertificateBook.from_marks(
        ((row.site_group, row.changed) for row in rows),
        ((row.site_group, row.prediction, row.source_prediction, label) for row, label in marks.marks),
    )


def write_certified(out_csv: Path, rows: Sequence[PredictionRow], book: CertificateBook) -> tuple[Path, Path]:
    """``<out>.certified.csv`` and ``<out>.certificates.json`` beside ``out_csv``; their paths.

    Raises:
        OSError: they cannot be written (each is replaced atomically).
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CERTIFIED_COLUMNS)
    for row in rows:
        decided = book.decide(row.prediction, row.source_prediction, row.site_group)
        writer.writerow(
            [
                row.index,
                escape_cell(row.name),
                "" if row.site_group is None else row.site_group,
                row.prediction,
                row.source_prediction,
                decided,
                book.verdict(row.site_group),
            ]
        )
    certified, certificates = certified_paths(out_csv)
    atomic_write_bytes(certified, buf.getvalue().encode("utf-8"))
    groups = [
        {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in g.items()}
        for g in book.summaries()
    ]
    text = json.dumps({"groups": groups}, indent=2, allow_nan=False, default=str) + "\n"
    atomic_write_bytes(certificates, text.encode("utf-8"))
    return certified, certificates
