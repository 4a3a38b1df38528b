"""Many classes do not make the figures or an export explode (issue 29, case 4).

A valid card with 400 classes and 12 labelled images took 285 s and 3.4 GB to export (200 classes:
47 s, 1.7 GB): every figure was a dense class-by-class matrix, laid out whole in the PDF. The
figures now cover the classes shown (all of a model with few; the classes present otherwise), a
matrix is drawn for a dozen at most, and the JSON keeps the non-zero cells of a large one. The
measured cost is ``benchmarks/export_classes.py``; here the sizes that decide it are checked.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from app.core.clinical import ALL_CLASSES_UP_TO, clinical_metrics
from app.core.messages import ItemResult
from app.core.overlay import Overlay
from app.core.run_model import RunModel
from app.reports.files import config_document
from app.reports.pdf_blocks import report_blocks
from app.reports.pdf_sections import class_blocks
from engine import FolderSource, PredictionRow, StreamItem


def _model(tmp_path: Path, classes: int, images: int = 12) -> RunModel:
    names = tuple(f"class{k:05d}" for k in range(classes))
    rng = np.random.default_rng(0)
    truths = [int(t) for t in rng.integers(0, classes, images)]
    items = tuple(
        StreamItem(i, f"k{i}", f"img{i}.png", path=tmp_path / f"img{i}.png", ground_truth=truths[i])
        for i in range(images)
    )
    model = RunModel()
    model.open(FolderSource(tmp_path, "name", items, "labels.csv"), 0, (), 1, names)
    overlay = Overlay.from_step((2, 2), np.full(4, 0.5), np.array([0]), np.array([3]))
    rows = []
    for i, truth in enumerate(truths):
        decided = truth if i % 3 else (truth + 1) % classes
        rows.append(
            PredictionRow(
                i,
                i,
                f"k{i}",
                f"img{i}.png",
                decided,
                names[decided],
                0.95,
                0.1,
                truth,
                names[truth],
                0.8,
                0.01,
                truth,
                names[truth],
                0.01,
            )
        )
    model.add_results([ItemResult(r, overlay, None, np.zeros(1, np.float32)) for r in rows])
    return model


@pytest.mark.parametrize("classes", [400, 10_000])
def test_figures_cover_the_classes_present_not_every_class(tmp_path: Path, classes: int) -> None:
    model = _model(tmp_path, classes)
    figures = model.figures()
    shown = len(figures.dataset.classes)
    assert shown <= 24 and figures.dataset.confusion.shape == (shown, shown), "12 images: at most 24 classes"
    assert figures.dataset.labelled == 12 and figures.dataset.confident_errors == 4
    full = clinical_metrics(model.rows, model.classes)  # the full count agrees
    assert full.classes == figures.dataset.classes and (full.confusion == figures.dataset.confusion).all()


def test_a_few_classes_are_all_shown(tmp_path: Path) -> None:
    model = _model(tmp_path, ALL_CLASSES_UP_TO)
    assert len(model.figures().dataset.classes) == ALL_CLASSES_UP_TO


def test_the_reports_grow_with_the_classes_shown_only(tmp_path: Path) -> None:
    """Beyond the card's list of class names (shown, so it grows), the PDF's blocks and the JSON's
    figures are the same for 400 classes as for 10 000."""
    from controller_fakes import session_info

    from app.core.open_session import OpenSession
    from app.core.settings import AppSettings
    from app.reports.data import collect_report_data
    from app.worker.exporting import TabularExport
    from engine import ModelCard

    sizes = {}
    for classes in (400, 10_000):
        folder = tmp_path / str(classes)
        folder.mkdir()
        model = _model(folder, classes)
        state = OpenSession(AppSettings(), folder, persist_settings=False)
        info = session_info(folder)
        card = ModelCard(arch="vit_tiny_patch16_224", classes=model.classes, img_size=32)
        state.info = info.__class__(**{**info.__dict__, "card": card})
        data = collect_report_data(model, state, lambda: b"")
        assert data is not None
        export = TabularExport(folder / "out", data, lambda _p: None, threading.Event())
        for _ in export.steps():
            pass
        blocks = report_blocks(export.data, width=680)
        document = config_document(export.data)
        sizes[classes] = (
            len(blocks) - len(class_blocks(export.data)),
            len(json.dumps(document["metrics"])),
            max(len(b.html) for b in blocks if b not in class_blocks(export.data)),
        )
        assert "Most frequent confusions" in " ".join(b.html for b in blocks)
    assert sizes[400][0] == sizes[10_000][0], sizes
    assert sizes[10_000][1] < 3 * sizes[400][1] and sizes[10_000][2] < 3 * sizes[400][2], sizes


def test_only_a_two_class_model_has_a_positive_class_in_the_report() -> None:
    """The four-class tissue demo's PDF said "Positive class: normal": the card's field only names
    the class whose probability the CSV's p_positive column gives."""
    from types import SimpleNamespace

    from app.reports.pdf_sections import card_pairs

    def table(classes: list[str]) -> dict[str, object]:
        card = {"classes": classes, "positive_class": 1, "arch": "vit", "img_size": 96}
        data = SimpleNamespace(
            card=card, model_path="m", model_description="d", weights_sha256="", model_fingerprint="f"
        )
        return dict(card_pairs(data))  # type: ignore[arg-type]

    assert table(["normal", "tumor"])["Positive class"] == "tumor"
    four = table(["inflamed", "normal", "stroma", "tumour"])
    assert "Positive class" not in four
    assert four["Class of the CSV's p_positive (its probability)"] == "normal"
