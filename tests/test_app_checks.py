"""Qt-free checks behind the app's guards and clinical figures: sub-folder names, class-sorted
streams, one-class collapse, image kind, per-class metrics, the review and overlay files, the PDF's
pagination and the names shown to users."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from app_fixtures import CLASSES, make_folder, sample_row

from app.core.applicability import (
    dominant_kind,
    image_kind,
    model_kind,
    one_class_collapse,
    subfolder_warning,
)
from app.core.arrival import class_sorted_warning
from app.core.clinical import clinical_metrics, confident_errors
from app.core.names import describe_model, method_label, readable_help
from app.core.overlay import Overlay
from app.core.reviews import OverlayStore
from app.reports.pdf import paginate
from engine import DEFAULT_METHOD, ModelCard, get_method_class, list_methods, open_folder
from engine.io.arrival import class_runs
from engine.review.marks import MarkStore, ReviewMark


def test_subfolders_that_are_not_classes_are_named(tmp_path: Path) -> None:
    root = tmp_path / "eyes"
    for sub, n in (("glaucoma", 3), ("normal", 2)):
        (root / sub).mkdir(parents=True)
        for i in range(n):
            (root / sub / f"{i}.png").write_bytes(b"")
    source = open_folder(root, CLASSES)
    text = subfolder_warning(source, CLASSES)
    assert text is not None and "'glaucoma' (3 images)" in text and "normal, tumor" in text
    matching = open_folder(make_folder(tmp_path, 6, labelled="folders"), CLASSES)
    assert subfolder_warning(matching, CLASSES) is None, "class sub-folders are fine"
    flat = open_folder(make_folder(tmp_path / "flat", 4, labelled="none"), CLASSES)
    assert subfolder_warning(flat, CLASSES) is None, "no sub-folders, nothing to say"


def test_class_sorted_stream_is_warned_and_interleaving_mixes_it(tmp_path: Path) -> None:
    source = open_folder(make_folder(tmp_path, 24, labelled="folders"), CLASSES)
    truths = [it.ground_truth for it in source.items]
    assert class_runs([t for t in truths if t is not None]) == [(0, 12), (1, 12)]
    text = class_sorted_warning(source, CLASSES)
    assert text is not None and "normal ×12 → tumor ×12" in text
    mixed = open_folder(source.root, CLASSES, "interleaved", seed=0)
    assert [it.position for it in mixed.items] == list(range(24))
    assert sorted(it.key for it in mixed.items) == sorted(it.key for it in source.items)
    assert class_sorted_warning(mixed, CLASSES) is None
    again = open_folder(source.root, CLASSES, "interleaved", seed=0)
    assert [it.key for it in again.items] == [it.key for it in mixed.items], "seeded"
    other = open_folder(source.root, CLASSES, "interleaved", seed=1)
    assert [it.key for it in other.items] != [it.key for it in mixed.items]
    labels_csv = open_folder(make_folder(tmp_path / "csv", 24, labelled="csv"), CLASSES)
    assert class_sorted_warning(labels_csv, CLASSES) is None, "alternating labels are not sorted"


def test_one_class_collapse_unless_the_truth_agrees() -> None:
    rows = [sample_row(i, pred=1, conf=0.99) for i in range(19)]
    assert one_class_collapse(rows) is None, "too few images to say"
    rows.append(sample_row(19, pred=1, conf=0.97))
    found = one_class_collapse(rows)
    assert found is not None and (found.label, found.count, found.total) == ("tumor", 20, 20)
    assert found.mean_confidence == pytest.approx(np.mean([0.99] * 19 + [0.97]))
    assert "Nearly every prediction is 'tumor' (20 of 20" in found.text()
    tumours = [sample_row(i, pred=1, truth=1) for i in range(20)]
    assert one_class_collapse(tumours) is None, "a folder of tumours called tumour is right"
    mixed = [sample_row(i, pred=i % 2) for i in range(20)]
    assert one_class_collapse(mixed) is None


def test_image_kind_tells_fundus_from_histology() -> None:
    from lab.synth import generate_arrays

    fundus, _ = generate_arrays("fundus", "site2", 4, size=64, seed=3)
    histo, _ = generate_arrays("histo", "site2", 4, size=64, seed=3)
    assert [image_kind(im) for im in fundus] == ["fundus"] * 4
    assert [image_kind(im) for im in histo] == ["histology"] * 4
    assert dominant_kind([*fundus, histo[0]]) == "fundus"
    assert dominant_kind([fundus[0], histo[0]]) is None, "no two-thirds majority"
    card = ModelCard(arch="vit_tiny_patch16_224", classes=("glaucoma", "normal"), img_size=32)
    assert model_kind(card) == "fundus"
    assert model_kind(ModelCard(arch="vit_tiny_patch16_224", classes=CLASSES, img_size=32)) == "histology"


def test_per_class_metrics_and_confident_errors() -> None:
    # truth tumor (1): 4 images, 2 called normal (one at 0.95); truth normal (0): 3, all right.
    rows = [
        sample_row(0, pred=1, src=1, truth=1),
        sample_row(1, pred=1, src=0, truth=1),
        sample_row(2, pred=0, src=0, truth=1, conf=0.95),
        sample_row(3, pred=0, src=1, truth=1, conf=0.6),
        *[sample_row(4 + i, pred=0, src=0, truth=0) for i in range(3)],
        sample_row(7, pred=1, src=1),  # no truth: not counted
    ]
    m = clinical_metrics(rows, CLASSES)
    assert m.confusion.tolist() == [[3, 0], [2, 2]] and m.labelled == 7
    assert m.source_confusion.tolist() == [[3, 0], [2, 2]]
    normal, tumor = m.per_class
    assert (tumor.sensitivity, tumor.specificity, tumor.precision) == (0.5, 1.0, 1.0)
    assert (normal.sensitivity, normal.specificity) == (1.0, 0.5) and normal.precision == pytest.approx(3 / 5)
    assert m.confident_errors == 1 and [r.index for r in confident_errors(rows)] == [2]
    empty = clinical_metrics([sample_row(0)], CLASSES)
    assert empty.labelled == 0 and math.isnan(empty.accuracy) and math.isnan(empty.per_class[0].sensitivity)


def test_review_marks_and_overlays_are_kept(tmp_path: Path) -> None:
    store = MarkStore(tmp_path / "review", "/data/site", 2)
    store.put(ReviewMark("a.png", 1, 1, "2026-11-27T10:00:01+00:00"))
    store.put(ReviewMark("b.png", 0, 1, "2026-11-27T10:00:02+00:00"))
    store.put(ReviewMark("a.png", 0, 1, "2026-11-27T10:00:03+00:00"))  # changed mind: the last mark wins
    store.clear("b.png")
    store.close()
    with open(store.path, "a") as fh:
        fh.write('{"k": "c.png", "lab')  # cut short by a crash
    written = store.path.read_bytes()
    marks = MarkStore(tmp_path / "review", "/data/site", 2).load().marks
    assert marks == {"a.png": ReviewMark("a.png", 0, 1, "2026-11-27T10:00:03+00:00")}
    assert not marks["a.png"].confirmed
    assert store.path.read_bytes() == written, "reading never rewrites the marks (issue 42, item 1)"

    overlays = OverlayStore(tmp_path / "review", "/data/site")
    heat = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    made = Overlay.from_step((4, 4), heat, np.array([1, 5]), np.array([0, 15]))
    overlays.add("a.png", made)
    overlays.add("gone.png", made)
    overlays.close()
    back = OverlayStore(tmp_path / "review", "/data/site").load(["a.png"])["a.png"]
    assert back.grid == (4, 4) and back.uncertainty is not None
    np.testing.assert_array_equal(back.uncertainty, made.uncertainty)
    assert back.uncertain_tokens.tolist() == [1, 5] and back.reliable_tokens.tolist() == [0, 15]
    files = sorted(p.name for p in (tmp_path / "review").iterdir())
    assert len(files) == 2 and all(len(f.split(".")[0]) == 16 for f in files)
    lines = [json.loads(x) for x in (tmp_path / "review" / files[1]).read_text().splitlines()]
    assert [r["k"] for r in lines] == ["a.png"], "overlays of images no longer in the journal are dropped"
    assert len(json.dumps(lines[0])) < 200, "compact: a few hundred bytes per image"


def test_pdf_blocks_never_split_and_keep_headings_with_content() -> None:
    pages = paginate([300, 300, 300, 500, 100], page_height=1000, breaks=[False, False, False, False, True])
    assert pages == [[0, 1, 2], [3], [4]]
    assert paginate([1200, 10], 1000, [False, False]) == [[0], [1]], (
        "an oversized block gets a page of its own"
    )


def test_method_names_are_readable_and_the_default_comes_from_the_engine() -> None:
    labels = {name: get_method_class(name).label for name in list_methods()}
    assert all(labels.values()), f"every method has a readable name: {labels}"
    assert all(" " in label for label in labels.values()), "no bare acronyms"
    assert method_label(DEFAULT_METHOD).endswith("· default")
    assert "T_U" not in readable_help("K: percent of patch tokens in T_U and in T_R")
    card = ModelCard(
        arch="vit_tiny_patch16_224", classes=CLASSES, img_size=96, model_kwargs={"patch_size": 12, "depth": 4}
    )
    assert describe_model(card) == "ViT-Tiny, 4 blocks, 12-px patches, 96 px input"
