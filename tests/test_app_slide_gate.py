"""A slide run with a model whose card records no training resolution stays in its project
(issue 38, finding 8): the resolution warning fires for every slide of such a model (the shipped
demo model's), so "Run anyway?" forked a new project for each one and left the project made for
the slide empty. Now it runs where it was opened, the warning recorded with the figures and the
reports; a warning about these images themselves still runs them apart (tests/test_app_gate.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_fixtures import make_folder, make_model, make_slide
from app_studio import RUN_TIMEOUT_MS, Studio

from app.core.projects import ProjectStore


def test_a_warning_every_slide_of_the_model_gets_does_not_fork_a_project(
    qtbot: object, home: Path, tmp_path: Path
) -> None:
    studio = Studio(qtbot, home, make_model(tmp_path / "model", mpp=None))  # the demo model's card
    try:
        c = studio.open(project="Clinic", method="source", method_config={})
        studio.open_folder(c, make_folder(tmp_path / "site", 6, labelled="csv"))
        studio.run_to_end(c)  # the project holds another source's images
        slide = make_slide(tmp_path / "slide.tif", size=(768, 512), mpp=0.5)
        with qtbot.waitSignal(c.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            c.controller.open_slide(str(slide))
        model = c.controller.model
        assert (
            model.gate_checks == ["resolution"] and "does not record its training resolution" in model.gate[0]
        )
        asked: list[str] = []
        c.window.confirm = lambda title, text: asked.append(f"{title}: {text}") or True  # type: ignore[method-assign]
        studio.run_to_end(c)
        assert len(asked) == 1 and "comes with every slide this model reads" in asked[0]
        assert "Run the slide in project 'Clinic' anyway?" in asked[0]
        assert c.controller.state.settings.project == "Clinic", "no project was forked"
        tiles = len(model.source.items)  # type: ignore[union-attr]
        assert tiles and len(model.rows) == tiles
        assert ProjectStore(home).names() == ["Clinic"]
        assert model.figures().gate, "the figures carry the warning"
        out = tmp_path / "reports"
        with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            c.controller.export(str(out))
        gate = json.loads((out / "run_config.json").read_text())["applicability"]
        assert gate["gate_fired"] and "training resolution" in gate["warnings"][0]
    finally:
        for app in studio.apps:
            studio.close(app)
