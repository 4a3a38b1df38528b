"""The PDF report a tumour board can read; QTextDocument blocks laid out on QPdfWriter pages.

The report is a list of blocks (:mod:`app.reports.pdf_blocks`), each an HTML fragment that is never split:
a heading travels with the first part of its section, tables are cut into parts of a few rows,
gallery rows are kept whole with their captions. Blocks are measured at the page width and
placed page by page, so no heading ends a page and no caption is cut. Every page carries the
research-use notice and its number in the footer.

Only QImage/QTextDocument/QPdfWriter/QPainter on a QPdfWriter are used (no widgets or pixmaps).
The PDF is rendered into memory (QPdfWriter does not report a failed write: a full disk gave a
truncated file announced as written), checked to be complete, and written by the export's own
staging, which reports a full disk (:mod:`app.reports.export`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QIODevice, QMarginsF, QPointF, QRectF, QUrl
from PySide6.QtGui import (
    QColor,
    QFont,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QTextDocument,
    QTextOption,
)

from app import APP_NAME, RESEARCH_NOTICE
from app._engine import atomic_write_bytes
from app.reports.export import check_pdf, commit, recover, stage
from app.reports.files import PDF_NAME, REPORT_KINDS, ReportData, StagedReports, report_failure
from app.reports.pdf_blocks import report_blocks
from app.reports.pdf_html import Block

RESOLUTION = 96  # layout units per inch: CSS pixels
FOOTER_PX = 28  # room kept at the bottom of each page for the footer
BLOCK_GAP_PX = 6


def array_to_qimage(rgb: np.ndarray) -> QImage:
    """An (H, W, 3) uint8 array as a QImage that owns a copy of the pixels."""
    arr = np.ascontiguousarray(rgb[..., :3], dtype=np.uint8)
    h, w = arr.shape[:2]
    return QImage(arr.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


def report_html(data: ReportData, with_images: bool = True) -> str:
    """The whole report as one HTML page (for checks and previews; the PDF is paginated by blocks)."""
    blocks = report_blocks(data, width=680, with_images=with_images)
    return "<html><body>" + "\n".join(b.html for b in blocks) + "</body></html>"


def _images(data: ReportData) -> dict[str, QImage]:
    from app.reports.pdf_blocks import colorbar_rgb

    images: dict[str, QImage] = {"colorbar": array_to_qimage(colorbar_rgb())}
    if data.plot_png:
        images["plots"] = QImage.fromData(data.plot_png)
    if data.slide_overview is not None:
        images["slide"] = array_to_qimage(data.slide_overview)
    for i, example in enumerate(data.examples):
        images[f"example{i}"] = array_to_qimage(example.rgb)
    return images


def _document(block: Block, width: float, images: dict[str, QImage]) -> QTextDocument:
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    font = QFont("DejaVu Sans")
    font.setPointSizeF(8.5)
    doc.setDefaultFont(font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # long names never widen a table
    doc.setDefaultTextOption(option)
    for name in block.images:
        if name in images:
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"img:{name}"), images[name])
    doc.setHtml(block.html)
    doc.setTextWidth(width)
    return doc


@dataclass(frozen=True)
class Piece:
    """What one block puts on one page: all of it, or one page of a block taller than a page."""

    block: int  # index into the blocks
    top: float  # where the piece starts in the block's layout
    height: float
    new_page: bool


def _pieces(docs: list[QTextDocument], blocks: list[Block], body: float) -> list[Piece]:
    """Blocks as pieces of at most a page each.

    A block taller than a page (a table of long paths, a card with 2 000 classes) is cut into
    page-high pieces at the bottom of a line of text that no other line crosses, each drawn on a
    page of its own: it continues on the next pages and is never clipped.
    """
    pieces = []
    for i, (doc, block) in enumerate(zip(docs, blocks, strict=True)):
        height = doc.size().height()
        if height <= body:
            pieces.append(Piece(i, 0.0, height, block.new_page))
            continue
        top = 0.0
        for cut in _cuts(_line_spans(doc), height, body):
            pieces.append(Piece(i, top, cut - top, True))
            top = cut
    return pieces


def _clip(piece: Piece, doc: QTextDocument, width: float) -> QRectF:
    """The part of ``doc`` a piece draws. A cut edge is moved in by half a pixel: Qt draws every line
    that touches the clip, and a line ending (or starting) at the cut belongs to one piece only."""
    top = piece.top + (0.5 if piece.top > 0 else 0.0)
    bottom = piece.top + piece.height - (0.5 if piece.top + piece.height < doc.size().height() else 0.0)
    return QRectF(0, top, width, bottom - top)


def _line_spans(doc: QTextDocument) -> list[tuple[float, float]]:
    """``(top, bottom)`` of every laid-out line of ``doc`` (table cells included), in its coordinates."""
    layout = doc.documentLayout()
    spans = []
    block = doc.begin()
    while block.isValid():
        origin = layout.blockBoundingRect(block).top()
        lines = block.layout()
        for n in range(lines.lineCount()):
            line = lines.lineAt(n)
            spans.append((origin + line.y(), origin + line.y() + line.height()))
        block = block.next()
    return spans


def _cuts(spans: list[tuple[float, float]], height: float, body: float) -> list[float]:
    """Where a block of ``height`` is cut into pieces of at most ``body``: the lowest line bottom
    within each page that no line crosses (the page end itself when there is none)."""
    bottoms = sorted({b for _, b in spans})
    cuts: list[float] = []
    top = 0.0
    while height - top > body:
        limit = top + body
        cut = next(
            (
                b
                for b in reversed(bottoms)
                if top < b <= limit and not any(t < b < e for t, e in spans if t < limit and e > top)
            ),
            limit,
        )
        cuts.append(cut)
        top = cut
    cuts.append(height)
    return cuts


def paginate(heights: list[float], page_height: float, breaks: list[bool]) -> list[list[int]]:
    """Block indices per page: a block goes to the next page when it does not fit the rest of this one.

    Args:
        heights: each block's height.
        page_height: the usable height of a page.
        breaks: blocks that must start a page.
    """
    pages: list[list[int]] = [[]]
    used = 0.0
    for i, h in enumerate(heights):
        gap = BLOCK_GAP_PX if pages[-1] else 0.0
        if pages[-1] and (breaks[i] or used + gap + h > page_height):
            pages.append([])
            used, gap = 0.0, 0.0
        pages[-1].append(i)
        used += gap + h
    return pages


def commit_pdf(staged: StagedReports, content: bytes) -> list[Path] | str:
    """``content`` checked, staged as the PDF beside the tables ``staged`` and the whole set
    committed: the paths written (``predictions.csv`` first), or what to tell the user when it
    cannot be done (then nothing of the earlier reports in that folder has changed)."""
    try:
        check_pdf(content)
        stage(staged.directory, PDF_NAME, content)
        return commit(staged.directory, [*staged.names, PDF_NAME], staged.remove)  # app.reports.ownership
    except Exception as exc:
        return fail_export(staged, exc)


def fail_export(staged: StagedReports, exc: BaseException | None) -> str:
    """Take back what the export staged (a commit already begun is completed) and say why it
    failed (``exc`` None: it was cancelled)."""
    with contextlib.suppress(OSError):
        recover(staged.directory, REPORT_KINDS)
    if exc is None:
        return ""
    return report_failure(exc if isinstance(exc, Exception) else RuntimeError(str(exc)), staged.directory)


def write_pdf(path: Path, data: ReportData) -> Path:
    """Write the report to ``path`` on its own (checked complete, then replaced atomically)."""
    content = pdf_bytes(data)
    check_pdf(content)
    atomic_write_bytes(path, content)
    return path


def pdf_bytes(data: ReportData) -> bytes:
    """The report as a PDF document, rendered in memory (all steps at once)."""
    render = PdfRender(data)
    for _ in render.steps():
        pass
    return render.result


class PdfRender:
    """The report rendered as a PDF in memory, one block or one page per step.

    :meth:`steps` yields ``(what, done, total)`` after each block is laid out and after each page
    is drawn, so the GUI thread can turn its event loop between them. Qt's text layout must stay
    on that thread: it takes Qt's connection mutexes while PySide holds the interpreter, and on the
    worker's thread that deadlocked against the GUI thread destroying Qt objects (it holds the
    mutex and waits for the interpreter). Once the
    steps are exhausted, :attr:`result` holds the PDF; :meth:`close` lets go of a render stopped
    half-way (a cancelled export).
    """

    def __init__(self, data: ReportData) -> None:
        self.data = data
        self.result = b""
        self._buffer = QBuffer()
        self._painter: QPainter | None = None  # ending it finishes the document in the buffer

    def steps(self) -> Iterator[tuple[str, int, int]]:
        data = self.data
        self._buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        writer = QPdfWriter(self._buffer)
        writer.setTitle(f"{APP_NAME} report")
        writer.setCreator(f"{APP_NAME} {data.software_version}")
        writer.setPageLayout(
            QPageLayout(
                QPageSize(QPageSize.PageSizeId.A4),
                QPageLayout.Orientation.Portrait,
                QMarginsF(15, 14, 15, 12),
            )
        )
        writer.setResolution(RESOLUTION)
        width, height = float(writer.width()), float(writer.height())
        body = height - FOOTER_PX
        blocks = report_blocks(data, width=int(width))
        images = _images(data)
        docs = []
        for i, block in enumerate(blocks):
            docs.append(_document(block, width, images))
            docs[-1].size()  # laid out now, in this step
            yield "Laying out the PDF", i + 1, len(blocks)
        pieces = _pieces(docs, blocks, body)
        pages = paginate([p.height for p in pieces], body, [p.new_page for p in pieces])
        painter = self._painter = QPainter(writer)
        for number, page in enumerate(pages, 1):
            if number > 1:
                writer.newPage()
            y = 0.0
            for i in page:
                piece = pieces[i]
                painter.save()
                painter.translate(0, y - piece.top)
                docs[piece.block].drawContents(painter, _clip(piece, docs[piece.block], width))
                painter.restore()
                y += piece.height + BLOCK_GAP_PX
            _footer(painter, width, height, f"{number} / {len(pages)}")
            yield "Writing the PDF", number, len(pages)
        self.close()
        self.result = bytes(self._buffer.data().data())

    def close(self) -> None:
        """End the painter (the document is finished in the buffer) and close the buffer."""
        if self._painter is not None:
            self._painter.end()
            self._painter = None
        if self._buffer.isOpen():
            self._buffer.close()


def _footer(painter: QPainter, width: float, height: float, page: str) -> None:
    font = QFont("DejaVu Sans")
    font.setPointSizeF(7.5)
    painter.setFont(font)
    painter.setPen(QColor(179, 38, 30))
    painter.drawText(QPointF(0, height - 8), RESEARCH_NOTICE)
    painter.setPen(QColor(90, 90, 90))
    metrics_width = painter.fontMetrics().horizontalAdvance(page)
    painter.drawText(QPointF(width - metrics_width, height - 8), page)
    painter.drawLine(QPointF(0, height - FOOTER_PX + 6), QPointF(width, height - FOOTER_PX + 6))
