"""Gathering a :class:`ReportData` snapshot on the UI thread from the run model and the session.

The gallery is chosen here (wrong cases first, most confident first; then flagged ones), with
the previews and overlays at hand; the export worker reads the previews that are not (rows of an
earlier session) and burns the overlays in (:class:`app.worker.exporting.TabularExport`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np

from app._engine import IN_A_REPORT, SlideSource, source_hash
from app._engine import __version__ as engine_version
from app.core.filters import PredictionRow
from app.core.names import describe_model, method_label
from app.core.open_session import OpenSession
from app.core.overlay import slide_heatmap
from app.core.project_lines import model_text
from app.core.run_model import RunModel
from app.reports.files import GalleryItem, ReportData

logger = logging.getLogger(__name__)

MAX_WRONG = 6  # wrong cases in the gallery
MAX_FLAGGED = 6  # flagged cases in the gallery


def pick_examples(
    rows: list[PredictionRow], low_confidence: float = 0.6, wrong: int = MAX_WRONG, flagged: int = MAX_FLAGGED
) -> list[tuple[str, PredictionRow, str]]:
    """``(group, row, why)`` of the cases worth showing: wrong ones, then flagged ones.

    Wrong (against the ground truth, review marks included) come most confident first, since a
    confident error is the one a reader would not question; flagged cases are those the model was
    unsure of or that adaptation changed.
    """
    chosen: list[tuple[str, PredictionRow, str]] = []
    errors = sorted((r for r in rows if r.correct is False), key=lambda r: -r.confidence)
    for row in errors[:wrong]:
        why = "confident error" if row.confidence >= 0.9 else "error"
        chosen.append(("wrong", row, why))
    taken = {r.position for _, r, _ in chosen}
    candidates: list[tuple[float, PredictionRow, str]] = []
    finite = [r.uncertainty for r in rows if math.isfinite(r.uncertainty)]
    high = float(np.quantile(finite, 0.9)) if finite else math.inf
    for row in rows:
        if row.position in taken or row.correct is False:
            continue
        if row.confidence < low_confidence:
            candidates.append((row.confidence, row, f"low confidence (< {low_confidence:.2f})"))
        elif row.changed:
            candidates.append((1.0 + row.confidence, row, "changed by adaptation"))
        elif math.isfinite(row.uncertainty) and row.uncertainty >= high:
            candidates.append((2.0 - row.uncertainty, row, "high uncertainty"))
    candidates.sort(key=lambda c: c[0])
    chosen += [("flagged", row, why) for _, row, why in candidates[:flagged]]
    return chosen


def truth_line(dataset: str | None, origin: str | None, reviewer: str | None) -> str:
    """The truth of an image as every report states it: the dataset's label with where it came
    from, and the reviewer's class beside it, never one in place of the other
    ("Truth: tumor (labels.csv) · reviewer: normal").

    Args:
        dataset: the dataset's label (None: the dataset does not label the image).
        origin: where the dataset's labels came from ("labels.csv", "class sub-folders").
        reviewer: the class the reviewer marked (None: not reviewed).
    """
    if dataset is not None:
        text = f"Truth: {dataset} ({origin or 'dataset'})"
    else:
        text = "Truth: not labelled in the dataset" if reviewer is not None else "Truth: not known"
    return text + (f" · reviewer: {reviewer}" if reviewer is not None else "")


def caption(
    row: PredictionRow, why: str, dataset: str | None, origin: str | None, reviewer: str | None
) -> tuple[str, ...]:
    """The lines under a gallery image (``row`` as shown; the truths as :func:`truth_line` takes them)."""
    return (
        f"#{row.position + 1} {row.name}",
        f"Predicted: {row.prediction_label} ({row.confidence:.2f})",
        truth_line(dataset, origin, reviewer),
        f"Original model: {row.source_label} ({row.source_confidence:.2f})",
        f"Shown as: {why}",
    )


def collect_report_data(
    model: RunModel, state: OpenSession, plot_png: Callable[[], bytes]
) -> ReportData | None:
    """Snapshot everything the reports need; None when nothing has been processed.

    Args:
        model: the run model (rows, previews, overlays, tile values, statistics, review marks).
        state: the session's state (model card, settings, project, last run, errors).
        plot_png: renders the plots panel (called on the UI thread).
    """
    info, source = state.info, model.source
    rows = [model.reported(i) for i in range(len(model.rows))]  # what the certificates cover
    if info is None or source is None or not rows:
        return None
    raw_by_key = {r.key: r for r in model.raw_rows}
    classes = tuple(info.card.classes)

    def mark_name(key: str) -> str | None:
        mark = model.marks.get(key)
        if mark is None:
            return None
        return classes[mark.label] if 0 <= mark.label < len(classes) else str(mark.label)

    def dataset_name(key: str) -> str | None:
        raw = raw_by_key.get(key)
        return None if raw is None or raw.ground_truth is None else raw.truth_label or str(raw.ground_truth)

    gallery = tuple(
        GalleryItem(
            row,
            group,
            caption(row, why, dataset_name(row.key), source.label_origin, mark_name(row.key)),
            model.overlays.get(row.position),
            model.previews.get(row.position),
        )
        for group, row, why in pick_examples(rows, model.low_confidence)
    )
    slide_info = None
    overview = None
    if isinstance(source, SlideSource):
        plan = source.plan
        slide_info = {
            "dimensions (level 0)": f"{source.dimensions[0]} x {source.dimensions[1]}",
            "format": source.vendor,
            "slide µm/px": plan.slide_mpp,
            "model µm/px": plan.target_mpp,
            "level read": plan.level,
            "downsample": round(plan.downsample, 4),
            "tile size": plan.tile_size,
            "tile footprint (level 0 px)": plan.footprint,
            "resolution matched": plan.matched,
            "tissue tiles": len(plan.tiles),
            "warning": plan.warning,
        }
        thumb_w = source.thumbnail.shape[1]
        overview = slide_heatmap(
            source.thumbnail, model.tile_values, plan.footprint * thumb_w / source.dimensions[0], opacity=0.45
        )
    ended, latest = state.last_run, state.latest_project
    state_fingerprint = (
        ended.state_fingerprint if ended is not None and ended.state_fingerprint else info.state_fingerprint
    )
    marks = tuple((raw_by_key[k], m) for k, m in model.marks.items() if k in raw_by_key)
    figures = model.figures()
    both = figures.dataset.labelled and figures.reviewed.labelled
    decided = tuple(  # the reported decisions with the dataset's truth (the review's rule where it moved)
        dataclasses.replace(shown, ground_truth=raw.ground_truth, truth_label=raw.truth_label)
        for shown, raw in zip(rows, model.raw_rows, strict=True)
    )
    return ReportData(
        rows=tuple(rows),
        summary=model.stats.summary(),
        classes=classes,
        source_kind=source.kind,
        source_path=str(source.path if isinstance(source, SlideSource) else source.root),
        card=info.card.to_json(),
        model_path=info.model_path,
        model_fingerprint=info.fingerprint,
        method=info.method,
        run_config=info.config,
        state_fingerprint=state_fingerprint,
        project={
            "name": info.project.name,
            "id": info.project.project_id,  # whose reports they are (app.reports.ownership)
            "images seen": latest.images_seen if latest is not None else 0,
            "updated": latest.updated if latest is not None else None,
        },
        device=info.device,
        order=state.settings.order if source.kind == "folder" else "reading order",
        label_origin=source.label_origin,
        slide=slide_info,
        slide_size=(int(source.dimensions[0]), int(source.dimensions[1]))
        if isinstance(source, SlideSource)
        else None,
        notes=tuple(model.notes),
        errors=tuple(state.errors),
        plot_png=plot_png(),
        slide_overview=None if overview is None else np.ascontiguousarray(overview),
        engine_version=engine_version,
        raw_rows=decided,
        metrics=figures.lead,
        metrics_truth=figures.lead_truth,
        reviewed_metrics=figures.reviewed if both else None,
        gate=figures.gate,
        gate_caption=figures.caption,
        marks=marks,
        review=figures.review,
        gallery=gallery,
        method_label=method_label(info.method),
        model_description=describe_model(info.card),
        model_summary=model_text(info.card),
        weights_sha256=info.weights_sha256,
        label_notes=tuple(model.checks.values()),
        hyperparameters=hyperparameters(info.method),
        certificates=model.desk.document(),
        sentence=model.desk.sentence(classes, where=IN_A_REPORT),  # read away from the app: no key
        site=source_hash(source.source_id),
    )


def side_by_side(left: np.ndarray, right: np.ndarray, gap: int = 4) -> np.ndarray:
    """Two images of the same size next to each other on a white gap."""
    h = left.shape[0]
    spacer = np.full((h, gap, 3), 255, np.uint8)
    return np.concatenate(
        [np.asarray(left[..., :3], np.uint8), spacer, np.asarray(right[..., :3], np.uint8)], axis=1
    )


def hyperparameters(method: str) -> tuple[tuple[str, str, str], ...]:
    """(name, default, meaning) of the method's settings, for the report's appendix."""
    from app._engine import method_config_class
    from app.core.names import readable_help
    from app.core.settings import config_fields

    return tuple(
        (f.name, str(f.default), readable_help(f.help or ""))
        for f in config_fields(method_config_class(method))
    )
