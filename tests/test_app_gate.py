"""The engine's applicability gate in the app (pytest-qt, offscreen): the histology-like test model
on a folder of fundus-like photographs is warned about on open, as ``f2tta run`` would stop with
exit code 4, and every figure computed under the warning says so, in the Metrics tab and in the
PDF and JSON reports."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from app_fixtures import CLASSES
from app_studio import RUN_TIMEOUT_MS, Studio, read_pdf_text
from PIL import Image

from app.core.figures import GATE_CAPTION, SORTED_CAPTION, gate_caption
from app.core.phase import Phase
from app.core.projects import ProjectStore
from app.views._plain import plain_tooltip


def _labelled_fundus_folder(root: Path, n: int = 12) -> Path:
    """Bright discs on black corners (what the image-kind judge calls fundus photographs), in class
    sub-folders named after the test model's classes, so the figures exist."""
    yy, xx = np.mgrid[0:64, 0:64]
    disc = (yy - 32) ** 2 + (xx - 32) ** 2 < 28**2
    for i in range(n):
        sub = root / CLASSES[i % 2]
        sub.mkdir(parents=True, exist_ok=True)
        img = np.zeros((64, 64, 3), np.uint8)
        img[disc] = (200 - i, 90, 40)
        Image.fromarray(img).save(sub / f"eye{i:02d}.png")
    return root


def test_a_model_that_does_not_apply_marks_every_figure(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = _labelled_fundus_folder(tmp_path / "eyes")
    c = studio.open_with(folder, "Eyes")
    window, model = c.window, c.controller.model
    # On open, before any image is processed: the engine's gate, as f2tta run applies it.
    assert any("look like fundus photographs" in g for g in model.gate), model.gate
    kinds = [b for b in window.banners.banners() if b.key == "source-image-kind"]
    assert kinds and "fundus photographs" in kinds[0].text
    # F5 asks once, naming the reason, as f2tta run refuses (exit 4); No runs nothing.
    asked: list[str] = []
    window.confirm = lambda title, text: asked.append(f"{title}: {text}") or False  # type: ignore[method-assign]
    c.controller.start()
    assert asked and asked[0].startswith("Run anyway?") and "fundus photographs" in asked[0]
    assert c.controller.phase is Phase.READY and not model.rows, "nothing was run"
    # Yes runs them in a project of their own: project Eyes' adaptation state takes none of them.
    window.confirm = lambda title, text: asked.append(f"{title}: {text}") or True  # type: ignore[method-assign]
    studio.run_to_end(c)
    assert len(asked) == 2, "asked once for this run (not again in the project made for it)"
    assert c.controller.state.settings.project == "Eyes - eyes" and len(model.rows) == 12
    eyes = ProjectStore(studio.home).info("Eyes")
    assert eyes is not None and eyes.images_seen == 0, "the project's state is not polluted"
    plots = window.plots.caption
    assert plots.isVisibleTo(window) and GATE_CAPTION in plots.text(), "the plots carry the mark too"
    figures = model.figures()
    assert figures.dataset.labelled == 12 and figures.gate, "figures computed under the fired gate"
    metrics = window.metrics
    assert not metrics.gate.isHidden() and GATE_CAPTION in metrics.gate.text()
    assert "fundus photographs" in metrics.gate.text()
    assert (
        not metrics.dataset.caption.isHidden() and metrics.dataset.caption.text() == "⚠ Model may not apply"
    )
    assert metrics.dataset.caption.toolTip() == plain_tooltip(GATE_CAPTION)
    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    config = json.loads((out / "run_config.json").read_text())
    gate = config["applicability"]
    assert gate["gate_fired"] is True and any("fundus photographs" in w for w in gate["warnings"])
    assert gate["figures"] == f"{GATE_CAPTION}."
    _, text = read_pdf_text(out / "report.pdf")
    flat = " ".join(text.split())
    results = flat.index("Per-class results: against the dataset's labels")
    assert GATE_CAPTION in flat[results : results + 400], "said on the page with the figures"
    assert flat.index(GATE_CAPTION) < results, "and in the summary above them"
    assert "Model Histology · normal / tumor · ViT-Tiny" in flat, "the model named by its card, as in the app"


def test_a_fitting_folder_marks_nothing(studio: Studio, tmp_path: Path) -> None:
    from app_fixtures import make_folder

    folder = make_folder(tmp_path, 12, labelled="csv")  # histology-like, labels mixed: nothing fires
    c = studio.processed(folder, "Fits")
    assert c.controller.model.gate == [] and c.controller.model.figures().gate == ()
    assert c.window.metrics.gate.isHidden() and c.window.metrics.dataset.caption.isHidden()


def test_figures_of_a_class_sorted_folder_say_so_not_that_the_model_does_not_apply(
    studio: Studio, tmp_path: Path
) -> None:
    """A folder opened in name order with class sub-folders arrives class by class: the gate
    fires (as in f2tta run), but the model still applies; its figures say what happened instead."""
    from app_fixtures import make_folder

    folder = make_folder(tmp_path, 12, labelled="folders")
    c = studio.open_with(folder, "Sorted")
    c.window.confirm = lambda title, text: True  # Run anyway (in a project of its own)
    studio.run_to_end(c)
    model, metrics = c.controller.model, c.window.metrics
    assert model.gate_checks == ["class-sorted"], model.gate_checks
    figures = model.figures()
    assert figures.caption == SORTED_CAPTION and GATE_CAPTION not in metrics.gate.text()
    assert SORTED_CAPTION in metrics.gate.text() and metrics.dataset.caption.toolTip() == plain_tooltip(
        SORTED_CAPTION
    )


def test_the_caption_names_what_fired() -> None:
    assert gate_caption([]) == ""
    assert gate_caption(["class-sorted"]) == SORTED_CAPTION
    assert gate_caption(["class-sorted", "image-kind"]) == GATE_CAPTION
    assert gate_caption(["collapse"]) == gate_caption(["resolution"]) == GATE_CAPTION


def test_a_collapse_beside_the_gate_names_the_images_kind_once(studio: Studio, tmp_path: Path) -> None:
    """Nearly every prediction in one class, on images the gate already called fundus photographs:
    the two warnings offer the same fix and show as one banner, which says the kind once."""
    folder = _labelled_fundus_folder(tmp_path / "eyes", n=24)
    c = studio.open_with(folder, "Eyes")
    c.window.confirm = lambda title, text: True  # type: ignore[method-assign]
    studio.run_to_end(c)
    told = [b for b in c.window.banners.banners() if "source-collapse" in b.keys]
    assert told and "source-image-kind" in told[0].keys, [b.keys for b in c.window.banners.banners()]
    gate, _, collapse = told[0].text.partition("\n")
    assert "look like fundus photographs" in gate and "fundus" not in collapse, told[0].text
