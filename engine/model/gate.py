"""Does the model apply to these images? One gate for ``f2tta run`` and the app, before a run.

Each check gives a warning in words, or nothing:

* **image kind**: fundus photographs and bright-field histology look different enough for a
  simple test (:mod:`engine.model.kind`); images of the other kind than the model was trained
  on get a warning (a slide is histology).
* **class-sorted stream**: labelled images arriving class by class (:mod:`engine.io.arrival`).
* **resolution**: a slide whose tiles cannot be cut at the model's training resolution.

:func:`subfolder_warning` (sub-folders that are not the model's classes, e.g. ``glaucoma/`` with
a histology model) lives here too, but is advice, not part of the gate: folders are often
sorted by date, batch or patient, and the app shows it as a banner with its fixes.

``f2tta run`` prints the warnings and stops before any image with exit code 4 unless
``--accept-warnings`` is given; the app shows them and marks every figure computed under them
as "model may not apply" (``docs/app.md``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

from engine.errors import F2TTAError, ImageReadError
from engine.io.arrival import class_sorted_warning
from engine.io.images import read_image
from engine.io.sources import FolderSource, SlideSource, Source
from engine.model.card import ModelCard
from engine.model.kind import KIND_NAMES, Kind, dominant_kind, model_kind

#: Images read from a folder to judge its kind (spread over the folder).
GATE_SAMPLES = 8
#: More unmatched sub-folders than this look like patients or batches, not labels.
MANY_FOLDERS = 20
#: Longest side an image is reduced to before its kind is judged.
_JUDGE_SIDE = 128


@dataclass(frozen=True)
class GateWarning:
    """One check that fired: its name (``image-kind``, ``class-sorted``, ``resolution``) and what
    to tell the user."""

    check: str
    message: str


class NotApplicableError(F2TTAError):
    """The gate fired and the warnings were not accepted (``f2tta run`` exit code 4)."""

    def __init__(self, warnings: Sequence[GateWarning]) -> None:
        self.warnings = tuple(warnings)
        super().__init__("; ".join(w.message for w in self.warnings))


def subfolder_warning(source: FolderSource, classes: Sequence[str]) -> str | None:
    """A warning naming sub-folders that are not classes of the model (None: nothing to say)."""
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


def kind_warning(looks: Kind | None, card: ModelCard) -> str | None:
    """A warning when the images look like another kind than the model was trained on."""
    trained = model_kind(card)
    if looks is None or trained is None or looks == trained:
        return None
    return (
        f"These images look like {KIND_NAMES[looks]}, but the model was trained on {KIND_NAMES[trained]}: "
        "the model may not apply, and its figures may mean nothing."
    )


def folder_kind(source: FolderSource, samples: int = GATE_SAMPLES) -> Kind | None:
    """What a few of the folder's images look like, read small (unreadable ones say nothing)."""
    items = source.items
    step = max(1, len(items) // max(samples, 1))
    return dominant_kind(
        _small(item.path for item in items[::step][:samples] if item.path is not None), samples
    )


def _small(paths: Iterable[object]) -> Iterable[np.ndarray]:
    for path in paths:
        try:
            img = read_image(str(path))
        except (ImageReadError, OSError):
            continue
        img.thumbnail((_JUDGE_SIDE, _JUDGE_SIDE))
        yield np.asarray(img)


def check_source(source: Source, card: ModelCard, looks: Kind | None = None) -> tuple[GateWarning, ...]:
    """Every check on ``source`` for the model of ``card``.

    Args:
        looks: the images' kind when already judged (the app judges while it opens); None reads
            a few of a folder's images (a slide is histology).
    """
    warnings = []
    if isinstance(source, SlideSource):
        looks = "histology"
        if not source.plan.matched and source.plan.warning:
            warnings.append(GateWarning("resolution", source.plan.warning))
    else:
        looks = looks if looks is not None else folder_kind(source)
        ordered = class_sorted_warning([it.ground_truth for it in source.items], card.classes)
        if ordered:
            warnings.append(GateWarning("class-sorted", ordered))
    kind = kind_warning(looks, card)
    if kind:
        warnings.insert(0, GateWarning("image-kind", kind))
    return tuple(warnings)
