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
    assert table.proxy.rowCount() == 0 and table.count_label.text() == "0 of 1 row: every image is reviewed"


def test_the_collapse_banner_counts_every_row_when_the_run_pauses(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """It was checked every few rows (and at the end of a run) only: "270 of 273" stayed on the banner
    and in the PDF exported while paused after 278 tiles."""
    from controller_fakes import opened, results

    c, view, _, _ = opened(tmp_path, 30)
    c.start()
    c.on_worker_results_ready(results(*range(22)))  # every prediction the same class
    c.tick(force=True)
    assert c.model.collapse is not None and c.model.collapse.total == 22
    c.on_worker_results_ready(results(*range(22, 27)))  # too few new rows for the next regular check
    c.pause()
    c.on_worker_paused()
    assert c.model.collapse is not None and (c.model.collapse.count, c.model.collapse.total) == (27, 27)
    banner = [b for (b,) in view.of("show_banner") if "Nearly every prediction" in b.text][-1]
    assert "27 of 27 images" in banner.text
    data = c.report_data()
    assert data is not None and any("27 of 27 images" in g for g in data.gate)


def test_a_greyed_export_says_why(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Export was greyed during a run with no word of why, although a pause allows it."""
    from app.core.phase import Phase, actions_for
    from app.views.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    export = window.commands.export
    for phase, enabled, words in (
        (Phase.RUNNING, False, "while the run is paused (Pause, F6)"),
        (Phase.PAUSED, True, "Export reports of the images processed so far"),
        (Phase.EMPTY, False, "Nothing to export yet"),
    ):
        window.set_actions(
            phase, actions_for(phase, has_session=True, pending=3, has_rows=phase is not Phase.EMPTY)
        )
        assert export.isEnabled() is enabled and words in export.toolTip(), (phase, export.toolTip())


def test_the_export_step_is_not_covered_by_its_progress_bar_at_1280(qtbot) -> None:  # type: ignore[no-untyped-def]
    """At 1280x800 the status bar laid the export's progress bar over its text: "W" was all that showed."""
    from app.views.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    parts = window.status_parts
    parts.model_label.set_full_text(
        "Histology · normal / tumor · ViT-Tiny, 4 blocks, 12-px patches, 96 px input — " * 2
    )
    parts.project_label.set_full_text("Project 'Demo histology': 160 images seen, saved at 15:30")
    parts.progress_label.set_full_text("160 / 160")
    window.show_export_progress("Writing report.pdf", 3, 9)
    qtbot.waitUntil(lambda: parts.export_bar.isVisible())
    label, bar = parts.export_label.geometry(), parts.export_bar.geometry()
    assert label.right() < bar.left(), (label, bar)
    assert parts.export_label.text() == "Writing report.pdf (3 of 9)"


def test_the_export_dialog_of_a_demo_set_does_not_start_inside_the_installation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """It opened in resources/demo-sets/, beside the demo folder: reports among the installed files."""
    from pathlib import Path

    from app._engine import open_folder
    from app.core.recent import export_folder
    from app.core.settings import DEMO_SETS

    demo = open_folder(DEMO_SETS["histology"], ("normal", "tumor"))
    assert export_folder([], demo) == str(Path.home())
    from app_fixtures import make_folder

    mine = open_folder(make_folder(tmp_path / "site", 2, labelled="none"), ("normal", "tumor"))
    assert export_folder([], mine) == str(mine.root.parent), "beside any other folder, as before"


def test_the_pdfs_changes_table_names_who_decided_not_the_path() -> None:
    """It listed I-DiPT+'s internal path names (not-accepted, awaiting-review) where the table says
    who decided."""
    from app_fixtures import report_data

    from app.reports.pdf_sections import change_blocks

    paths = ["not-accepted", "awaiting-review", "accepted", "source-like"]
    rows = tuple(sample_row(k, decision_path=p, site_group=k) for k, p in enumerate(paths))
    html = "".join(b.html for b in change_blocks(report_data(rows)))
    assert "Decided by" in html and "site threshold (unreviewed)" in html
    assert "original model (a site threshold awaits review)" in html
    assert not [p for p in paths if f">{p}<" in html], html


def test_a_row_the_reviews_rule_changed_does_not_say_adaptation_changed_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Its tooltip said "adaptation changed the prediction" above "decided normal as it arrived; the
    site's reviews put the fit candidate in use, which decides otherwise"."""
    from app.views.table_view import PredictionTable
    from engine.vocabulary import DecisionPath

    table = PredictionTable()
    qtbot.addWidget(table)
    reason = "decided normal as it arrived; the site's reviews put the fit candidate in use"
    table.model.append_rows(
        [sample_row(0, pred=1, src=0, decision_path=DecisionPath.REVIEWED, decision_reason=reason)]
    )
    tip = table.model.index(0, 1).data(3)  # ToolTipRole
    assert "adaptation changed" not in tip and "the rule your answers showed better changed it" in tip
    assert "original model: normal" in tip and tip.endswith(reason)


def test_a_blank_review_column_leaves_its_room_to_the_file_names(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Blank, it kept 18 characters while the names were cut where they differ ("histo_…08.jpg")."""
    from app.core.run_items import ReviewNote
    from app.views.table_model import REVIEW_COLUMN
    from app.views.table_view import PredictionTable

    table = PredictionTable()
    qtbot.addWidget(table)
    table.resize(790, 400)
    table.show()
    table.model.append_rows([sample_row(i, name=f"histo_site2_{i:03d}.jpg") for i in range(3)])
    view = table.table
    blank_review, blank_item = view.columnWidth(REVIEW_COLUMN), view.columnWidth(1)
    em = view.fontMetrics().horizontalAdvance("0")
    assert blank_review < 10 * em
    table.model.replace_row(0, sample_row(0), ReviewNote("✎ normal → tumor", "Corrected by Ada"))
    assert view.columnWidth(REVIEW_COLUMN) >= 18 * em, "wide once a mark is made"
    assert view.columnWidth(1) < blank_item, "the names gave the room back"


def test_settings_fit_their_dialog(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The method's whole name made the dialog's content 845 px wide in its 720-px dialog, cut at the
    right edge at 1280x800 (its buttons and fields too); the advanced settings fit as well."""
    from app.core.settings import AppSettings, available_devices, method_fields
    from app.views.settings_dialog import SettingsDialog

    dialog = SettingsDialog(AppSettings(), method_fields(), available_devices())
    qtbot.addWidget(dialog)
    dialog.show()
    content, viewport = dialog.scroll_area.widget(), dialog.scroll_area.viewport()
    assert dialog.width() <= 720
    assert content.minimumSizeHint().width() <= viewport.width(), content.minimumSizeHint()
    dialog.advanced_toggle.click()
    assert content.minimumSizeHint().width() <= viewport.width(), "the advanced settings too"


def test_time_left_counts_the_maps() -> None:
    """The status bar said "0:00 left" with every uncertainty map still to make (maps behind the decisions)."""
    import dataclasses

    import numpy as np

    from app.core.messages import ItemResult
    from app.core.overlay import Overlay
    from app.core.progress import Progress
    from app.core.run_maps import MapsCount

    deciding = Progress(10, 20, 1.0, 10.0, True, "maps: 0 of 10")
    assert "0:10 left, then the maps · maps: 0 of 10" in deciding.text()
    clock = iter(float(t) for t in range(100))
    count = MapsCount(clock=lambda: next(clock))
    empty = Overlay.from_step((2, 2), None, None, None)
    rows = [sample_row(i, map_status="pending") for i in range(10)]
    count.add([ItemResult(r, empty, None, np.zeros(2, np.float32)) for r in rows])
    assert count.remaining() != count.remaining(), "not known before two maps came (nan)"
    for r in rows[:4]:  # a map a second
        count.add([ItemResult(dataclasses.replace(r, map_status=""), empty, None, np.zeros(0), True)])
    assert count.remaining() == 6.0
    mapping = Progress(20, 20, 1.0, 0.0, True, count.text(), count.remaining())
    assert mapping.text() == "maps: 4 of 10 · 0:06 left · decisions: 20 / 20"


def test_both_per_class_tables_list_the_classes_in_one_order(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Each set sorted its classes by its own counts: normal, tumor against the dataset's labels and
    tumor, normal against the reviewers' marks."""
    from app.core.figures import figures
    from app.views.metrics_view import MetricsView

    rows = [sample_row(i, pred=i % 2, truth=i % 2) for i in range(8)]
    view = MetricsView()
    qtbot.addWidget(view)
    view.set_metrics(
        figures(rows, [0, 0, 0, 0, 0, 1, 1, 1], {"k1": 1, "k3": 1, "k0": 0}, ("normal", "tumor"))
    )

    def order(table: object) -> list[str]:
        return [table.item(r, 0).text() for r in range(table.rowCount())]  # type: ignore[attr-defined]

    assert order(view.dataset.per_class) == order(view.reviewed.per_class) == ["normal", "tumor"]


def test_reports_written_while_paused_are_no_longer_announced_once_the_run_resumes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """'Reports written' stayed after Resume made the maps (and decisions) those reports lack."""
    from controller_fakes import opened, results

    c, view, _, _ = opened(tmp_path, 6)
    c.start()
    c.on_worker_results_ready(results(0, 1, 2))
    c.pause()
    c.on_worker_paused()
    c.exports.on_reports_written([tmp_path / "out" / "report.pdf"])
    assert any(b.key == "export" for (b,) in view.of("show_banner"))
    before = view.of("dismiss_banner").count(("export",))
    c.resume()
    assert view.of("dismiss_banner").count(("export",)) == before + 1


def test_the_banners_interleave_changes_the_open_folders_order_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One class-sorted folder's "Interleave (seeded)" set the order every later folder opened in,
    silently."""
    from controller_fakes import opened

    c, view, worker, _ = opened(tmp_path, 6)
    assert c.state.settings.order == "name"
    c.projects.on_window_banner_action_triggered("source-sorted", "interleave")
    (request,) = worker.last("open_source")
    assert request.order == "interleaved" and request.order_chosen, "the open folder, interleaved"
    assert c.state.settings.order == "name", "the order other folders open in stays"
    assert any("other folders open in the file name order" in m for m in view.logged("info"))


def test_the_demos_are_in_the_help_menu(qtbot) -> None:  # type: ignore[no-untyped-def]
    """They were reachable only from an empty project's welcome page."""
    from app.core.phase import Phase, actions_for
    from app.views.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.set_demos({"histology"})
    menu = {a.text(): a for a in window.commands.help_menu.actions()}
    histology, fundus = menu["Try the histology demo"], menu["Try the fundus demo"]
    assert histology.isVisible() and not fundus.isVisible(), "only the demos installed"
    window.set_actions(Phase.DONE, actions_for(Phase.DONE, has_session=True, pending=0, has_rows=True))
    with qtbot.waitSignal(window.demoRequested) as asked:
        histology.trigger()
    assert asked.args == ["histology"]
    window.set_actions(Phase.RUNNING, actions_for(Phase.RUNNING, has_session=True, pending=3, has_rows=True))
    assert not histology.isEnabled(), "not while a run goes (it changes project)"


def test_the_advice_to_use_another_project_goes_when_the_images_run_here(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """It stayed as a third banner over a slide run in the project (the slide viewer ~290 px high)."""
    from controller_fakes import opened

    from app.core import advice

    c, view, _, _ = opened(tmp_path, 6)
    c.start()
    assert (advice.SOURCE_KEYS + "project",) in view.of("dismiss_banner")
