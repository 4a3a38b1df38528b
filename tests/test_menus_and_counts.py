"""Menus and counts tell the truth (issue 27, item 6).

File ▸ Arrival order showed the settings' order, not the order a reopened folder continues in;
changing the order in Settings renumbered an open, begun folder without a word; the project list
said "0 images seen" after 48, "15" while the status bar said 21; a banner said "21 of 21" where
the PDF said "48 of 48"; the banner's "New project '<folder>'" made a project at once with the
current model, without the dialog, and did not open the folder in it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app_fixtures import sample_row
from controller_fakes import ended, folder, make, results_of, session_info

from app.control.controller import Controller


def _opened(home: Path, order: str = "name", n: int = 60) -> tuple[Controller, object, object]:
    c, view, worker, _ = make(home)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    c.open_folder(str(home / "site"))
    source = folder(home, n)
    c.sessions.on_worker_source_ready(
        dataclasses.replace(source, source=dataclasses.replace(source.source, order=order))
    )
    return c, view, worker


def _run(c: Controller, start: int, count: int, pred: int | None = None) -> None:
    rows = [sample_row(i, pred=i % 2 if pred is None else pred, src=0) for i in range(start, start + count)]
    c.on_worker_results_ready(results_of(rows))
    c.tick(force=True)


def test_the_order_menu_says_the_order_the_open_folder_arrives_in(tmp_path: Path) -> None:
    c, view, _ = _opened(tmp_path, order="interleaved")  # begun interleaved; the settings say name
    assert c.state.settings.order == "name" and view.last("set_order") == ("interleaved",)


def test_a_begun_folder_is_not_renumbered_without_a_word(tmp_path: Path) -> None:
    c, view, worker = _opened(tmp_path)
    c.start()
    _run(c, 0, 10)
    c.on_worker_run_ended(ended("stopped", 10, tmp_path))
    opened = len(worker.of("open_source"))
    c.sessions.apply_settings(dataclasses.replace(c.state.settings, order="interleaved"))  # the dialog
    assert len(worker.of("open_source")) == opened, "the begun folder keeps its order and its '#'"
    assert any("continues in the order it was begun in" in t for t in view.logged("info"))
    assert view.last("set_order") == ("name",)
    view.answers["confirm"] = False  # File ▸ Arrival order on the begun folder asks first
    c.sessions.on_window_order_changed("mtime")
    assert "numbered again" in view.last("confirm")[1] and len(worker.of("open_source")) == opened
    assert view.last("set_order") == ("name",)
    view.answers["confirm"] = True
    c.sessions.on_window_order_changed("mtime")
    request = worker.last("open_source")[0]
    assert request.order == "mtime" and request.order_chosen


def test_the_project_list_counts_what_the_status_bar_counts(tmp_path: Path) -> None:
    c, view, _ = _opened(tmp_path)
    c.start()
    for start in range(0, 48, 12):
        _run(c, start, 12)
        name, entry, _tip = view.last("set_project_entry")
        assert name == "default" and entry.endswith(f"{start + 12} images seen"), entry
        assert f"{start + 12} images seen" in c.state.project_text()


def test_the_collapse_banner_keeps_its_figures_as_rows_arrive(tmp_path: Path) -> None:
    c, view, _ = _opened(tmp_path)
    c.start()
    _run(c, 0, 21, pred=1)
    first = [b for (b,) in view.of("show_banner") if "Nearly every" in b.text]
    assert first and "(21 of 21 images" in first[-1].text
    _run(c, 21, 27, pred=1)
    latest = [b for (b,) in view.of("show_banner") if "Nearly every" in b.text][-1]
    assert "(48 of 48 images" in latest.text and latest.key == first[-1].key
    assert "(48 of 48 images" in c.model.figures().gate[-1], "the figures (and the PDF) say the same"


def test_the_banners_new_project_opens_the_dialog_then_the_folder_in_it(tmp_path: Path) -> None:
    c, view, worker = _opened(tmp_path)
    view.answers["ask_new_project"] = None  # cancelled: nothing is made
    c.projects.on_window_banner_action_triggered("source-project", "new-project:site")
    assert view.last("ask_new_project")[3] == "site", "the dialog, with the folder's name offered"
    assert c.state.settings.project == "default"
    model = str(tmp_path / "m.safetensors")
    view.answers["ask_new_project"] = ("Site B", model)
    c.projects.on_window_banner_action_triggered("source-project", "new-project:site")
    assert c.state.settings.project == "Site B" and c.state.settings.model == model
    assert c.sessions.open_after_session == tmp_path / "site", "and the folder opens in it"
    assert worker.last("open_session")[0].project == "Site B"
