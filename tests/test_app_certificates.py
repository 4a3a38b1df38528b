"""The review queue in the real window (pytest-qt, offscreen): Q starts a comparison and opens its
queue in random order, C and X review its first image and the next one is selected; the reviews
promote the candidate the site's images favour (banner, Decided by column, the table's decisions,
the certificates tab); Ctrl+Z and Ctrl+Shift+Z undo and redo; the PDF states the certificates. The
engine worker is the plain fake: the rows of a generated site (the source model over-calls tumour)
are played as its results."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_studio import read_pdf_text, settle, started_window
from controller_fakes import ended, results_of

from app.control.controller import Controller
from app.core.settings import AppSettings
from app.reports.pdf import write_pdf
from app.views.certificates_view import VERDICT_COLUMN
from app.views.main_window import MainWindow
from app.views.table_model import GROUP_COLUMN
from tests.review_rows import CLASSES, site_rows

N = 120


def _window_on_rows(qtbot: object, home: Path) -> tuple[MainWindow, Controller, list[int]]:
    window, c = started_window(qtbot, home, N, AppSettings(reviewer="Dr Ada"))
    rows, labels = site_rows(N, seed=3)
    rows = [dataclasses.replace(r, key=f"k{i}", name=f"img{i}.png") for i, r in enumerate(rows)]
    c.on_worker_results_ready(results_of(rows))
    c.on_worker_run_ended(ended("finished", N, home))
    return window, c, [int(v) for v in labels]


def test_keyboard_reviews_from_the_queue_promote_the_candidate_the_site_favours(
    qtbot: object, tmp_path: Path
) -> None:
    window, c, labels = _window_on_rows(qtbot, tmp_path)
    table = window.table
    assert window.status_parts.reviewer_label.full_text() == "Reviewer: Dr Ada"
    assert not window.commands.undo.isEnabled()

    window.commands.queue.trigger()  # Q: a comparison starts, its queue opens with the first image selected
    ranks = c.model.desk.queue_state().ranks
    assert table.current_filter().mode == "queue" and table.proxy.rowCount() == len(ranks) > 0
    shown = [table.proxy.mapToSource(table.proxy.index(r, 0)).row() for r in range(table.proxy.rowCount())]
    assert shown == sorted(ranks, key=ranks.__getitem__) and shown != sorted(shown), "random order"
    reviewed = []
    while "source-review" not in window.banners.items:
        row = table.selected_row()
        assert row is not None and len(reviewed) < len(ranks)
        reviewed.append(row.position)
        # The reviewer knows the truth: C where the decision shown is right, X (the other class) where not.
        (
            window.commands.confirm if labels[row.position] == row.prediction else window.commands.correct
        ).trigger()
    banner = window.banners.items["source-review"].banner
    assert banner.text.startswith("The best-fit threshold decides this folder: ")
    model = table.model
    changed = next(i for i in range(N) if model.row_at(i).prediction != c.model.raw_rows[i].prediction)
    assert model.row_at(changed).decision_path == "reviewed"
    assert model.index(changed, GROUP_COLUMN).data() == "best-fit threshold"
    assert model.row_at(changed).prediction != c.model.raw_rows[changed].prediction
    assert window.certificates.lines[0].verdict == "promoted"
    assert window.certificates.table.item(0, VERDICT_COLUMN).text() == "better, in use"

    # Undo and redo from the Edit menu: the promotion goes and comes back.
    assert window.commands.undo.isEnabled() and window.commands.undo.text().startswith(
        "Undo review mark on img"
    )
    last = reviewed[-1]
    window.commands.undo.trigger()
    assert c.model.raw_rows[last].key not in c.model.marks and window.commands.redo.isEnabled()
    assert c.model.desk.rule == "operating point" and model.row_at(changed).decision_path != "reviewed"
    assert table.selected_row() is not None and table.selected_row().position == last  # type: ignore[union-attr]
    window.commands.redo.trigger()
    assert c.model.raw_rows[last].key in c.model.marks and not window.commands.redo.isEnabled()
    assert c.model.desk.rule == "fit"

    data = c.report_data()
    assert data is not None
    _, text = read_pdf_text(write_pdf(tmp_path / "report.pdf", data))
    assert "Review certificates" in text and "uniformly random sample" in text
    assert "The best-fit threshold decides this folder:" in text and "showed it better on the" in text


def test_the_pdf_says_the_decisions_are_unverified_where_nothing_was_certified(
    qtbot: object, tmp_path: Path
) -> None:
    window, c, _ = _window_on_rows(qtbot, tmp_path)
    window.commands.queue.trigger()
    window.commands.confirm.trigger()  # one review: nothing can be decided yet
    data = c.report_data()
    assert data is not None
    _, text = read_pdf_text(write_pdf(tmp_path / "report.pdf", data))
    assert "Nothing was certified" in text and "is unverified" in text
    assert "The best-fit threshold is under review on the" in text
    assert CLASSES[0] in text


def _sentence_fits(window: MainWindow) -> list[str]:
    """The sentences of the Certificates tab's 'What your answers showed' column that do not fit
    their cell whole (wrapped at the cell's width), with the room each needs and has."""
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QStyle

    from app.views.certificates_view import SHOWED_COLUMN

    table = window.certificates.table
    metrics = QFontMetrics(table.font())
    margin = (
        table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    )  # as Qt's delegate
    cut = []
    for r in range(table.rowCount()):
        text = table.item(r, SHOWED_COLUMN).text()
        rect = table.visualRect(table.model().index(r, SHOWED_COLUMN))
        assert rect.width() > 0 and table.viewport().rect().contains(rect.topLeft()), "the cell is in view"
        needed = metrics.boundingRect(
            QRect(0, 0, rect.width() - 2 * margin, 10_000), int(Qt.TextFlag.TextWordWrap), text
        )
        if needed.height() > rect.height() or rect.right() > table.viewport().width():
            cut.append(f"{text!r}: needs {needed.height()} px, has {rect.height()} px")
    return cut


def test_the_certificates_sentence_reads_whole_at_1280_by_800(qtbot: object, tmp_path: Path) -> None:
    """The sentence that says what a comparison showed ('... was shown better by 6 answers ...') was
    cut at the cell's end at 1280x800 (one 22-px line in a column narrower than the sentence); its
    tooltip alone had it whole. It wraps in its cell, whose row is as tall as the sentence."""
    from PySide6.QtGui import QFontMetrics

    from app.views.certificates_view import SHOWED_COLUMN

    window, _, labels = _window_on_rows(qtbot, tmp_path)
    window.resize(1280, 800)
    window.show()
    window.commands.queue.trigger()
    while "source-review" not in window.banners.items:
        row = window.table.selected_row()
        assert row is not None
        (
            window.commands.confirm if labels[row.position] == row.prediction else window.commands.correct
        ).trigger()
    window.show_tab("certificates")
    qtbot.waitExposed(window)  # type: ignore[attr-defined]
    settle()
    table = window.certificates.table
    assert table.rowCount() >= 1
    longest = max(table.item(r, SHOWED_COLUMN).text() for r in range(table.rowCount()))
    assert QFontMetrics(table.font()).horizontalAdvance(longest) > table.columnWidth(SHOWED_COLUMN), (
        "at 1280x800 the sentence is longer than its column: it must wrap to be read"
    )
    assert _sentence_fits(window) == []
    window.certificates.details.setChecked(True)  # the details' columns take room: still whole
    settle()
    assert _sentence_fits(window) == []
