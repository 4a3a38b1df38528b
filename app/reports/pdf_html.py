"""HTML pieces the report's blocks are made of (Qt-free): a block, escaping, tables cut in parts."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app import RESEARCH_NOTICE
from app._engine import shown

TABLE_PART_ROWS = 22  # rows of a long table per block
MUTED = "#555555"


@dataclass(frozen=True)
class Block:
    """An HTML fragment laid out as one piece."""

    html: str
    images: tuple[str, ...] = ()  # image resources it shows (img:<name>)
    new_page: bool = False  # start a new page with this block


def esc(value: Any) -> str:
    """``value`` as HTML text: markup escaped, control and bidirectional formatting characters made
    visible escapes (a right-to-left override laid the rest of a name out reversed) and bytes that
    are not UTF-8 shown as U+FFFD (:func:`app._engine.shown`)."""
    return html.escape(shown(value))


def breakable(text: Any) -> str:
    """Escaped text for a cell that may hold long file names or hashes.

    The documents wrap anywhere a word does not fit (:mod:`app.reports.pdf` sets the text option),
    so no character has to be inserted: the PDF's text stays searchable and copyable as it is.
    """
    return esc(text)


def pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.1%}"


def h2(text: str) -> str:
    return f"<h2 style='margin-top:4px; margin-bottom:4px; font-size:12pt'>{esc(text)}</h2>"


def pairs_table(pairs: Iterable[tuple[str, Any]], key_width: int = 210) -> str:
    """A two-column table of names and values (booleans read "yes"/"no", not Python's True/False)."""
    cells = "".join(
        f"<tr><td width='{key_width}' style='color:{MUTED}'>{esc(k)}</td>"
        f"<td>{breakable('yes' if v is True else 'no' if v is False else v)}</td></tr>"
        for k, v in pairs
    )
    return f"<table cellspacing='0' cellpadding='2' width='100%'>{cells}</table>"


def grid_table(head: Sequence[str], body: Sequence[Sequence[str]], align: str = "left") -> str:
    """A bordered table; ``body`` cells are HTML already."""
    th = "".join(f"<th align='{align}' style='background:#eeeeee'>{esc(h)}</th>" for h in head)
    rows = "".join("<tr>" + "".join(f"<td align='{align}'>{c}</td>" for c in r) + "</tr>" for r in body)
    return (
        "<table cellspacing='0' cellpadding='3' border='1' style='border-collapse:collapse; "
        f"border-color:#bbbbbb'><tr>{th}</tr>{rows}</table>"
    )


def chunked(title: str, head: Sequence[str], body: Sequence[Sequence[str]], intro: str = "") -> list[Block]:
    """A long table as blocks of :data:`TABLE_PART_ROWS` rows, the title with the first part."""
    blocks = []
    for start in range(0, max(len(body), 1), TABLE_PART_ROWS):
        part = body[start : start + TABLE_PART_ROWS]
        lead = h2(title) + intro if start == 0 else f"<p style='color:{MUTED}'>{esc(title)} (continued)</p>"
        blocks.append(Block(lead + grid_table(head, part)))
    return blocks


def notice() -> str:
    return (
        "<table width='100%' cellpadding='5' style='border: 1px solid #b3261e; background:#fdecea'>"
        f"<tr><td><b style='color:#b3261e'>{esc(RESEARCH_NOTICE)}</b></td></tr></table>"
    )
