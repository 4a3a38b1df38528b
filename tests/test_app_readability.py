"""What a reader sees (issue 20, item 5; pytest-qt, offscreen): a key on the bar chart, settings
in plain words with the code name in the tooltip, uncertainty as low/medium/high within the site,
names cut in the middle, an empty Metrics tab without headings, and numbers from 1."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import CLASSES, sample_row
from app_studio import settle
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStyleOptionViewItem

from app.core.certificates import ReviewedRow
from app.core.field_labels import field_label
from app.core.figures import figures
from app.core.settings import AppSettings, available_devices, method_fields
from app.core.stats import RunStatistics
from app.core.uncertainty import UncertaintyRanks
from app.views.metrics_view import MetricsView
from app.views.plots_view import PlotsView
from app.views.table_model import GROUP_COLUMN, UNCERTAINTY_COLUMN
from app.views.table_view import ITEM_MIN_CHARS, PredictionTable
from engine import list_methods
from engine.config import fields_of
from engine.methods import method_config_class
from engine.vocabulary import DecisionPath, Rule


def test_the_per_segment_bars_have_a_key(qtbot: object) -> None:
    view = PlotsView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    stats = RunStatistics(segment_size=2)
    stats.extend([sample_row(i, truth=i % 2) for i in range(8)])
    view.set_extent(8, 2)
    view.set_data(stats.plot_data())
    title = view.segments.getPlotItem().titleLabel.text
    assert "■ as decided" in title and "■ original model" in title, title
    view.set_data(None, labelled=False)  # cleared for the next source: the key stays
    assert "■ as decided" in view.segments.getPlotItem().titleLabel.text


def test_with_nothing_open_the_bars_are_not_per_1_images(qtbot: object) -> None:
    view = PlotsView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.set_data(None, labelled=False)
    view.set_extent(0, 1)  # a project with no folder or slide open (as the window clears it)
    title = view.segments.getPlotItem().titleLabel.text
    assert title.startswith("Per segment") and "per 1 images" not in title, title


@pytest.mark.parametrize("name", ["prompt_len_specific", "mc_passes", "beta", "gamma"])
def test_settings_show_plain_names_with_the_code_name_in_the_tooltip(qtbot: object, name: str) -> None:
    from app.views.settings_dialog import SettingsDialog

    dialog = SettingsDialog(AppSettings(method="idipt"), method_fields(), available_devices())
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    dialog.method_combo.setCurrentIndex(dialog.method_combo.findData("idipt"))
    editor = dialog._editors[name]
    label = dialog.advanced_form.labelForField(editor)
    text = label.text()  # type: ignore[attr-defined]
    assert text and name not in text and "_" not in text and text[0].isupper(), text
    for tip in (label.toolTip(), editor.toolTip()):
        assert f"Code name: {name}" in tip and "Default:" in tip, tip


def test_every_hyper_parameter_has_a_plain_name() -> None:
    for method in list_methods():
        for info in fields_of(method_config_class(method)):
            label = field_label(info.name, method)
            assert "_" not in label and label[0].isupper(), (method, info.name, label)
    assert field_label("gamma", "idipt") != field_label("gamma", "foa-shift"), "one name, two meanings"


def test_uncertainty_reads_low_medium_high_within_the_site(qtbot: object) -> None:
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    values = [0.0020 + 0.0013 * k / 19 for k in range(20)]  # 0.0020-0.0033: every image alike
    table.model.append_rows([sample_row(k, unc=u) for k, u in enumerate(values)])
    shown = [table.model.index(k, UNCERTAINTY_COLUMN).data() for k in range(20)]
    assert shown[:10] == ["low"] * 10 and shown[10:18] == ["medium"] * 8 and shown[18:] == ["high"] * 2
    tip = table.model.index(19, UNCERTAINTY_COLUMN).data(Qt.ItemDataRole.ToolTipRole)
    assert "more uncertain than 95%" in tip and "top 10 %" in tip and "0.0033" in tip, tip
    header = table.model.headerData(
        UNCERTAINTY_COLUMN, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole
    )
    assert "top 10 %" in header
    # Sorting by the column orders by the figure itself.
    table.table.sortByColumn(UNCERTAINTY_COLUMN, Qt.SortOrder.DescendingOrder)
    assert table.proxy.index(0, 0).data() == "20"
    table.model.clear()
    assert len(table.model.uncertainty) == 0
    ranks = UncertaintyRanks()
    assert ranks.band(0.1) == "" and "No uncertainty" in ranks.describe(float("nan"))


def test_names_are_cut_in_the_middle_so_their_ends_stay(qtbot: object) -> None:
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    view = table.table
    assert view.textElideMode() == Qt.TextElideMode.ElideMiddle
    assert not view.wordWrap(), "a wrapped name shows its first line only: glaucoma/…"
    name = "glaucoma/fundus_site5_000.jpg"
    cut = view.fontMetrics().elidedText(name, view.textElideMode(), 90)
    assert cut.startswith("gl") and cut.endswith(".jpg") and "…" in cut


def test_a_provisional_call_keeps_its_first_word_in_a_narrow_decided_by_column(qtbot: object) -> None:
    """At 1280 px the Decided by column read "best-fit th…provisional" (the word last, cut in the
    middle); a provisional call now reads "provisional: best-fit threshold" and is cut at its end,
    so the cell shows that it is provisional and whose call it is; other cells keep both ends."""
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    provisional = ReviewedRow(**vars(sample_row(0, decision_path=DecisionPath.PROVISIONAL)), rule=Rule.FIT)
    covered = ReviewedRow(**vars(sample_row(1, decision_path=DecisionPath.REVIEWED)), rule=Rule.LABEL_FREE)
    table.model.append_rows([provisional, covered])
    view = table.table
    width = view.columnWidth(GROUP_COLUMN)
    shown = []
    for row in range(2):
        option = QStyleOptionViewItem()
        view.itemDelegate().initStyleOption(option, table.proxy.index(row, GROUP_COLUMN))
        shown.append(view.fontMetrics().elidedText(option.text, option.textElideMode, width - 8))
    assert shown[0].startswith("provisional: best"), shown
    assert shown[1].startswith("site thr") and shown[1].endswith("reviewed)"), shown  # both ends


def test_an_empty_metrics_tab_has_no_headings(qtbot: object) -> None:
    view = MetricsView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(700, 300)
    view.show()
    assert not view.sets_area.isVisible() and not view.errors_button.isVisible()
    assert view.summary.isVisible() and "No ground truth yet" in view.summary.text()
    assert view.summary.height() > 150, "the message takes the tab, centred, instead of a top line"
    rows = [sample_row(k, pred=k % 2, truth=k % 2) for k in range(6)]
    view.set_metrics(figures(rows, [r.ground_truth for r in rows], {}, CLASSES))
    assert view.dataset.isVisible() and all(h.isVisible() for h in view.dataset.headings)
    assert not view.reviewed.isVisible(), "no reviewed images: no heading over nothing"
    view.set_metrics(None)
    assert not view.sets_area.isVisible()


def test_numbers_a_person_reads_start_at_1(qtbot: object) -> None:
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    table.model.append_rows([sample_row(0), sample_row(1)])
    assert table.model.index(0, 0).data() == "1"
    tip = table.model.index(0, 1).data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith("#1 img0.png") and "CSV index 0, counted from 0" in tip, tip


def test_table_tooltips_keep_their_line_breaks(qtbot: object) -> None:
    from app.views._plain import plain_tooltip

    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    table.model.append_rows([sample_row(0, name="two\nlines.png")])
    tip = plain_tooltip(table.model.index(0, 1).data(Qt.ItemDataRole.ToolTipRole))
    assert "\\n" + "decision" not in tip and "\ndecision: tumor" in tip, "a line break, not a visible \\n"
    assert "two\\nlines.png" in tip, "a line break inside a name stays visible as an escape"


def test_both_figure_sets_are_in_view_at_1920_by_1080(qtbot: object) -> None:
    """The Metrics tab at 1920×1080 is about 1 300×400 px: the confusion and per-class tables of
    two classes once stretched to fill it, so the reviewers' set sat below the fold."""
    rows = [sample_row(i, pred=i % 2, truth=(i // 3) % 2) for i in range(12)]
    marks = {rows[0].key: 0, rows[1].key: 1}
    view = MetricsView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(1300, 400)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    view.set_metrics(figures(rows, [r.ground_truth for r in rows], marks, CLASSES))
    qtbot.waitUntil(lambda: view.reviewed.isVisible() and view.dataset.isVisible())  # type: ignore[attr-defined]
    settle()  # their layout
    assert view.reviewed.isVisible() and view.dataset.isVisible()
    bottom = view.reviewed.geometry().bottom()
    assert bottom <= view.sets_area.viewport().height(), (bottom, view.sets_area.viewport().height())
    line = view.summary.fontMetrics().lineSpacing()
    assert view.summary.height() <= 3 * line, "the summary is as tall as its text"


@pytest.mark.parametrize("width", [560, 1400])
def test_the_item_name_keeps_room_in_a_narrow_table_and_fills_a_wide_one(qtbot: object, width: int) -> None:
    """A stretched name column shrank to "…" when the left pane was wide (a splitter saved on a
    larger screen); it now keeps ITEM_MIN_CHARS characters and the table scrolls sideways instead."""
    view = PredictionTable()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(width, 400)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    table = view.table
    em = table.fontMetrics().horizontalAdvance("0")
    assert table.columnWidth(1) >= ITEM_MIN_CHARS * em
    header = table.horizontalHeader()
    total = sum(header.sectionSize(c) for c in range(header.count()))
    if width > 1000:
        assert total == table.viewport().width(), "a wide table: the name fills what is left"


def test_decided_by_names_who_decides_not_the_path(qtbot: object) -> None:
    """The Decided by column says who decided each row (the source model, the site's threshold), not
    I-DiPT+'s path names; the path's reason stays in the row's tooltip."""
    from app.views.table_model import GROUP_COLUMN
    from engine.methods.idipt_plus import PATHS
    from engine.vocabulary import DecisionPath

    assert set(PATHS) <= set(DecisionPath)  # each of the method's paths is worded
    table = PredictionTable()
    qtbot.addWidget(table)  # type: ignore[attr-defined]
    paths = ["not-accepted", "awaiting-review", "source-like", "accepted", ""]
    table.model.append_rows([sample_row(k, decision_path=p) for k, p in enumerate(paths)])
    shown = [table.model.index(k, GROUP_COLUMN).data() for k in range(len(paths))]
    assert shown == [
        "original model",
        "original model",
        "original model",
        "site threshold (unreviewed)",
        "",
    ]
