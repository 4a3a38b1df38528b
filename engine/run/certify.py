"""``f2tta run``'s review certificates: a site's marks applied to its run, written beside ``--out``.

The marks come from the project itself (``f2tta run --state PROJECT``: the marks the app kept
for this folder, with the moments its comparisons started) or from a reviews file (``--reviews
FILE``, the app's ``reviews.csv`` export: item, review, reviewed_at, and the folder it was
made on). Either way they go through the site's review (:class:`engine.run.review.SiteReview`):
the ladder's comparisons are rebuilt, each mark used when the comparison's random order reaches
its image, and the site's images decided by the rule the reviews leave in use. Marks from a file
start their comparisons on all the images of the run (the app starts them on the images
processed when the reviewer asked, the whole folder once it is done); a file exported from
another folder is refused.

The journal and the predictions CSV stay the label-free record; the certified decisions go to
their own files beside ``--out``:

* ``<out>.certified.csv``: per image the decision as made, the source model's, the certified
  decision, the rule that decided it (its identifier: ``source``, ``fit``, ...), whether a
  certificate covers it, where a promoted rule calls it otherwise but no certificate covers it
  yet that provisional call, and the part of a split folder it belongs to;
* ``<out>.certificates.json``: the rule in use and, per comparison, its candidate, the images it
  was frozen on and those its certificate covers, its blocks, reviews, bounds, e-value, verdict,
  one sentence for people and one with the statistics (:mod:`engine.run.certificates`). Error
  control is per folder (per part of a folder the method split): the ladder's levels add up to
  at most 5 % there (``docs/review-certificates.md``, "One error rule").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.errors import F2TTAError
from engine.io.sources import source_hash
from engine.io.tables import table_rows
from engine.review.marks import MarkError, parse_time
from engine.run.certificates import site_certificates
from engine.run.outputs import certified_paths
from engine.run.review import SiteReview
from engine.run.rows import PredictionRow, escape_cell, unescape_cell
from engine.util.atomic import atomic_write_bytes
from engine.vocabulary import Coverage

#: Columns the reviews file must have (the app's ``reviews.csv`` has these and more).
REVIEW_FILE_COLUMNS = ("item", "review", "reviewed_at")
SITE_COLUMN = "site"  # the folder's identity (its source hash) in files the app writes now
CERTIFIED_COLUMNS = (
    "index",
    "item",
    "as_decided",
    "source",
    "certified",
    "rule",
    "coverage",
    "provisional",
    "part",
)


class ReviewFileError(F2TTAError):
    """The reviews file cannot be used; the message says why."""


def project_review_folder(state: Path) -> Path | None:
    """The review folder of the project ``state`` names (the project folder or its ``state/``), or None."""
    for project in (state, state.parent):
        if (project / "profile.json").is_file() and (project / "state").is_dir():
            return project / "review"
    return None


def check_reviews_file(path: Path) -> None:
    """Refuse, before any work, a reviews file that cannot be used (unreadable, a needed column
    missing, a time that is not a time); whether its marks are this folder's is checked after the run.

    Raises:
        ReviewFileError: the message says why.
    """
    try:
        lines = table_rows(path)
        header = next(lines, None)
        if header is None:
            raise ReviewFileError(f"{path}: empty")
        names = [h.strip() for h in header[1]]
        missing = [c for c in (*REVIEW_FILE_COLUMNS, SITE_COLUMN) if c not in names]
        if missing:
            raise ReviewFileError(f"{path}: no {', '.join(missing)} column (the app's reviews.csv has them)")
        at = names.index("reviewed_at")
        for line, cells in lines:
            if len(cells) > at:
                try:
                    parse_time(cells[at])
                except MarkError as exc:
                    raise ReviewFileError(f"{path}, line {line}: {exc}") from exc
    except ReviewFileError:
        raise
    except F2TTAError as exc:
        raise ReviewFileError(str(exc)) from exc


def marks_from_file(path: Path, review: SiteReview, classes: Sequence[str]) -> tuple[int, int, int]:
    """Put the marks of a reviews file into ``review`` (in the order they were made, as times);
    returns ``(used, naming no image of this run, with a class the model does not have)``.

    The last mark of an item wins, with who made it and the decision on screen then (its
    ``reviewer`` and ``shown`` columns, where the file has them). The file must say which folder its marks were made on (its
    ``site`` column, as the app's export writes it) and be this folder's; where it gives an
    image's place in the arrival order (``position``) or the fingerprint of the picture reviewed
    (``content``), they must be this run's (issue 42: a reviews file of another folder with the
    same file names, its site cells emptied or this folder's pasted in, was used without a word).

    Raises:
        ReviewFileError: the file cannot be read, lacks a needed column, has a time that is not a
            time, or was made on another folder or on other pictures.
    """
    try:
        lines = table_rows(path)
        header = next(lines, None)
    except F2TTAError as exc:
        raise ReviewFileError(str(exc)) from exc
    if header is None:
        raise ReviewFileError(f"{path}: empty")
    names = [h.strip() for h in header[1]]
    missing = [c for c in (*REVIEW_FILE_COLUMNS, SITE_COLUMN) if c not in names]
    if missing:
        raise ReviewFileError(
            f"{path}: no {', '.join(missing)} column: it cannot be told which folder and images these marks "
            "were made on (export reviews.csv again from the app)"
        )
    optional = [c for c in ("position", "content", "shown", "reviewer") if c in names]
    at = {c: names.index(c) for c in (*REVIEW_FILE_COLUMNS, SITE_COLUMN, *optional)}
    rows = {row.name: row for row in review.rows}
    class_index = {c: i for i, c in enumerate(classes)}
    site = source_hash(review.source_id)
    latest: dict[str, tuple[Any, int, int, int | None, str]] = {}
    unknown_items = unknown_classes = 0
    try:
        for line, cells in lines:
            if len(cells) < len(names):
                continue
            if cells[at[SITE_COLUMN]].strip() != site:
                raise ReviewFileError(
                    f"{path}, line {line}: these marks were made on another folder or slide "
                    f"(site {cells[at[SITE_COLUMN]].strip()!r}, this run's is {site!r}); they are not used"
                )
            item = unescape_cell(cells[at["item"]])
            label = class_index.get(unescape_cell(cells[at["review"]]).strip())
            row = rows.get(item)
            if row is None:
                unknown_items += 1
                continue
            _same_image(path, line, item, row, cells, at)
            if label is None:
                unknown_classes += 1
            else:
                try:
                    when = parse_time(cells[at["reviewed_at"]])
                except MarkError as exc:
                    raise ReviewFileError(f"{path}, line {line}: {exc}") from exc
                if item not in latest or when >= latest[item][0]:
                    shown = (
                        class_index.get(unescape_cell(cells[at["shown"]]).strip()) if "shown" in at else None
                    )
                    reviewer = unescape_cell(cells[at["reviewer"]]).strip() if "reviewer" in at else ""
                    latest[item] = (when, line, label, shown, reviewer)
    except F2TTAError as exc:
        raise ReviewFileError(str(exc)) from exc
    for item, (when, _, label, shown, reviewer) in sorted(
        latest.items(), key=lambda kv: (kv[1][0], kv[1][1])
    ):
        # the decision on screen when the mark was made, as the app's reviews.csv records it
        # (``shown``); a file without it: the decision shown now
        review.set_mark(rows[item].key, label, reviewer, when.isoformat(), shown)
    return len(latest), unknown_items, unknown_classes


def _same_image(
    path: Path, line: int, item: str, row: PredictionRow, cells: Sequence[str], at: dict[str, int]
) -> None:
    """Refuse a mark whose image is not this run's image of that name (another place in the
    arrival order, or another picture).

    Raises:
        ReviewFileError: the message names the line and the image.
    """
    position = cells[at["position"]].strip() if "position" in at else ""
    if position and position != str(row.position):
        raise ReviewFileError(
            f"{path}, line {line}: {item!r} was image {position} of the folder these marks were made on, "
            f"and is image {row.position} here: they were made on another folder; they are not used"
        )
    content = cells[at["content"]].strip() if "content" in at else ""
    if content and row.content and content != row.content:
        raise ReviewFileError(
            f"{path}, line {line}: {item!r} is not the picture these marks were made on (its content "
            "differs): they are not used"
        )


def certify(review: SiteReview) -> None:
    """Start the site's comparisons on all its images and use the marks as far as their orders reach."""
    while True:
        index = review.next_item()
        if index is None or review.rows[index].key not in review.marks:
            return


