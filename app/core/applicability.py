"""Does the model apply to these images? Checks the app makes before and while a run goes (Qt-free).

* **Sub-folder names**: a folder's class sub-folders give ground truth only when they are named
  after the model's classes; a ``glaucoma/`` folder opened with a histology model is named in a
  warning instead of being silently treated as unlabelled.
* **One-class collapse**: when nearly every prediction falls in one class (and the ground truth,
  where there is any, does not say so), the model probably does not apply.
* **Image kind**: the engine's judge (``engine/model/kind.py``, re-exported here) tells fundus
  photographs from bright-field histology on previews; when the images look like the other kind
  than the model was trained on, the app offers the matching demo model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

from app._engine import FolderSource, Kind, PredictionRow, dominant_kind, image_kind, model_kind

KIND_NAMES: dict[str, str] = {"histology": "histology", "fundus": "fundus photographs"}

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


__all__ = [
    "COLLAPSE_MIN_IMAGES",
    "COLLAPSE_SHARE",
    "KIND_NAMES",
    "MANY_FOLDERS",
    "Collapse",
    "Kind",
    "dominant_kind",
    "image_kind",
    "model_kind",
    "one_class_collapse",
    "subfolder_warning",
]
