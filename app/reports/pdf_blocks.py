"""The report's content as blocks of HTML that are never split across pages (see :mod:`app.reports.pdf`).

Page one is the summary a tumour board reads first: counts, per-class sensitivity and
specificity, the confusion matrix and, for a slide, the heat map with its colour bar. Then the
gallery of wrong and flagged cases with their truth, the running statistics, the model card as a
table, the method and state, events and errors, and the hyper-parameters in an appendix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from app import APP_NAME
from app.core.clinical import CONFIDENT
from app.core.figures import DATASET, REVIEWED
from app.core.overlay import PROB_COLORS, PROB_STOPS
from app.reports.files import ReportData, padded_counts
from app.reports.pdf_figures import figure_blocks, gate_note
from app.reports.pdf_html import (
    MUTED,
    Block,
    breakable,
    chunked,
    esc,
    h2,
    notice,
    pairs_table,
    pct,
)
from app.reports.pdf_reviews import review_blocks
from app.reports.pdf_sections import (
    card_pairs,
    certificate_blocks,
    change_blocks,
    class_blocks,
    guard_blocks,
    hyperparameter_rows,
    method_pairs,
)

__all__ = ["Block", "colorbar_rgb", "report_blocks"]

PER_ROW = 2  # gallery cases per row (each the image and the image with its overlay)


def colorbar_rgb(width: int = 300, height: int = 12) -> np.ndarray:
    """The slide heat map's colour scale, probability 0 (left) to 1 (right), as an RGB image."""
    t = np.linspace(0.0, 1.0, width)
    colours = np.stack([np.interp(t, PROB_STOPS, PROB_COLORS[:, c]) for c in range(3)], axis=-1)
    return np.repeat(colours[None].round().astype(np.uint8), height, axis=0)


# -- page one ----------------------------------------------------------------------------------
def title_block(data: ReportData) -> Block:
    name = data.source_path.rstrip("/").split("/")[-1] or data.source_path
    versions = f"{APP_NAME} {data.software_version}" + (
        f", engine {data.engine_version}" if data.engine_version else ""
    )
    return Block(
        f"<h1 style='font-size:16pt; margin-bottom:2px'>{esc(APP_NAME)} report: {breakable(name)}</h1>"
        + notice()
        + f"<p style='color:{MUTED}'>Created {esc(data.created)} · {esc(versions)}</p>"
        + (
            f"<p style='background:#eef3fb; padding:4px'><b>{esc(data.sentence)}</b></p>"
            if data.sentence
            else ""
        )
    )


#: Classes the summary counts one by one (more: the most frequent, then the rest together).
SHOWN_CLASSES = 8


def _predicted(data: ReportData, share: Callable[[int], str]) -> tuple[str, str]:
    """How many images were decided as the positive class (two classes: "Predicted tumor"), or as
    each class (more: a model with no positive class, where one class's count says little)."""
    classes = data.classes
    if len(classes) > 2:
        counts = padded_counts(data.summary.by_class, len(classes))
        if len(classes) <= SHOWN_CLASSES:
            return "Predicted, by class", " · ".join(f"{c} {n}" for c, n in zip(classes, counts, strict=True))
        # a model of many classes: its most frequent calls (the line stays one line)
        top = sorted((n, i) for i, n in enumerate(counts) if n)[::-1]
        shown = " · ".join(f"{classes[i]} {n}" for n, i in top[:SHOWN_CLASSES])
        rest = sum(n for n, _ in top[SHOWN_CLASSES:])
        more = f" · {len(top) - SHOWN_CLASSES} other classes {rest}" if len(top) > SHOWN_CLASSES else ""
        return "Predicted, most frequent classes", shown + more
    name = classes[int(data.card.get("positive_class", 1))] if len(classes) == 2 else "positive"
    return f"Predicted {name}", share(data.summary.positive)


