"""The report's figures (per-class results and confusion matrices), each set titled with the truth
it is measured against, and marked where the applicability gate fired (:mod:`app.core.figures`).

The figures against the dataset's labels come first where the dataset labels any image; those
against the reviewers' marks (the reviewed images only) follow them when both exist.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.core.clinical import MATRIX_UP_TO, ClassMetrics, ClinicalMetrics, top_confusions
from app.core.figures import DATASET, GATE_CAPTION, REVIEWED, dataset_title, reviewed_title
from app.reports.files import ReportData
from app.reports.pdf_html import MUTED, TABLE_PART_ROWS, Block, chunked, esc, grid_table, h2, pct

__all__ = ["figure_blocks", "gate_note"]


def gate_note(gate: Sequence[str], caption: str = GATE_CAPTION) -> str:
    """The "model may not apply" box (or ``caption``'s words) with the warnings that fired (empty:
    none fired)."""
    if not gate:
        return ""
    items = "".join(f"<li>{esc(text)}</li>" for text in gate)
    return (
        "<table width='100%' cellpadding='5' style='border: 1px solid #b3261e; background:#fdecea'>"
        f"<tr><td><b style='color:#b3261e'>⚠ {esc(caption or GATE_CAPTION)}.</b><ul>{items}</ul></td></tr></table>"
    )


def figure_blocks(data: ReportData) -> list[Block]:
    """The per-class results and the confusion matrices of each figure set the report carries."""
    sets: list[tuple[str, ClinicalMetrics]] = []
    if data.metrics is not None and data.metrics.labelled:
        lead = dataset_title if data.metrics_truth == DATASET else reviewed_title
        sets.append((lead(data.metrics.labelled), data.metrics))
    if data.reviewed_metrics is not None and data.reviewed_metrics.labelled:
        sets.append((reviewed_title(data.reviewed_metrics.labelled), data.reviewed_metrics))
    blocks = []
    for title, metrics in sets:
        blocks += metrics_blocks(metrics, title, data.gate, data.gate_caption)
        blocks.append(confusion_block(metrics, title))
    return blocks


def _metric_cells(m: ClassMetrics) -> list[str]:
    return [pct(m.sensitivity), pct(m.specificity), pct(m.precision)]


def metrics_blocks(
    m: ClinicalMetrics, title: str, gate: Sequence[str] = (), caption: str = ""
) -> list[Block]:
    head = [
        "Class",
        "Images",
        "Sensitivity",
        "Specificity",
        "Precision",
        "Sensitivity, original model",
        "Specificity, original model",
    ]
    body = [
        [esc(a.name), str(a.support), *_metric_cells(a), pct(b.sensitivity), pct(b.specificity)]
        for a, b in zip(m.per_class, m.source_per_class, strict=True)
    ]
    truth = REVIEWED if title.startswith(f"Against {REVIEWED}") else DATASET
    intro = (
        f"<p style='color:{MUTED}'>Each class against the others, over the {m.labelled} images, "
        f"measured against {esc(truth)} (a review mark never replaces a dataset label). Sensitivity: "
        "share of the class found; specificity: share of the other images not called this class.</p>"
    )
    heading = f"Per-class results: {_lower(title)}"
    if len(body) > TABLE_PART_ROWS:  # a long table in parts of a few rows, the heading with the first
        return chunked(heading, head, body, gate_note(gate, caption) + intro)
    table = grid_table(head, body, align="right")
    return [Block(h2(heading) + gate_note(gate, caption) + intro + table)]


def _lower(title: str) -> str:
    """``Against …`` as the second half of a heading."""
    return title[:1].lower() + title[1:]


def confusion_html(matrix: np.ndarray, classes: Sequence[str], title: str) -> str:
    """A confusion matrix, each cell shaded by its share of the row (blue right, red wrong)."""
    head = "".join(f"<th style='background:#eeeeee'>{esc(c)}</th>" for c in classes)
    rows = []
    for t, name in enumerate(classes):
        total = int(matrix[t].sum())
        cells = [f"<td style='background:#eeeeee'><b>{esc(name)}</b></td>"]
        for p in range(len(classes)):
            count = int(matrix[t, p])
            share = count / total if total else 0.0
            base = np.array([49, 104, 200] if t == p else [214, 39, 40])
            tint = (255 - share * (255 - base)).round().astype(int)
            colour = "#" + "".join(f"{int(v):02x}" for v in tint)
            ink = "#ffffff" if share > 0.6 else "#000000"
            cells.append(
                f"<td align='center' bgcolor='{colour}' width='70'><span style='color:{ink}'><b>{count}</b>"
                f"<br>{pct(share) if total else ''}</span></td>"
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<p><b>{esc(title)}</b> (rows: truth, columns: prediction)</p>"
        "<table cellspacing='0' cellpadding='4' border='1' style='border-collapse:collapse; border-color:#bbbbbb'>"
        f"<tr><th style='background:#eeeeee'>truth \\ predicted</th>{head}</tr>{''.join(rows)}</table>"
    )


def confusion_block(m: ClinicalMetrics, title: str) -> Block:
    if len(m.classes) > MATRIX_UP_TO:  # a matrix this large is neither readable nor cheap to lay out
        return _confusions_block(m, title)
    side = (
        "<table cellspacing='0' cellpadding='0'><tr>"
        f"<td valign='top'>{confusion_html(m.confusion, m.classes, 'As decided')}</td><td width='24'></td>"
        f"<td valign='top'>{confusion_html(m.source_confusion, m.classes, 'Original model')}</td></tr></table>"
    )
    note = f"<p style='color:{MUTED}'>Percentages are shares of each row (of the images of that class).</p>"
    return Block(h2(f"Confusion matrix: {_lower(title)}") + side + note)


def _confusions_block(m: ClinicalMetrics, title: str) -> Block:
    """The most frequent confusions of each model, for more classes than a matrix can show."""
    parts = []
    for name, matrix in (("As decided", m.confusion), ("Original model", m.source_confusion)):
        pairs = top_confusions(matrix, m.classes)
        body = [[esc(t), esc(p), str(n)] for t, p, n in pairs] or [["–", "–", "0"]]
        parts.append(f"<p><b>{name}</b></p>" + grid_table(["Truth", "Predicted", "Images"], body))
    note = (
        f"<p style='color:{MUTED}'>{len(m.classes)} classes: the {len(pairs)} most frequent confusions "
        "are listed; run_config.json holds every count.</p>"
    )
    return Block(h2(f"Most frequent confusions: {_lower(title)}") + "".join(parts) + note)
