"""The Metrics tab behind another tab is not filled at every batch of rows (issue 41): its newest
figures wait and are shown with the tab, as they would have been shown at once.

Counted, not timed: the figure sets filled while the plots are in front."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_fixtures import sample_row
from controller_fakes import results_of, window_on_folder

from engine import PredictionRow


def rows(start: int, count: int) -> list[PredictionRow]:
    """Labelled rows, some changed by adaptation."""
    return [
        sample_row(i, pred=i % 2, src=(i // 3) % 2, truth=(i // 2) % 2, conf=0.6 + (i % 4) / 10)
        for i in range(start, start + count)
    ]


def texts(view: object) -> list[str]:
    """What the Metrics tab says: the summary, the gate and each set's title and line."""
    from app.views.metrics_view import MetricsView

    assert isinstance(view, MetricsView)
    sets = (view.dataset, view.reviewed)
    return [view.summary.text(), view.gate.text(), *(w.text() for s in sets for w in (s.title, s.line))]


def test_the_metrics_tab_behind_the_plots_waits_and_then_shows_the_newest_figures(
    qtbot: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.views.metrics_view import FigureSet, MetricsView

    c = window_on_folder(qtbot, tmp_path, 200)  # shown, the plots' tab in front
    window = c.view
    window.show_tab("plots")  # type: ignore[attr-defined]
    filled: list[str] = []
    show_metrics = FigureSet.show_metrics

    def counting(self: FigureSet, title: str, *args: object, **kwargs: object) -> None:
        filled.append(title)
        show_metrics(self, title, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(FigureSet, "show_metrics", counting)
    for start in (0, 20, 40):
        c.on_worker_results_ready(results_of(rows(start, 20)))
        c.tick(force=True)
    assert c.model.figures().dataset.labelled == 60
    assert filled == [], "no figure set filled behind the plots' tab"
    window.show_tab("metrics")  # type: ignore[attr-defined]
    assert filled == ["Against the dataset's labels (60 images)"], "the newest figures, once"
    at_once = MetricsView()  # given the same figures directly (not on screen: shown at once)
    qtbot.addWidget(at_once)  # type: ignore[attr-defined]
    at_once.set_metrics(c.model.figures())
    assert texts(window.metrics) == texts(at_once)  # type: ignore[attr-defined]
    assert not window.metrics.dataset.isHidden() and window.metrics.reviewed.isHidden()  # type: ignore[attr-defined]
    # In front, each batch fills it at once.
    c.on_worker_results_ready(results_of(rows(60, 20)))
    c.tick(force=True)
    assert filled[-1] == "Against the dataset's labels (80 images)"
