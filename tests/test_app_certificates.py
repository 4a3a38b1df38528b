"""The review queue in the real window (pytest-qt, offscreen): Q opens the queue of disagreements,
C and X review its first image and the next one is selected; a harmed site group turns reverted
(banner, group column, the table's decisions, the certificates tab); Ctrl+Z and Ctrl+Shift+Z undo
and redo; the PDF states the certificates. The engine worker is the plain fake: the rows (two site
groups, adapting wrong in group 1) are played as its results."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import grouped_rows
from app_studio import read_pdf_text
from controller_fakes import FakeTicker, FakeWorker, ended, folder, results_of, session_info
from PySide6.QtCore import Qt

from app.control.controller import Controller
from app.core.open_session import OpenSession
from app.core.settings import AppSettings
from app.reports.pdf import write_pdf
from app.shell.wiring import window_connections
from app.views.main_window import MainWindow
from app.views.table_model import GROUP_COLUMN

N = 60


def _window_on_rows(qtbot: object, home: Path) -> tuple[MainWindow, Controller]:
    window = MainWindow()
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    state = OpenSession(AppSettings(reviewer="Dr Ada"), home, persist_settings=False)
    c = Controller(window, FakeWorker(), state, FakeTicker())  # type: ignore[arg-type]
    for signal, handler in window_connections(window, c):
        signal.connect(handler)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    c.sessions.on_worker_source_ready(folder(home, N))
    c.start()
    c.on_worker_results_ready(results_of(grouped_rows(N)))
    c.on_worker_run_ended(ended("finished", N, home))
    return window, c


def test_twenty_keyboard_reviews_from_the_queue_revert_the_harmed_group(
    qtbot: object, tmp_path: Path
) -> None:
    window, c = _window_on_rows(qtbot, tmp_path)
    table = window.table
    assert window.status_parts.reviewer_label.full_text() == "Reviewer: Dr Ada"
    assert [a.text() for a in window.menuBar().actions()][:3] == ["&File", "&Edit", "&Run"]
    assert not window.commands.undo.isEnabled()

    # Two of group 1's later disagreements were reviewed before: group 0 goes first, and the
    # queue's order is not the table's (arrival) order.
    for position in (13, 19):
        c.on_window_review_requested(position, c.model.raw_rows[position].source_prediction)
    window.commands.queue.trigger()  # Q: the queue, its first image selected
    assert table.current_filter().mode == "queue" and table.proxy.rowCount() == 18
    shown = [table.proxy.mapToSource(table.proxy.index(r, 0)).row() for r in range(table.proxy.rowCount())]
    ranks = c.model.desk.queue_state().ranks
    assert shown == sorted(ranks, key=ranks.__getitem__) and shown[:6] == [0, 6, 1, 12, 7, 18]
    assert table.selected_row() is not None and table.selected_row().position == 0  # type: ignore[union-attr]
    reviewed = []
    while "source-reverted-1" not in window.banners.items:
        row = table.selected_row()
        assert row is not None and row.changed and len(reviewed) < 18
        reviewed.append(row.position)
        # The reviewer knows group 1's adapted decisions are wrong: X (the other class); else C.
        (window.commands.correct if row.site_group == 1 else window.commands.confirm).trigger()
    assert reviewed == [0, 6, 1, 12, 7], "the least-reviewed group first, then in turns"
    banner = window.banners.items["source-reverted-1"].banner
    assert banner.text.startswith("Group 1 reverted after 4 reviews: its 30 images now show")
    model = table.model
    assert model.index(25, GROUP_COLUMN).data() == "1 · reverted"
    assert model.index(24, GROUP_COLUMN).data() == "0 · undecided"
    assert model.index(25, 2).data() == model.row_at(25).source_label, "the decision is the source model's"
    tip = model.index(25, 2).data(Qt.ItemDataRole.ToolTipRole)
    assert tip.splitlines()[1:] == [
        "decision: normal (0.800)",  # the source model's confidence
        "source: normal (0.800)",
        "adapted: tumor, reverted to the source model's: normal; site group 1 reverted after 4 reviews",
    ]
    lines = {line.group: line for line in window.certificates.lines}
    assert lines[1].verdict == "reverted" and lines[0].reviews == 3
    assert window.certificates.table.item(1, 5).text() == "reverted"
    # The queue goes on: group 0 first now, group 1's items (decided) last; in group 1 the decision
    # shown is the source model's now, so C confirms it.
    while len(c.model.marks) < 20:
        row = table.selected_row()
        assert row is not None
        reviewed.append(row.position)
        (
            window.commands.correct
            if row.site_group == 1 and row.prediction != row.source_prediction
            else window.commands.confirm
        ).trigger()
    assert reviewed[5:10] == [18, 24, 30, 36, 42], "group 0, the one still undecided, came first"
    assert c.model.desk.book.verdict(0) == "verified", "eight helpful reviews verified group 0"
    assert table.model.review_at(1) == "✓ confirmed", "the source model's class, now the decision shown"

    # Undo and redo from the Edit menu.
    assert window.commands.undo.isEnabled() and window.commands.undo.text().startswith(
        "Undo review mark on img"
    )
    last = reviewed[-1]
    window.commands.undo.trigger()
    assert c.model.raw_rows[last].key not in c.model.marks and window.commands.redo.isEnabled()
    assert table.selected_row() is not None and table.selected_row().position == last  # type: ignore[union-attr]
    window.commands.redo.trigger()
    assert c.model.raw_rows[last].key in c.model.marks and not window.commands.redo.isEnabled()

    data = c.report_data()
    assert data is not None
    path = write_pdf(tmp_path / "report.pdf", data)
    _, text = read_pdf_text(path)
    assert "Review certificates" in text
    assert "site group 1: reverted to the source model's decisions after 4 reviewed disagreements" in text
    assert "site group 0: adapting verified to help at 95 % confidence" in text
    assert "Site groups reverted to the source model 1 of 2 (30 images)" in text
    assert "Path reverted : a site group whose reviews showed that adapting harmed it" in text


def test_the_pdf_says_the_adapted_decisions_are_unverified_where_nothing_was_certified(
    qtbot: object, tmp_path: Path
) -> None:
    window, c = _window_on_rows(qtbot, tmp_path)
    window.commands.queue.trigger()
    window.commands.confirm.trigger()  # one review: nothing can be decided yet
    data = c.report_data()
    assert data is not None
    _, text = read_pdf_text(write_pdf(tmp_path / "report.pdf", data))
    assert "Nothing was certified" in text and "every adapted decision in this report is unverified" in text
    assert "site group 1: unverified: the adapted decisions stand but are not certified (0 reviews" in text