def write_certified(out_csv: Path, review: SiteReview, classes: Sequence[str]) -> tuple[Path, Path]:
    """``<out>.certified.csv`` and ``<out>.certificates.json`` beside ``out_csv``; their paths.

    Raises:
        OSError: they cannot be written (each is replaced atomically).
    """
    rows = review.rows
    decided, shown = review.decisions(), review.shown()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CERTIFIED_COLUMNS)
    rules, parts = review.row_rules(), review.row_parts()
    for row, certified, call, rule, state, part in zip(
        rows, decided, shown, rules, row_coverage(review), parts, strict=True
    ):
        writer.writerow(
            [
                row.index,
                escape_cell(row.name),
                classes[row.prediction],
                classes[row.source_prediction],
                classes[int(certified)],
                str(rule),
                str(state),
                classes[int(call)] if state == Coverage.PROVISIONAL else "",
                part,
            ]
        )
    certified_path, certificates = certified_paths(out_csv)
    atomic_write_bytes(certified_path, buf.getvalue().encode("utf-8"))
    text = json.dumps(certificates_json(review), indent=2, allow_nan=False) + "\n"
    atomic_write_bytes(certificates, text.encode("utf-8"))
    return certified_path, certificates


def row_coverage(review: SiteReview) -> list[Coverage]:
    """Per row: covered where a promoted rule decides it under a certificate, provisional where a
    promoted rule calls it otherwise but no certificate covers it yet (reported with the rule
    below), none where no rule of the reviews decides it."""
    provisional = review.provisional()
    return [
        Coverage.PROVISIONAL if provisional[i] else Coverage.COVERED if rule.by_review else Coverage.NONE
        for i, rule in enumerate(review.row_rules())
    ]


def certificates_json(review: SiteReview) -> dict[str, Any]:
    """The site's certificates as ``OUT.certificates.json`` gives them (:mod:`engine.run.certificates`)."""
    return site_certificates(review).to_json()
