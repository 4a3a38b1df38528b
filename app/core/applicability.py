"""Does the model apply to these images? Checks the app makes before and while a run goes (Qt-free).

* **Sub-folder names**: a folder's class sub-folders give ground truth only when they are named
  after the model's classes; a ``glaucoma/`` folder opened with a histology model is named in a
  warning instead of being silently treated as unlabelled.
* **One-class collapse**: when nearly every prediction falls in one class (and the ground truth,
  where there is any, does not say so), the model probably does not apply.
* **Image kind**: fundus photographs (a bright disc on black corners) and bright-field histology
  look different enough for a simple test on the previews; when the images look like the other
  kind than the model was trained on, the app offers the matching demo model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

import numpy as np

from app._engine import FolderSource, ModelCard, PredictionRow

Kind = Literal["histology", "fundus"]
KIND_NAMES: dict[str, str] = {"histology": "histology", "fundus": "fundus photographs"}
# Synthetic-data kinds recorded in model cards (``training.dataset.synth.kind``) -> image kind.
_SYNTH_KINDS: dict[str, Kind] = {"histo": "histology", "lesion": "histology", "fundus": "fundus"}
_FUNDUS_CLASSES = {"glaucoma", "referable", "dr", "retinopathy", "amd", "cataract"}
_HISTOLOGY_CLASSES = {"tumor", "tumour", "metastasis", "stroma", "lymphocytes", "necrosis", "mucosa"}

COLLAPSE_SHARE = 0.95  # share of predictions in one class that counts as a collapse
COLLAPSE_MIN_IMAGES = 20  # predictions needed before the share means anything
MANY_FOLDERS = 20  # more unmatched sub-folders than this look like patients or batches, not labels


def subfolder_warning(source: FolderSource, classes: Sequence[str]) -> str | None:
    """A warning when image sub-folders are not named after the model's classes (None: fine).

    Ground truth from a labels file takes precedence over folder names, so no warning then; many
    unmatched sub-folders (patients, batches) are not diagnoses, so no warning either.
    """
    if source.label_origin not in (None, "class sub-folders"):
        return None
    lowered = {c.lower() for c in classes}
    unmatched: Counter[str] = Counter()
    for item in source.items:
        parent = PurePosixPath(item.key).parent.name
        if item.ground_truth is None and parent and parent.lower() not in lowered:
            unmatched[parent] += 1
    if not unmatched or len(unmatched) > MANY_FOLDERS:
        return None
    named = ", ".join(f"'{name}' ({count} images)" for name, count in sorted(unmatched.items())[:5])
    verb = "is not a class" if len(unmatched) == 1 else "are not classes"
    return (
        f"Sub-folder{'s' if len(unmatched) > 1 else ''} {named} {verb} of this model "
        f"({', '.join(classes)}): {'its' if len(unmatched) == 1 else 'their'} images count as unlabelled. "
        "If the folder names are diagnoses, this model may not apply to these images."
    )


@dataclass(frozen=True)
class Collapse:
    """Nearly every prediction fell in one class."""

    label: str
    count: int
    total: int
    mean_confidence: float

    def text(self) -> str:
        return (
            f"Nearly every prediction is '{self.label}' ({self.count} of {self.total} images, mean "
            f"confidence {self.mean_confidence:.2f}). The model may not apply to these images."
        )


def one_class_collapse(rows: Sequence[PredictionRow]) -> Collapse | None:
    """The collapse of ``rows`` onto one predicted class, or None.

    Rows whose ground truth (known for most of them) mostly is that class do not count as a
    collapse: a folder of tumours predicted as tumour is right, not collapsed.
    """
    if len(rows) < COLLAPSE_MIN_IMAGES:
        return None
    counts = Counter(r.prediction for r in rows)
    top, count = counts.most_common(1)[0]
    if count < COLLAPSE_SHARE * len(rows):
        return None
    truths = [r.ground_truth for r in rows if r.ground_truth is not None]
    if len(truths) >= 0.8 * len(rows) and sum(t == top for t in truths) >= 0.8 * len(truths):
        return None
    label = next(r.prediction_label for r in rows if r.prediction == top)
    confidence = float(np.mean([r.confidence for r in rows if r.prediction == top]))
    return Collapse(label, count, len(rows), confidence)


def image_kind(rgb: np.ndarray) -> Kind | None:
    """``"fundus"`` for a bright field on dark corners, ``"histology"`` for a bright stained field.

    Args:
        rgb: ``(H, W, 3)`` uint8 image (a preview is enough).
    """
    if rgb.ndim != 3 or rgb.shape[0] < 8 or rgb.shape[1] < 8:
        return None
    h, w = rgb.shape[:2]
    c = max(2, min(h, w) // 8)
    corners = np.concatenate([rgb[:c, :c], rgb[:c, -c:], rgb[-c:, :c], rgb[-c:, -c:]], axis=0).reshape(
        -1, rgb.shape[2]
    )
    centre = rgb[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].astype(np.float64)
    dark_corners = float((corners[:, :3].max(axis=1) < 40).mean())
    if dark_corners >= 0.7 and centre.mean() > 40:
        return "fundus"
    if dark_corners < 0.2 and centre.mean() > 110:
        return "histology"
    return None


def dominant_kind(images: Iterable[np.ndarray]) -> Kind | None:
    """The kind most images have, when at least two thirds of those recognised agree."""
    kinds = Counter(k for k in (image_kind(im) for im in images) if k is not None)
    if not kinds:
        return None
    kind, count = kinds.most_common(1)[0]
    return kind if count >= 2 / 3 * sum(kinds.values()) else None


def model_kind(card: ModelCard) -> Kind | None:
    """What images a model was trained on, from its card (synthetic-data record, class names, mpp)."""
    training = card.training if isinstance(card.training, dict) else {}
    dataset = training.get("dataset")
    synth = dataset.get("synth") if isinstance(dataset, dict) else None
    if isinstance(synth, dict) and synth.get("kind") in _SYNTH_KINDS:
        return _SYNTH_KINDS[str(synth["kind"])]
    names = {c.lower() for c in card.classes}
    if names & _FUNDUS_CLASSES:
        return "fundus"
    if names & _HISTOLOGY_CLASSES or card.mpp is not None:
        return "histology"
    return None
