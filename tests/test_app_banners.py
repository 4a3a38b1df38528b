"""Banners keyed by their cause (pytest-qt, offscreen): a banner goes when its cause does, two that
offer the same fix are shown as one, and the stack stays a few lines tall at 1280×800."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import make_folder
from app_studio import RUN_TIMEOUT_MS, Studio

from app.core.notices import Banner, merged
from app.core.phase import Phase
from app.views._plain import plain_tooltip
from app.views.banner import BannerBar

LONG = "The model may not apply to these images, and its figures may mean nothing at all. " * 4
DEMO = ("demo-model:fundus", "Use the fundus demo model")


def test_banners_offering_the_same_fix_become_one() -> None:
    kind = Banner("source-image-kind", "warning", "These look like fundus photographs.", (DEMO,))
    sorted_ = Banner("source-sorted", "warning", "Sorted by class.", (("interleave", "Interleave"),))
    collapse = Banner("source-collapse", "error", "Nearly every prediction is 'tumor'.", (DEMO,))
    shown = merged([kind, sorted_, collapse])
    assert [b.keys for b in shown] == [("source-image-kind", "source-collapse"), ("source-sorted",)]
    assert shown[0].actions == (DEMO,) and shown[0].level == "error"
    assert shown[0].text == "These look like fundus photographs.\nNearly every prediction is 'tumor'."


def test_the_same_fix_is_offered_once_and_the_stack_stays_short(qtbot: object) -> None:
    bar = BannerBar()
    qtbot.addWidget(bar)  # type: ignore[attr-defined]
    bar.resize(1280, 200)
    bar.show()
    bar.show_banner(Banner("source-image-kind", "warning", LONG, (DEMO,)))
    bar.show_banner(Banner("source-sorted", "warning", LONG, (("interleave", "Interleave (seeded)"),)))
    bar.show_banner(Banner("source-collapse", "warning", LONG, (DEMO,)))
    bar.show_banner(Banner("export", "info", LONG, (("open:/tmp", "Open export folder"),)))
    items = {id(item): item for item in bar.items.values()}
    buttons = [key for item in items.values() for key in item.buttons]
    assert buttons.count(DEMO[0]) == 1, "the same fix is offered once"
    assert len(items) == 3 and bar.items["source-image-kind"] is bar.items["source-collapse"]
    qtbot.waitUntil(lambda: bar.sizeHint().height() > 0)  # type: ignore[attr-defined]
    line = bar.fontMetrics().lineSpacing()
    assert bar.sizeHint().height() <= 3 * (line + 16), "one line a banner while several are shown"
    assert all(item.label.toolTip() == plain_tooltip(item.banner.text) for item in items.values()), (
        "the whole text, as text"
    )
    bar.dismiss("source-collapse")  # the merged banner goes with both its causes
    assert "source-image-kind" not in bar.items and "source-sorted" in bar.items


def test_the_reports_banner_goes_with_the_project_and_with_a_new_run(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 8, labelled="csv")
    c = studio.processed(folder, "Site A")
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(tmp_path / "reports"))
    assert "export" in c.window.banners.items
    with qtbot.waitSignal(c.sessionChanged, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.projects.select("Site B")
    assert "export" not in c.window.banners.items, "the reports were of the other project"
    studio.open_folder(c, folder)  # a project opens empty: its own folders are on the welcome page
    ready = lambda: c.controller.phase is Phase.READY and c.controller.model.pending == 8  # noqa: E731
    qtbot.waitUntil(ready, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    c.window.banners.show_banner(Banner("export", "info", "Reports written.", (("open:x", "Open"),)))
    c.controller.start()
    assert "export" not in c.window.banners.items, "a new run: the reports no longer hold every image"
    studio.run_to_end(c)
