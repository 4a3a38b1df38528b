"""Decision paths in prediction rows: the journal's JSON, the CSV (and an older CSV), the summaries."""

from __future__ import annotations

import math
from pathlib import Path

from support import two_class_step

from engine.io.sources import StreamItem
from engine.methods.decision import DecisionRecord
from engine.run.decisions import decision_summary, describe_decision
from engine.run.rows import (
    CSV_COLUMNS,
    LEGACY_CSV_COLUMNS,
    PredictionRow,
    csv_cells,
    make_row,
    read_csv_records,
)


def _row(
    index: int,
    pred: int,
    src: int,
    truth: int | None,
    path: str = "",
    group: int | None = None,
    threshold: float | None = None,
) -> PredictionRow:
    return PredictionRow(
        index=index,
        position=index,
        key=str(index),
        name=f"img{index}.png",
        prediction=pred,
        prediction_label=str(pred),
        confidence=0.9,
        positive_prob=0.5,
        source_prediction=src,
        source_label=str(src),
        source_confidence=0.8,
        uncertainty=math.nan,
        ground_truth=truth,
        truth_label=None if truth is None else str(truth),
        seconds=0.1,
        decision_path=path,
        site_group=group,
        decision_threshold=threshold,
        decision_reason="accepted" if path == "accepted" else "",
    )


def test_a_step_decision_reaches_the_row_its_json_and_its_csv() -> None:
    decision = DecisionRecord("accepted", group=2, threshold=-3.25, reason="accepted", group_images=80)
    step = two_class_step(decision, index=4, source_prediction=0)
    row = make_row(StreamItem(4, "k", "a.png", ground_truth=1), step, ["normal", "tumor"], 1)
    assert (row.decision_path, row.site_group, row.decision_threshold) == ("accepted", 2, -3.25)
    back = PredictionRow.from_json(row.to_json())
    fields = ("decision_path", "site_group", "decision_threshold", "decision_reason")
    assert [getattr(back, f) for f in fields] == [getattr(row, f) for f in fields]
    cells = dict(zip(CSV_COLUMNS, csv_cells(row), strict=True))
    assert cells["decision_path"] == "accepted" and cells["site_group"] == "2"
    assert float(cells["decision_threshold"]) == -3.25 and cells["changed_by_adaptation"] == "1"
    line = describe_decision(row)
    assert line.startswith("decided by the site threshold, unreviewed (-3.25 on the original model's score)")
    assert "(site 2)" in line
    plain = _row(1, 0, 0, None)  # a method without decision records: nothing added
    assert "decision_path" not in plain.to_json() and describe_decision(plain) == ""


def test_a_predictions_csv_of_the_earlier_columns_is_still_read(tmp_path: Path) -> None:
    old = tmp_path / "preds.csv"
    old.write_text(",".join(LEGACY_CSV_COLUMNS) + "\n" + ",".join(["0", "0", "a.png"] + [""] * 19) + "\n")
    records = read_csv_records(old, CSV_COLUMNS, legacy=[LEGACY_CSV_COLUMNS])
    assert records[0]["item"] == "a.png"


def test_decision_summary_counts_changes_per_group_and_path() -> None:
    rows = [
        _row(0, 1, 0, 1, "accepted", 0, -2.0),  # fixed
        _row(1, 1, 0, 0, "accepted", 0, -2.0),  # broken
        _row(2, 0, 0, 0, "accepted", 0, -2.0),
        _row(3, 1, 1, None, "not-accepted", 1, 0.0),
        _row(4, 0, 0, 0, "source-like", None, 0.0),
        _row(5, 1, 1, 1),  # no decision recorded
    ]
    summary = {(e["group"], e["path"]): e for e in decision_summary(rows)}
    assert set(summary) == {(0, "accepted"), (1, "not-accepted"), (None, "source-like")}
    accepted = summary[(0, "accepted")]
    assert (accepted["images"], accepted["changed"], accepted["fixed"], accepted["broken"]) == (3, 2, 1, 1)
    assert summary[(1, "not-accepted")]["labelled"] == 0


def test_the_tables_tooltip_says_where_a_decision_came_from() -> None:
    from app.views.table_model import PredictionTableModel

    row = _row(3, 1, 0, 1, "accepted", 4, -2.5)
    tip = PredictionTableModel._tooltip(row)
    assert "adaptation changed the original model's call" in tip
    assert "decided by the site threshold, unreviewed (-2.50 on the original model's score) (site 4)" in tip
    assert "decided by" not in PredictionTableModel._tooltip(_row(1, 0, 0, None))


def test_a_rows_csv_cells_are_the_same_after_the_journal_keeps_it() -> None:
    """The CSV a resumed run rewrites from the journal (6 decimals) reads as the one written live:
    seconds of 0.00234999 were "0.0023" live and "0.0024" after the journal's round to 0.00235."""
    import dataclasses

    row = dataclasses.replace(_row(0, 1, 1, 1), seconds=0.00234999, confidence=0.12345649999)
    back = PredictionRow.from_json(row.to_json())
    assert back.seconds != row.seconds  # the journal did round it
    assert csv_cells(back) == csv_cells(row)
    cells = dict(zip(CSV_COLUMNS, csv_cells(row), strict=True))
    assert cells["seconds"] == "0.0024" and cells["confidence"] == "0.123456"
