"""Report exports (Qt-free part): predictions CSV, run-configuration JSON and slide GeoJSON
(:mod:`app.reports.qupath`).

The PDF report is written by :mod:`app.reports.pdf` from the same :class:`ReportData`. An export
stages every file and commits them as one set (:mod:`app.reports.export`): the tables on the worker's
thread (:class:`app.worker.exporting.TabularExport`), the PDF and the commit on the GUI thread. Names that are
not UTF-8 keep their bytes in the CSVs (as ``f2tta run`` writes them) and are escaped in the JSON.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from app import RESEARCH_NOTICE, __version__
from app._engine import (
    DecisionPath,
    PredictionRow,
    ReviewMark,
    SiteCertificates,
    atomic_write_bytes,
    decision_summary,
    escape_cell,
    predictions_csv,
    shown,
)
from app.core.clinical import ClinicalMetrics
from app.core.figures import GATE_CAPTION, REVIEWED
from app.core.overlay import Overlay
from app.core.review_record import ReviewTally, mark_records
from app.core.stats import Summary
from app.reports.export import discard, prepare, stage
from app.reports.qupath import geojson_bytes

logger = logging.getLogger(__name__)

CSV_NAME = "predictions.csv"
REVIEWS_NAME = "reviews.csv"
CONFIG_NAME = "run_config.json"
GEOJSON_NAME = "tiles.geojson"
PDF_NAME = "report.pdf"
# Every file an export may write: an export replaces them as one set (see app.reports.export).
REPORT_KINDS = (CSV_NAME, CONFIG_NAME, REVIEWS_NAME, GEOJSON_NAME, PDF_NAME)
REVIEW_COLUMNS = (
    "index",
    "position",
    "item",
    "prediction",
    "confidence",
    "shown",
    "review",
    "verdict",
    "reviewed_at",
    "dataset_truth",
    "reviewer",
    "content",
    "site",
)


@dataclass(frozen=True)
class ExampleImage:
    title: str
    rgb: np.ndarray  # (H, W, 3) uint8 with the overlay burnt in
    caption: tuple[str, ...] = ()  # lines under the image (prediction, truth, why it is shown)
    group: str = ""  # "wrong" or "flagged"
    has_overlay: bool = True


@dataclass(frozen=True)
class GalleryItem:
    """A case the report shows, before its image is at hand (the worker reads missing previews)."""

    row: PredictionRow  # with its effective ground truth
    group: str  # "wrong" (against the ground truth) or "flagged" (uncertain, changed, low confidence)
    caption: tuple[str, ...]
    overlay: Overlay | None
    preview: np.ndarray | None  # None: read it again from the source


@dataclass(frozen=True)
class ReportData:
    """Everything a report needs, gathered by the controller on the UI thread (immutable)."""

    rows: tuple[PredictionRow, ...]
    summary: Summary
    classes: tuple[str, ...]
    source_kind: str  # "folder" or "slide"
    source_path: str
    card: dict[str, Any]
    model_path: str
    model_fingerprint: str
    method: str
    run_config: dict[str, Any]  # the engine session's config_dict()
    state_fingerprint: str
    project: dict[str, Any]
    device: str
    order: str = "name"
    label_origin: str | None = None
    slide: dict[str, Any] | None = None  # dimensions, level, downsample, mpp, tile size, warning
    slide_size: tuple[int, int] | None = None  # the slide's level-0 (width, height): GeoJSON is cut to it
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    plot_png: bytes | None = None
    slide_overview: np.ndarray | None = None  # thumbnail with the heat map burnt in
    examples: tuple[ExampleImage, ...] = ()
    created: str = field(default_factory=lambda: datetime.now().astimezone().isoformat(timespec="seconds"))
    software_version: str = __version__
    engine_version: str = ""
    raw_rows: tuple[
        PredictionRow, ...
    ] = ()  # the decisions with the dataset's truth (predictions.csv); () = rows
    metrics: ClinicalMetrics | None = None  # the figures the report leads with (where ground truth exists)
    metrics_truth: str = ""  # what ``metrics`` is measured against (app.core.figures: DATASET or REVIEWED)
    reviewed_metrics: ClinicalMetrics | None = (
        None  # against the reviewers' marks, when ``metrics`` is the dataset's
    )
    gate: tuple[str, ...] = ()  # the applicability warnings that fired: every figure may mean nothing
    gate_caption: str = ""  # what every figure says under them (app.core.figures.gate_caption)
    marks: tuple[tuple[PredictionRow, ReviewMark], ...] = ()  # review marks with their (dataset) rows
    review: ReviewTally = field(
        default_factory=ReviewTally
    )  # the reviewer's work in counts (app.core.review_record)
    gallery: tuple[GalleryItem, ...] = ()  # cases to show; made into ``examples`` by the worker
    method_label: str = ""  # the method's readable name
    model_description: str = ""  # "ViT-Tiny, 4 blocks, 12-px patches, 96 px input"
    model_summary: str = (
        ""  # the card as the app names the model: "Histology · normal / tumor · ViT-Tiny, … — site1"
    )
    weights_sha256: str = ""  # the checkpoint file's SHA-256 recorded in the card (checked at load)
    label_notes: tuple[str, ...] = ()  # applicability warnings shown when the source opened
    hyperparameters: tuple[tuple[str, str, str], ...] = ()  # (name, default, meaning) of the method's fields
    certificates: SiteCertificates | None = None  # the site's certificates (as OUT.certificates.json)
    sentence: str = ""  # what decides the folder now and what reviewing could change (engine outlook)
    site: str = ""  # the source's hash: the reviews.csv's site column (f2tta run --reviews checks it)
    # Files of this project's own earlier reports of this source that this export does not write:
    # they go (no old tiles.geojson beside a folder's reports). Nothing else this export did not
    # write is deleted (app.reports.ownership).
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class StagedReports:
    """The files an export staged in ``directory`` so far (committed with the PDF, see app.reports.export)."""

    directory: Path
    names: tuple[str, ...]
    remove: tuple[str, ...] = ()  # earlier files of this project's own reports that go (ReportData)


def _encoded(text: str) -> bytes:
    """Text as UTF-8, names that are not UTF-8 with their own bytes (as the journal and f2tta run)."""
    return text.encode("utf-8", errors="surrogateescape")


def csv_bytes(rows: tuple[PredictionRow, ...] | list[PredictionRow]) -> bytes:
    """Every row in arrival order, in the columns of ``f2tta run``'s CSV (:data:`engine.run.rows.CSV_COLUMNS`)."""
    return _encoded(predictions_csv(rows))


