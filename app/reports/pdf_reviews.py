"""The report's record of the reviewer's work (see :mod:`app.reports.pdf_blocks`): every mark with
the decision on screen when it was made, what the reviewer did to it, who and when, in the words
of the table and ``reviews.csv`` (:mod:`app.core.review_record`)."""

from __future__ import annotations

from app.core.review_record import mark_records
from app.reports.files import ReportData
from app.reports.pdf_html import Block, breakable, chunked, esc

MAX_MARKS = 200  # marks listed (reviews.csv and run_config.json have them all)


def review_blocks(data: ReportData) -> list[Block]:
    """The marks in the order they were made; none when nothing was reviewed."""
    records = mark_records(data.marks, data.rows, data.classes)
    if not records:
        return []
    body = [
        [
            str(r.position + 1),
            breakable(r.item),
            esc(r.shown),
            esc(r.review),
            f"<b>{esc(r.verdict)}</b>",
            esc(r.now),
            esc(r.reviewer or "not recorded"),
            esc(r.at),
        ]
        for r in records[:MAX_MARKS]
    ]
    intro = (
        "<p>Each mark as it was made: the decision on screen, the class the reviewer gave and "
        "whether that <i>confirmed</i> or <i>corrected</i> the decision on screen; a rule the "
        "reviews put in use may decide the image otherwise now (Decided now). The dataset's "
        "label is never replaced by a mark.</p>"
    )
    head = ["#", "Item", "On screen", "Reviewer's class", "Verdict", "Decided now", "Reviewer", "When"]
    blocks = chunked("Review marks", head, body, intro)
    if len(records) > MAX_MARKS:
        blocks.append(Block(f"<p>… and {len(records) - MAX_MARKS} more (see reviews.csv).</p>"))
    return blocks
