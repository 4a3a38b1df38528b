"""Issue 38's minor items, each seen in a real window (pytest-qt, offscreen)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import sample_row


def test_the_row_count_follows_the_rows_a_filter_shows(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A mark in "Not reviewed yet" hid its row, and the count kept saying "1 rows" over an empty table."""
    from app.core.filters import RowFilter
    from app.core.run_items import ReviewNote
    from app.views.table_view import PredictionTable

    table = PredictionTable()
    qtbot.addWidget(table)
    table.model.append_rows([sample_row(0)])
    assert table.count_label.text() == "1 row"
    table.set_filter(RowFilter(mode="unreviewed"))
    assert table.count_label.text() == "1 row"
    table.model.replace_row(0, sample_row(0), ReviewNote("✓ confirmed tumor", "Confirmed by Ada"))
    assert table.proxy.rowCount() == 0 and table.count_label.text() == "0 of 1 row"
