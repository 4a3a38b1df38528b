"""What decides the folder, in view, and every row current after a promotion (issue 38, items 1 and 4).

* One sentence, the engine's, is shown above the status bar and at the top of the Metrics tab and
  opens the PDF: before any review it says the original model decides and what the best-fit
  threshold would change; after the answers, what they changed.
* After a promotion no row says "original model · awaiting review ... decides once your answers
  show it better": the rows the promoted rule leaves alone are its too (they kept the path and
  reason of the decision as it arrived, finding 6); an undo gives the arrived rows back.
* An empty queue says why, without hedging between two reasons; an empty filter says why.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_studio import settle, started_window
from controller_fakes import ended, results_of

from app.control.controller import Controller
from app.core.certificates import decided_by
from app.core.filters import RowFilter
from app.core.settings import AppSettings
from app.reports.pdf import write_pdf
from app.views.main_window import MainWindow
from engine.methods.idipt_plus import AWAITING_REVIEW, HELD
from engine.run.review_outlook import IN_A_REPORT, IN_THE_APP
from engine.vocabulary import DecisionPath
from tests.review_rows import CLASSES, site_rows

N = 120


def _held_window(qtbot: object, home: Path) -> tuple[MainWindow, Controller, list[int]]:
    """The real window on a generated site decided as review first records it: each image by the
    original model, the site threshold held until answers show it better."""
    window, c = started_window(qtbot, home, N, AppSettings(reviewer="Dr Ada"))
    rows, labels = site_rows(N, seed=3)
    reason = (
        f"the site threshold (+1.5 on the original model's score) passed its safety checks; {AWAITING_REVIEW}"
    )
    rows = [
        dataclasses.replace(
            r,
            key=f"k{i}",
            name=f"img{i}.png",
            decision_path=HELD,
            decision_reason=reason,
            candidates=(*r.candidates, ("guarded", 1.5)),
        )
        for i, r in enumerate(rows)
    ]
    c.on_worker_results_ready(results_of(rows))
    c.on_worker_run_ended(ended("finished", N, home))
    return window, c, [int(v) for v in labels]


def _first_page(path: Path) -> str:
    import unicodedata

    from pypdf import PdfReader

    text = unicodedata.normalize("NFKC", PdfReader(str(path)).pages[0].extract_text() or "")
    return " ".join(text.split())


def test_the_sentence_is_in_view_and_the_rows_name_the_rule_in_use(qtbot: object, tmp_path: Path) -> None:
    window, c, labels = _held_window(qtbot, tmp_path)
    settle()
    desk, strip, metrics = c.model.desk, window.views.outlook, window.metrics.outlook
    before = desk.sentence(CLASSES)
    assert before.startswith(f"The original model decides all {N} images. The best-fit threshold would call ")
    assert strip.text() == before and metrics.text() == before and strip.isVisibleTo(window)
    table = window.table
    assert {decided_by(table.model.row_at(i)) for i in range(N)} == {"original model"}
    assert all(AWAITING_REVIEW in table.model.row_at(i).decision_reason for i in range(N))

    window.commands.queue.trigger()
    while desk.rule == "operating point":
        row = table.selected_row()
        assert row is not None
        (
            window.commands.confirm if labels[row.position] == row.prediction else window.commands.correct
        ).trigger()
    assert desk.rule == "fit"
    after = desk.sentence(CLASSES)
    assert (
        after.startswith("The best-fit threshold decides this folder: your ")
        and "changed from tumor to normal" in after
    )
    assert strip.text() == after and metrics.text() == after
    shown = [table.model.row_at(i) for i in range(N)]
    left_alone = [r for r, raw in zip(shown, c.model.raw_rows, strict=True) if r.prediction == raw.prediction]
    assert left_alone, "the promoted rule leaves some rows as they arrived"
    for row in shown:  # every row names the rule in use; none says it awaits review
        assert decided_by(row) == "best-fit threshold", (row.name, decided_by(row))
        assert row.decision_path == DecisionPath.REVIEWED and AWAITING_REVIEW not in row.decision_reason
    assert all("best-fit threshold" in r.decision_reason for r in left_alone)

    data = c.report_data()  # the PDF's sentence: the same, but where to answer is said without the key
    assert data is not None and data.sentence == desk.sentence(CLASSES, where=IN_A_REPORT)
    assert " ".join(data.sentence.split()) in _first_page(write_pdf(tmp_path / "report.pdf", data))

    window.commands.undo.trigger()  # the promotion goes: the rows are as they arrived again
    assert desk.rule == "operating point"
    assert {table.model.row_at(i).decision_reason for i in range(N)} == {c.model.raw_rows[0].decision_reason}
    assert strip.text().startswith(f"The original model decides all {N} images.")


def test_an_empty_queue_and_an_empty_filter_say_why(qtbot: object, tmp_path: Path) -> None:
    window, c, labels = _held_window(qtbot, tmp_path)
    table = window.table
    table.set_filter(RowFilter(mode="changed"))
    assert table.count_label.text() == f"0 of {N} rows: every decision is the original model's"
    window.commands.queue.trigger()
    while (row := table.selected_row()) is not None and c.model.desk.queue_state().ranks:
        (
            window.commands.confirm if labels[row.position] == row.prediction else window.commands.correct
        ).trigger()
    why = c.model.desk.why_empty()
    assert why.startswith(
        "nothing left to review: the best-fit threshold decides this folder; your answers settled "
    )
    assert " or none " not in why, "one reason, not two"
    tested = [line for line in c.model.desk.lines() if line.disagreements]
    assert all(f"{line.candidate.words}: {line.verdict.words}" in why for line in tested)


def test_the_pdf_says_how_to_review_without_the_apps_key(qtbot: object, tmp_path: Path) -> None:
    """The PDF is read at a tumour board, away from the app: its sentence said 'answering about 5 of
    them in the review queue (Q)', a key that means nothing on paper. The window keeps its key; the
    PDF and run_config.json name the app's queue and f2tta run --reviews, with the same facts."""
    import json

    from app.reports.files import config_document

    window, c, _ = _held_window(qtbot, tmp_path)
    settle()
    in_view = window.views.outlook.text()
    assert "answering about 5 of them in the review queue (Q) shows whether it is better" in in_view
    data = c.report_data()
    assert data is not None
    assert "(Q)" not in data.sentence
    assert IN_A_REPORT == "in the app's review queue or with f2tta run --reviews"
    assert data.sentence == in_view.replace(IN_THE_APP, IN_A_REPORT)
    assert json.loads(json.dumps(config_document(data), default=str))["summary"]["outlook"] == data.sentence
    page = _first_page(write_pdf(tmp_path / "report.pdf", data))
    assert " ".join(data.sentence.split()) in page and "(Q)" not in page