def write_csv(path: Path, rows: tuple[PredictionRow, ...] | list[PredictionRow]) -> Path:
    """:func:`csv_bytes` written to ``path`` on its own (atomically)."""
    atomic_write_bytes(path, csv_bytes(rows))
    return path


def reviews_bytes(data: ReportData) -> bytes:
    """Every review mark in the order they were made (the order the certificates took them in):
    the image, its decision now, the decision on screen when it was reviewed, the reviewer's
    class and what they did to it (:mod:`app.core.review_record`), who and when."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(REVIEW_COLUMNS)
    for r in mark_records(data.marks, data.rows, data.classes):
        writer.writerow(
            [
                r.index,
                r.position,
                escape_cell(r.item),
                escape_cell(r.now),
                f"{r.confidence:.6f}",
                escape_cell(r.shown),
                escape_cell(r.review),
                r.verdict,
                r.at,
                escape_cell(r.dataset or ""),
                escape_cell(r.reviewer),
                r.content,
                data.site,
            ]
        )
    return _encoded(buf.getvalue())


def review_marks(data: ReportData) -> list[dict[str, Any]]:
    """Every review mark beside the dataset's label of its image, never in its place: the truth
    (the dataset's label, with where the labels came from; null where the dataset labels nothing)
    and the reviewer's class apart, with the decision on screen when it was made, in the order the
    marks were made."""
    return [
        {
            "index": r.index,
            "item": r.item,
            "truth": r.dataset,
            "truth_from": data.label_origin if r.dataset is not None else None,
            "shown": r.shown,
            "reviewer_class": r.review,
            "verdict": r.verdict,
            "decision_now": r.now,
            "agrees_with_truth": None if r.dataset is None else r.review == r.dataset,
            "reviewer": r.reviewer,
            "reviewed_at": r.at,
        }
        for r in mark_records(data.marks, data.rows, data.classes)
    ]


def metrics_document(metrics: ClinicalMetrics | None) -> dict[str, Any] | None:
    """Per-class figures and confusion matrices as JSON (None without ground truth)."""
    if metrics is None or not metrics.labelled:
        return None

    def number(value: float) -> float | None:
        return None if not math.isfinite(value) else round(value, 6)

    def classes(per_class: tuple[Any, ...]) -> list[dict[str, Any]]:
        return [
            {
                "class": m.name,
                "images": m.support,
                "sensitivity": number(m.sensitivity),
                "specificity": number(m.specificity),
                "precision": number(m.precision),
            }
            for m in per_class
        ]

    return {
        "labelled": metrics.labelled,
        "accuracy": number(metrics.accuracy),
        "classes": list(metrics.classes),  # every class of a model with few, else those present
        "confusion_matrix": {
            "rows": "ground truth",
            "columns": "prediction",
            **_counts(metrics.confusion),
        },
        "source_confusion_matrix": _counts(metrics.source_confusion),
        "per_class": classes(metrics.per_class),
        "source_per_class": classes(metrics.source_per_class),
        "confident_errors": metrics.confident_errors,
    }


DENSE_UP_TO = 100  # classes whose matrix is written whole; beyond, only its non-zero cells


def _counts(matrix: np.ndarray) -> dict[str, Any]:
    """A confusion matrix over ``classes``: ``counts`` (rows of counts) for up to
    :data:`DENSE_UP_TO` classes, else ``cells`` (``[truth, prediction, count]`` indices into
    ``classes``, the non-zero ones): its size follows the images, not the classes squared."""
    if len(matrix) <= DENSE_UP_TO:
        return {"counts": matrix.tolist()}
    rows, cols = np.nonzero(matrix)
    return {"cells": [[int(t), int(p), int(matrix[t, p])] for t, p in zip(rows, cols, strict=True)]}


def _with_truth(document: dict[str, Any] | None, truth: str) -> dict[str, Any] | None:
    """``document`` saying what its figures are measured against."""
    return None if document is None else {"measured_against": truth, **document}


def guard_events(rows: tuple[PredictionRow, ...] | list[PredictionRow]) -> list[PredictionRow]:
    """The rows after which the collapse guard acted, in arrival order."""
    return sorted((r for r in rows if r.guard_message), key=lambda r: r.index)


def config_document(data: ReportData) -> dict[str, Any]:
    s = data.summary
    review = data.certificates.to_json() if data.certificates is not None else {}
    return {
        "notice": RESEARCH_NOTICE,
        "created": data.created,
        "software": {"f2tta_studio": data.software_version, "engine": data.engine_version},
        "source": {
            "kind": data.source_kind,
            "path": data.source_path,
            "arrival_order": data.order if data.source_kind == "folder" else "reading order",
            "ground_truth": data.label_origin,
            "slide": data.slide,
            "notes": list(data.notes),
        },
        "model": {
            "path": data.model_path,
            "fingerprint": data.model_fingerprint,
            "weights_sha256": data.weights_sha256 or None,
            "card": data.card,
        },
        "method": data.method,
        "run": data.run_config,
        "device": data.device,
        "project": data.project,
        "report_files": report_files(data),  # this set: a later export of it removes no other file
        "state_fingerprint": data.state_fingerprint,
        "summary": {
            "images": s.images,
            "labelled": s.labelled,
            "changed_by_adaptation": s.changed,
            "adapted_accuracy": None if not math.isfinite(s.adapted_accuracy) else s.adapted_accuracy,
            "source_accuracy": None if not math.isfinite(s.source_accuracy) else s.source_accuracy,
            "accuracy_measured_against": data.metrics_truth or None,
            "positive": s.positive,  # decided as the card's positive_class (class 1 when it names none)
            # the classes images were decided as (a class absent: none), so it grows with the images
            "predicted_by_class": {
                c: n
                for c, n in zip(data.classes, padded_counts(s.by_class, len(data.classes)), strict=True)
                if n
            },
            "mean_confidence": None if not math.isfinite(s.mean_confidence) else s.mean_confidence,
            "low_confidence": s.low_confidence,
            "guard_events": s.guard_events,
            "skipped_updates": s.skipped_updates,
            "reviewed": len(data.marks),
            "reviews": data.review.document(),  # confirmed, corrected, agreement and against what
            "decided_by_review_images": sum(1 for r in data.rows if r.decision_path == DecisionPath.REVIEWED),
            # a promoted rule's call on them is provisional (no certificate covers them yet): the
            # reported decision is the rule's below it, and the reason names the call
            "provisional_images": sum(1 for r in data.rows if r.decision_path == DecisionPath.PROVISIONAL),
            # the rule's identifier (as OUT.certificates.json: "source" until a review moves it;
            # "by part" where a split folder's parts differ) and who decides, in words
            "rule_in_use": str(review["rule_in_use"]) if review else "source",
            "decides": str(review["decides"]) if review else "",
            "outlook": data.sentence,
        },
        "metrics": _with_truth(metrics_document(data.metrics), data.metrics_truth),
        "reviewed_metrics": _with_truth(metrics_document(data.reviewed_metrics), REVIEWED),
        "applicability": {
            "gate_fired": bool(data.gate),
            "warnings": list(data.gate),
            "figures": f"{data.gate_caption or GATE_CAPTION}."
            if data.gate
            else "no applicability check fired",
        },
        "guard_events": [
            {"index": r.index, "item": r.name, "message": r.guard_message} for r in guard_events(data.rows)
        ],
        "review_marks": review_marks(data),
        "adaptation_changes": decision_summary(data.rows),
        "certificates": list(review["comparisons"]) if review else [],
        "errors": list(data.errors),
    }


def config_bytes(data: ReportData) -> bytes:
    """The run configuration as JSON (ASCII: a name that is not UTF-8 keeps its escapes)."""
    return (json.dumps(config_document(data), indent=2, default=str) + "\n").encode("ascii")


def report_failure(exc: Exception, directory: Path) -> str:
    """What to tell the user when reports could not be written (anything but an OSError is a bug: logged)."""
    if not isinstance(exc, OSError):
        logger.error("writing reports failed", exc_info=exc)
    return f"Reports cannot be written to {shown(directory)}: {shown(exc)}; the reports there are unchanged"


def report_files(data: ReportData) -> list[str]:
    """The files an export of ``data`` writes, in the order they are reported."""
    names = [CSV_NAME, CONFIG_NAME]
    names += [REVIEWS_NAME] if data.marks else []
    names += [GEOJSON_NAME] if data.source_kind == "slide" else []
    return [*names, PDF_NAME]


def tabular_reports(data: ReportData) -> list[tuple[str, bytes]]:
    """The CSV, JSON, reviews and (for slides) GeoJSON reports of ``data``, by file name."""
    files = [(CSV_NAME, csv_bytes(data.raw_rows or data.rows)), (CONFIG_NAME, config_bytes(data))]
    if data.marks:
        files.append((REVIEWS_NAME, reviews_bytes(data)))
    if data.source_kind == "slide":
        positive = data.card.get("positive_class", 1)
        tiles = geojson_bytes(
            data.rows,
            data.classes,
            data.source_path,
            positive if isinstance(positive, int) else 1,
            data.slide_size,
        )
        files.append((GEOJSON_NAME, tiles))
    return files


def stage_tabular_reports(directory: Path, data: ReportData) -> StagedReports:
    """Stage :func:`tabular_reports` in ``directory`` at once; the PDF and the commit follow (the app
    stages them in steps: :class:`app.worker.exporting.TabularExport`).

    Raises:
        OSError: the folder or a destination cannot be used, or a file cannot be staged (a full
            disk); nothing of the earlier reports was changed.
    """
    prepare(directory, REPORT_KINDS)
    files = tabular_reports(data)
    try:
        for name, content in files:
            stage(directory, name, content)
    except BaseException:
        discard(directory)
        raise
    return StagedReports(directory, tuple(name for name, _ in files), data.remove)


def padded_counts(counts: tuple[int, ...], classes: int) -> list[int]:
    """Per-class counts as long as the model's classes (a class nobody was decided as counts 0)."""
    return (list(counts) + [0] * classes)[:classes]
