"""Gathering a :class:`ReportData` snapshot on the UI thread from the run model and the session."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from app._engine import SlideSource
from app._engine import __version__ as engine_version
from app.overlay import composite, slide_heatmap
from app.reports import ExampleImage, ReportData
from app.rows import PredictionRow
from app.run_model import RunModel
from app.state import SessionState

MAX_EXAMPLES = 6


def pick_examples(
    rows: list[PredictionRow], available: set[int], count: int = MAX_EXAMPLES
) -> list[PredictionRow]:
    """Rows worth showing: changed by adaptation, then most uncertain, then least confident.

    Only rows whose preview is at hand (``available`` stream positions) are picked.
    """
    candidates = [r for r in rows if r.position in available]
    chosen: list[PredictionRow] = []

    def take(ordered: list[PredictionRow], limit: int) -> None:
        for row in ordered:
            if len(chosen) >= count or limit <= 0:
                return
            if row not in chosen:
                chosen.append(row)
                limit -= 1

    take([r for r in candidates if r.changed], 2)
    take(sorted(candidates, key=lambda r: -r.uncertainty if math.isfinite(r.uncertainty) else 0.0), 2)
    take(sorted(candidates, key=lambda r: r.confidence), count)
    take(candidates, count)
    return sorted(chosen, key=lambda r: r.index)


def collect_report_data(
    model: RunModel, state: SessionState, plot_png: Callable[[], bytes]
) -> ReportData | None:
    """Snapshot everything the reports need; None when nothing has been processed.

    Args:
        model: the run model (rows, previews, overlays, tile values, statistics).
        state: the session's state (model card, settings, profile, last run, errors).
        plot_png: renders the plots panel (called on the UI thread).
    """
    info, source = state.info, model.source
    rows = list(model.rows)
    if info is None or source is None or not rows:
        return None
    available = {r.position for r in rows if r.position in model.previews}
    examples = []
    for row in pick_examples(rows, available):
        preview = model.previews.get(row.position)
        if preview is None:
            continue
        title = f"#{row.index} {row.name}: {row.prediction_label} ({row.confidence:.2f}), source {row.source_label}"
        examples.append(ExampleImage(title, composite(preview, model.overlays.get(row.position))))
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
            source.thumbnail, model.tile_values, plan.footprint * thumb_w / source.dimensions[0], opacity=0.6
        )
    ended, latest = state.last_run, state.latest_profile
    state_fingerprint = (
        ended.state_fingerprint if ended is not None and ended.state_fingerprint else info.state_fingerprint
    )
    return ReportData(
        rows=tuple(rows),
        summary=model.stats.summary(),
        classes=tuple(info.card.classes),
        source_kind=source.kind,
        source_path=str(source.path if isinstance(source, SlideSource) else source.root),
        card=info.card.to_json(),
        model_path=info.model_path,
        model_fingerprint=info.fingerprint,
        method=info.method,
        run_config=info.config,
        state_fingerprint=state_fingerprint,
        profile={
            "name": info.profile.name,
            "images seen": latest.images_seen if latest is not None else 0,
            "updated": latest.updated if latest is not None else None,
        },
        device=info.device,
        order=state.settings.order,
        label_origin=source.label_origin,
        slide=slide_info,
        notes=tuple(model.notes),
        errors=tuple(state.errors),
        plot_png=plot_png(),
        slide_overview=None if overview is None else np.ascontiguousarray(overview),
        examples=tuple(examples),
        engine_version=engine_version,
    )
