"""The PDF report a tumour board can read; QTextDocument blocks laid out on QPdfWriter pages.

The report is a list of blocks (:mod:`app.pdf_blocks`), each an HTML fragment that is never split:
a heading travels with the first part of its section, tables are cut into parts of a few rows,
gallery rows are kept whole with their captions. Blocks are measured at the page width and
placed page by page, so no heading ends a page and no caption is cut. Every page carries the
research-use notice and its number in the footer.

Only QImage/QTextDocument/QPdfWriter/QPainter on a QPdfWriter are used (no widgets or pixmaps),
which Qt allows off the GUI thread, so the export worker can write the PDF.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import QMarginsF, QPointF, QRectF, QUrl
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
from app.pdf_blocks import report_blocks
from app.pdf_html import Block
from app.reports import PDF_NAME, ReportData, report_failure

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
    from app.pdf_blocks import colorbar_rgb

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


def add_pdf(written: list[Path], data: ReportData) -> list[Path] | str:
    """The tabular reports ``written`` (``predictions.csv`` first) and the PDF written beside them,
    or what to tell the user when it cannot be written.

    Called on the GUI thread: see :func:`app._worker_io.write_reports`.
    """
    try:
        return [*written, write_pdf(written[0].parent / PDF_NAME, data)]
    except Exception as exc:  # the scripted mode waits for an answer either way
        return report_failure(exc, written[0].parent)


def write_pdf(path: Path, data: ReportData) -> Path:
    """Write the report to ``path`` (atomically: a temp file renamed into place)."""
    tmp = path.with_name(f".{path.name}.tmp")
    writer = QPdfWriter(str(tmp))
    writer.setTitle(f"{APP_NAME} report")
    writer.setCreator(f"{APP_NAME} {data.software_version}")
    writer.setPageLayout(
        QPageLayout(
            QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Portrait, QMarginsF(15, 14, 15, 12)
        )
    )
    writer.setResolution(RESOLUTION)
    width, height = float(writer.width()), float(writer.height())
    body = height - FOOTER_PX
    blocks = report_blocks(data, width=int(width))
    images = _images(data)
    docs = [_document(b, width, images) for b in blocks]
    heights = [d.size().height() for d in docs]
    pages = paginate(heights, body, [b.new_page for b in blocks])
    painter = QPainter(writer)
    try:
        for number, page in enumerate(pages, 1):
            if number > 1:
                writer.newPage()
            y = 0.0
            for i in page:
                painter.save()
                painter.translate(0, y)
                # A block taller than a page (it should not happen) is clipped at the page end.
                docs[i].drawContents(painter, QRectF(0, 0, width, max(body - y, 1.0)))
                painter.restore()
                y += heights[i] + BLOCK_GAP_PX
            _footer(painter, width, height, f"{number} / {len(pages)}")
    finally:
        painter.end()
    del writer  # flushes and closes the file
    os.replace(tmp, path)
    return path


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
