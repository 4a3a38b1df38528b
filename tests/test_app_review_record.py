"""The record of the reviewer's work says what they did, the same everywhere (issue 38, finding 5):
a mark *confirmed* the decision on screen when it was made or *corrected* it, whatever decides the
image afterwards -- in the table, ``reviews.csv``, ``run_config.json`` and the PDF, with who and
when. The table said "✓ confirmed" for corrections that a promoted rule now agrees with, and
``reviews.csv`` said "corrected" for a confirmation made after a promotion (each compared the mark
with another decision than the one on screen)."""

from __future__ import annotations

import csv
import io
import json

from app.reports.files import config_document, reviews_bytes
from app.reports.pdf_reviews import review_blocks
from engine.vocabulary import DecisionPath
from tests.review_rows import CLASSES
from tests.test_app_site_review import _processed, _review_until_decided


def test_confirmed_and_corrected_follow_the_decision_on_screen_everywhere(tmp_path) -> None:  # type: ignore[no-untyped-def]
    c, view, rows, labels = _processed(tmp_path)
    c.on_window_queue_requested()
    before = _review_until_decided(c, view, labels)  # marks made while the arrived decisions showed
    assert c.model.desk.rule != "operating point", "the reviews promoted a candidate"
    on_screen = {rows[i].key: rows[i].prediction for i in before}
    # After the promotion: confirm (C) an image whose decision the promotion changed.
    after = next(
        i
        for i, r in enumerate(c.model.rows)
        if r.decision_path == DecisionPath.REVIEWED
        and r.prediction != rows[i].prediction
        and r.key not in c.model.marks
    )
    shown = c.model.rows[after].prediction
    assert shown != rows[after].prediction, "the screen shows the promoted decision, not the arrived one"
    c.on_window_review_requested(after, shown)
    on_screen[rows[after].key] = shown

    marks = c.model.marks
    expected = {
        rows[i].name: "confirmed" if marks[rows[i].key].label == on_screen[rows[i].key] else "corrected"
        for i in [*before, after]
    }
    assert "corrected" in expected.values() and expected[rows[after].name] == "confirmed"
    corrected_now_agreeing = [
        i for i in before if expected[rows[i].name] == "corrected" and c.model.rows[i].prediction == labels[i]
    ]
    assert corrected_now_agreeing, "a correction the promoted rule now agrees with (the table said ✓)"

    # The table: ✓ for a confirmation, ✎ on screen → the reviewer's class for a correction.
    for i in [*before, after]:
        note = c.model.review_of(rows[i].position)
        mark = marks[rows[i].key]
        if expected[rows[i].name] == "confirmed":
            assert note.text == f"✓ confirmed {CLASSES[mark.label]}", note
        else:
            assert note.text == f"✎ {CLASSES[mark.prediction]} → {CLASSES[mark.label]}", note
        assert note.detail.startswith(expected[rows[i].name].capitalize() + " by ")

    data = c.report_data()
    assert data is not None
    written = list(csv.DictReader(io.StringIO(reviews_bytes(data).decode())))
    assert {r["item"]: r["verdict"] for r in written} == expected
    assert {r["item"]: r["shown"] for r in written} == {
        rows[i].name: CLASSES[on_screen[rows[i].key]] for i in [*before, after]
    }
    now = {r.name: r.prediction_label for r in c.model.rows}
    assert all(r["prediction"] == now[r["item"]] for r in written), "the decision reported now"
    document = json.loads(json.dumps(config_document(data), default=str))
    assert {m["item"]: m["verdict"] for m in document["review_marks"]} == expected
    assert all(m["reviewer"] == written[0]["reviewer"] and m["reviewed_at"] for m in document["review_marks"])

    html = "".join(block.html for block in review_blocks(data))
    for name, verdict in expected.items():
        cells = html[html.index(name) :].split("</tr>")[0]
        assert f"<b>{verdict}</b>" in cells, (name, verdict)


def test_a_mark_stays_in_the_queue_view_above_the_images_still_to_review(qtbot) -> None:  # type: ignore[no-untyped-def]
    """It left the queue's view the moment it was made, and with it what the reviewer had just done."""
    from app_fixtures import sample_row

    from app.core.certificates import queue_state
    from app.core.run_items import ReviewNote
    from app.views.table_view import PredictionTable

    table = PredictionTable()
    qtbot.addWidget(table)
    table.set_classes(("normal", "tumor"))
    rows = [sample_row(i, pred=0) for i in range(6)]
    table.model.append_rows(rows)
    order = [4, 1, 3]
    table.set_queue(queue_state(order))

    def review(position: int, label: int) -> None:  # as the controller: the row's mark, then the queue
        table.model.replace_row(
            position, rows[position], ReviewNote(f"✎ normal → {label}", "Corrected by Ada")
        )
        order.remove(position)
        table.set_queue(queue_state(order))

    def shown() -> list[int]:
        return [table.proxy.mapToSource(table.proxy.index(r, 0)).row() for r in range(table.proxy.rowCount())]

    table.reviewRequested.connect(review)
    table.open_queue()
    assert shown() == [4, 1, 3] and table.selected_source_row() == 4
    table.mark_selected(1)
    assert shown() == [4, 1, 3], "the marked image stays, where it was"
    assert table.selected_source_row() == 1, "the next image to review is selected"
    table.mark_selected(1)
    assert shown() == [4, 1, 3] and table.selected_source_row() == 3
    table.set_mode("all")
    table.open_queue()
    assert shown() == [3], "a queue view opened afresh lists what is left to review"


def test_agreement_is_counted_one_way_in_the_metrics_tab_the_pdf_and_run_config(tmp_path, qapp) -> None:  # type: ignore[no-untyped-def]
    """Finding 4: the PDF said "agreement with the model: 0.0 %" (the marks against the decisions as
    the images arrived) where the Metrics tab said 100 % (against the decisions shown now); now one
    count (:func:`app.core.review_record.review_tally`) says both what the reviewer did and what the
    decisions now agree with, and against what."""
    from app_studio import read_pdf_text

    from app.reports.pdf import pdf_bytes
    from app.views.metrics_view import MetricsView

    c, view, _, labels = _processed(tmp_path)
    c.on_window_queue_requested()
    reviewed = _review_until_decided(c, view, labels)
    c.tick(force=True)
    figures = view.last("set_metrics")[0]  # what the Metrics tab is given
    marks, now = c.model.marks, {r.key: r.prediction for r in c.model.rows}
    tally = figures.review
    assert (tally.reviewed, tally.confirmed, tally.agree_now) == (
        len(reviewed),
        sum(m.confirmed for m in marks.values()),
        sum(m.label == now[k] for k, m in marks.items()),
    )
    assert tally.agree_now != tally.confirmed, "the decisions now agree with corrections too"
    assert tally.agree_now == figures.reviewed.accuracy * figures.reviewed.labelled

    tab = MetricsView()
    tab.set_metrics(figures)
    assert tally.sentence() in tab.reviewed.line.text()
    data = c.report_data()
    assert data is not None
    document = json.loads(json.dumps(config_document(data), default=str))
    assert document["summary"]["reviews"] == tally.document()
    assert document["summary"]["reviews"]["agreement_measured_against"].startswith(
        "the decisions reported now"
    )
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_bytes(data))
    _, text = read_pdf_text(path)
    assert tally.sentence() in text