def summary_block(data: ReportData) -> Block:
    s = data.summary

    def share(count: int) -> str:
        return f"{count} ({pct(count / s.images if s.images else math.nan)})"

    pairs: list[tuple[str, Any]] = [
        ("Source", f"{data.source_kind}: {data.source_path}"),
        ("Arrival order", data.order),
        ("Model", data.model_summary or data.model_description or data.card.get("arch", "")),
        ("Method", data.method_label or data.method),
        ("Images processed", s.images),
        ("Changed from the original model's call", share(s.changed)),
        _predicted(data, share),
        ("Mean confidence", "n/a" if not math.isfinite(s.mean_confidence) else f"{s.mean_confidence:.3f}"),
        ("Low-confidence predictions", s.low_confidence),
    ]
    m = data.metrics
    if m is not None and m.labelled:
        origin = data.label_origin if data.metrics_truth == DATASET else None
        pairs += [
            (
                "Figures measured against",
                f"{data.metrics_truth} ({m.labelled} images{f', {origin}' if origin else ''})",
            ),
            ("Accuracy, as decided", pct(m.accuracy) + _reverted_note(data)),
            ("Accuracy, original model", pct(float(np.trace(m.source_confusion)) / m.labelled)),
            (f"Confident errors (confidence ≥ {CONFIDENT:.1f})", m.confident_errors),
        ]
        r = data.reviewed_metrics
        if r is not None and r.labelled:
            pairs.append(
                (f"Accuracy against {REVIEWED}", f"{pct(r.accuracy)} ({r.labelled} reviewed images)")
            )
    else:
        pairs.append(("Ground truth", "not available"))
    pairs.append(("Reviewed", data.review.sentence()))
    document = data.certificates
    if document is not None and document.certificates:
        decided = [c for c in document.certificates if c.verdict.decided]
        pairs.append(
            (
                "Review certificates",
                f"{len(decided)} of {len(document.certificates)} comparisons decided; {document.decides}",
            )
        )
    pairs += [
        ("Collapse-guard events", s.guard_events),
        ("Skipped updates (non-finite loss)", s.skipped_updates),
        ("Errors during the run", len(data.errors)),
    ]
    return Block(h2("Summary") + gate_note(data.gate, data.gate_caption) + pairs_table(pairs))


def _reverted_note(data: ReportData) -> str:
    """Where the reviews put another rule in use, the figures are those of the decisions reported."""
    document = data.certificates
    if document is None or not any(p.rule.by_review for p in document.parts):
        return ""
    if len(document.parts) > 1:  # a folder split in parts: the summary names each part's rule
        return " (each part decided by the rule its reviews certified)"
    return f" (decided by {document.parts[0].rule.words}, as your answers certified)"


def slide_map_block(data: ReportData, width: int) -> Block | None:
    if data.slide_overview is None:
        return None
    h, w = data.slide_overview.shape[:2]
    shown = min(width - 10, 2 * w, int(520 * w / h))
    positive = data.classes[int(data.card.get("positive_class", 1))] if data.classes else "positive"
    bar = (
        "<table cellspacing='0' cellpadding='1'><tr><td colspan='3'>"
        "<img src='img:colorbar' width='300' height='12'></td></tr>"
        "<tr><td width='100' align='left'>0</td><td width='100' align='center'>0.5</td>"
        "<td width='100' align='right'>1</td></tr></table>"
    )
    text = (
        f"<p>Probability of '{esc(positive)}' per tissue tile, burnt in at 45 % over the slide "
        f"(blue 0, white 0.5, red 1):</p>"
    )
    image = f"<p><img src='img:slide' width='{shown}' height='{round(shown * h / w)}'></p>"
    return Block(h2("Tile predictions") + text + image + bar, images=("slide", "colorbar"))


