"""The PDF report: QTextDocument (HTML) printed with QPdfWriter; safe to run off the UI thread.

Only QImage/QTextDocument/QPdfWriter are used (no QPixmap or widgets), which Qt allows in any
thread, so the export worker can write the PDF while the window stays responsive.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QMarginsF, QUrl
from PySide6.QtGui import QImage, QPageLayout, QPageSize, QPdfWriter, QTextDocument

from app import APP_NAME, RESEARCH_NOTICE
from app.reports import ReportData, guard_events

PAGE_WIDTH_PX = 700  # layout width of the document; the writer scales it to the page
MAX_GUARD_EVENTS = 50  # guard events listed in the PDF (the JSON and the CSV have them all)


def array_to_qimage(rgb: np.ndarray) -> QImage:
    """An (H, W, 3) uint8 array as a QImage that owns a copy of the pixels."""
    arr = np.ascontiguousarray(rgb[..., :3], dtype=np.uint8)
    h, w = arr.shape[:2]
    return QImage(arr.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.1%}"


def _table(pairs: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><td style='color:#555; padding-right:12px'>{_esc(k)}</td><td>{_esc(v)}</td></tr>"
        for k, v in pairs
    )
    return f"<table cellspacing='0' cellpadding='2'>{cells}</table>"


def _notice() -> str:
    return (
        "<table width='100%' cellpadding='6' style='border: 1px solid #b3261e; background:#fdecea'>"
        f"<tr><td><b style='color:#b3261e'>{_esc(RESEARCH_NOTICE)}</b></td></tr></table>"
    )


def report_html(data: ReportData, with_images: bool = True) -> str:
    s = data.summary
    parts = [
        f"<h1>{_esc(APP_NAME)} report</h1>",
        _notice(),
        f"<p>Created {_esc(data.created)} · {_esc(APP_NAME)} {_esc(data.software_version)}"
        f"{' · engine ' + _esc(data.engine_version) if data.engine_version else ''}</p>",
        "<h2>Summary</h2>",
    ]
    summary = [
        ("Source", f"{data.source_kind}: {data.source_path}"),
        ("Arrival order", data.order if data.source_kind == "folder" else "reading order (tiles)"),
        ("Images processed", s.images),
        ("Changed by adaptation", f"{s.changed} ({_pct(s.changed / s.images if s.images else math.nan)})"),
        ("Predicted positive", f"{s.positive} ({_pct(s.positive / s.images if s.images else math.nan)})"),
        ("Mean confidence", "n/a" if not math.isfinite(s.mean_confidence) else f"{s.mean_confidence:.3f}"),
        ("Low-confidence predictions", s.low_confidence),
    ]
    if s.labelled:
        summary += [
            ("Ground truth", f"{s.labelled} images ({data.label_origin or 'provided'})"),
            ("Accuracy, adapted model", _pct(s.adapted_accuracy)),
            ("Accuracy, source model", _pct(s.source_accuracy)),
        ]
    else:
        summary.append(("Ground truth", "not available"))
    summary += [
        ("Collapse-guard events", s.guard_events),
        ("Skipped updates (non-finite loss)", s.skipped_updates),
        ("Errors during the run", len(data.errors)),
    ]
    parts.append(_table(summary))
    if data.slide:
        parts += ["<h2>Slide</h2>", _table([(k, v) for k, v in data.slide.items() if v is not None])]
    if with_images and data.plot_png:
        parts += ["<h2>Running statistics</h2>", f"<p><img src='img:plots' width='{PAGE_WIDTH_PX - 20}'></p>"]
    if with_images and data.slide_overview is not None:
        h, w = data.slide_overview.shape[:2]
        width = min(PAGE_WIDTH_PX - 20, w * 2)
        parts += [
            "<h2>Tile predictions</h2>",
            "<p>Probability of the positive class per tissue tile (blue 0, white 0.5, red 1).</p>",
            f"<p><img src='img:slide' width='{width}' height='{round(width * h / w)}'></p>",
        ]
    if with_images and data.examples:
        parts += [
            "<h2>Example images</h2>",
            "<p>Heat map: per-token uncertainty (dark = certain, bright = uncertain); red squares: masked "
            "uncertain tokens T_U; cyan squares: reliable tokens T_R.</p>",
            "<table cellpadding='4'>",
        ]
        per_row = 3
        for start in range(0, len(data.examples), per_row):
            parts.append("<tr>")
            for i, example in enumerate(data.examples[start : start + per_row], start):
                parts.append(
                    f"<td valign='top' width='{PAGE_WIDTH_PX // per_row}'><img src='img:example{i}' width='200' "
                    f"height='200'><br><small>{_esc(example.title)}</small></td>"
                )
            parts.append("</tr>")
        parts.append("</table>")
    parts += [
        "<h2>Model</h2>",
        _table(
            [("Checkpoint", data.model_path), ("Weights fingerprint", data.model_fingerprint)]
            + [(k, json.dumps(v) if isinstance(v, dict | list) else v) for k, v in data.card.items()]
        ),
        "<h2>Method</h2>",
        _table(
            [("Method", data.method), ("Device", data.device)]
            + [(k, v) for k, v in data.run_config.get("method_config", {}).items()]
            + [("Seed", data.run_config.get("seed", ""))]
        ),
        "<h2>Adaptation state</h2>",
        _table(
            [("State fingerprint", data.state_fingerprint)]
            + [(f"Profile {k}", v) for k, v in data.profile.items() if v is not None]
        ),
    ]
    parts += _guard_section(data)
    if data.notes:
        parts += ["<h2>Notes</h2><ul>"] + [f"<li>{_esc(n)}</li>" for n in data.notes] + ["</ul>"]
    if data.errors:
        shown = data.errors[:30]
        parts += ["<h2>Errors</h2><ul>"] + [f"<li>{_esc(e)}</li>" for e in shown] + ["</ul>"]
        if len(data.errors) > len(shown):
            parts.append(f"<p>… and {len(data.errors) - len(shown)} more (see the log).</p>")
    parts.append("<br>" + _notice())
    return (
        "<html><body style='font-family: sans-serif; font-size: 9pt'>" + "\n".join(parts) + "</body></html>"
    )


def _guard_section(data: ReportData) -> list[str]:
    """The collapse guard's actions: image index, item and what was reset."""
    events = guard_events(data.rows)
    parts = ["<h2>Guard events</h2>"]
    if not events:
        return [*parts, "<p>The collapse guard did not act on these images.</p>"]
    shown = events[:MAX_GUARD_EVENTS]
    head = "".join(f"<th align='left'>{h}</th>" for h in ("Image", "Item", "What the guard did"))
    body = "".join(
        f"<tr><td>{r.index}</td><td>{_esc(r.name)}</td><td>{_esc(r.guard_message)}</td></tr>" for r in shown
    )
    parts.append(f"<table cellspacing='0' cellpadding='2'><tr>{head}</tr>{body}</table>")
    if len(events) > len(shown):
        parts.append(f"<p>… and {len(events) - len(shown)} more (see run_config.json).</p>")
    return parts


def write_pdf(path: Path, data: ReportData) -> Path:
    """Write the report to ``path`` (atomically: a temp file renamed into place)."""
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    if data.plot_png:
        doc.addResource(
            QTextDocument.ResourceType.ImageResource, QUrl("img:plots"), QImage.fromData(data.plot_png)
        )
    if data.slide_overview is not None:
        doc.addResource(
            QTextDocument.ResourceType.ImageResource, QUrl("img:slide"), array_to_qimage(data.slide_overview)
        )
    for i, example in enumerate(data.examples):
        doc.addResource(
            QTextDocument.ResourceType.ImageResource, QUrl(f"img:example{i}"), array_to_qimage(example.rgb)
        )
    doc.setHtml(report_html(data))
    doc.setTextWidth(PAGE_WIDTH_PX)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = QPdfWriter(str(tmp))
    writer.setTitle(f"{APP_NAME} report")
    writer.setCreator(f"{APP_NAME} {data.software_version}")
    writer.setPageLayout(
        QPageLayout(
            QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Portrait, QMarginsF(15, 15, 15, 15)
        )
    )
    writer.setResolution(96)
    doc.print_(writer)
    del writer  # flushes and closes the file
    os.replace(tmp, path)
    return path