# -- the gallery -------------------------------------------------------------------------------
def gallery_blocks(data: ReportData, width: int) -> list[Block]:
    if not data.examples:
        return []
    cell = (width - 12) // PER_ROW
    side = min(160, (cell - 16) // 2)
    blocks: list[Block] = []
    indexed = list(enumerate(data.examples))
    for group, heading, text in (
        (
            "wrong",
            "Wrong against the ground truth",
            "Most confident first: these are the errors a reader would not question.",
        ),
        (
            "flagged",
            "Flagged for a second look",
            "Low confidence, changed by adaptation, or high uncertainty.",
        ),
    ):
        members = [(i, e) for i, e in indexed if e.group == group]
        for start in range(0, len(members), PER_ROW):
            row = members[start : start + PER_ROW]
            cells = []
            for i, example in row:
                lines = "<br>".join(breakable(line) for line in (example.title, *example.caption))
                missing = "" if example.has_overlay else "<br><i>no overlay kept for this image</i>"
                h, w = example.rgb.shape[:2]
                shown_w = 2 * side + 4 if w > h else side
                cells.append(
                    f"<td valign='top' width='{cell}'><img src='img:example{i}' width='{shown_w}' height='{side}'>"
                    f"<br><span style='font-size:7.5pt'>{lines}{missing}</span></td>"
                )
            lead = ""
            if start == 0:
                lead = (h2("Cases to look at") + _legend() if not blocks else "") + (
                    f"<h3 style='margin:2px 0'>{esc(heading)}</h3><p style='color:{MUTED}'>{esc(text)}</p>"
                )
            blocks.append(
                Block(
                    lead + f"<table cellspacing='0' cellpadding='4'><tr>{''.join(cells)}</tr></table>",
                    images=tuple(f"example{i}" for i, _ in row),
                )
            )
    return blocks


def _legend() -> str:
    return (
        f"<p style='color:{MUTED}'>Each case: the image, and beside it the overlay: per-patch uncertainty "
        "(dark: certain, bright: uncertain) and the uncertain patches the method masked (red outlines).</p>"
    )


def report_blocks(data: ReportData, width: int, with_images: bool = True) -> list[Block]:
    """Every block of the report in reading order."""

    blocks = [title_block(data), summary_block(data)]
    blocks += figure_blocks(data)
    blocks += certificate_blocks(data)
    blocks += review_blocks(data)
    slide_map = slide_map_block(data, width) if with_images else None
    if slide_map is not None:
        blocks.append(slide_map)
    # The warnings the summary states already are not repeated (a slide's second page held only
    # them, 90 % blank, before the gallery's page).
    notes = [n for n in data.label_notes if n not in data.gate]
    if notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in notes)
        blocks.append(Block(h2("Does the model apply?") + f"<ul>{items}</ul>"))
    if with_images:
        gallery = gallery_blocks(data, width)
        if gallery:
            gallery[0] = Block(gallery[0].html, gallery[0].images, new_page=True)
        blocks += gallery
        if data.plot_png:
            blocks.append(
                Block(
                    h2("Running statistics") + f"<p><img src='img:plots' width='{width - 10}'></p>",
                    ("plots",),
                )
            )
    if data.slide:
        blocks.append(
            Block(h2("Slide") + pairs_table([(k, v) for k, v in data.slide.items() if v is not None]))
        )
    blocks.append(Block(h2("Model") + pairs_table(card_pairs(data), key_width=250), new_page=True))
    blocks += class_blocks(data)
    blocks.append(Block(h2("Method and adaptation state") + pairs_table(method_pairs(data), key_width=250)))
    blocks += guard_blocks(data)
    blocks += change_blocks(data)
    for title, lines in (("Notes", data.notes), ("Errors", data.errors[:30])):
        if lines:
            blocks += chunked(
                title, ["#", "Message"], [[str(i + 1), breakable(t)] for i, t in enumerate(lines)]
            )
    if len(data.errors) > 30:
        blocks.append(Block(f"<p>… and {len(data.errors) - 30} more errors (see the log).</p>"))
    rows = hyperparameter_rows(data)
    if rows:
        appendix = chunked("Appendix: hyper-parameters", ["Setting", "Value", "Default", "Meaning"], rows)
        appendix[0] = Block(appendix[0].html, new_page=True)
        blocks += appendix
    blocks.append(Block(notice()))
    return blocks
