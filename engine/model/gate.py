"""Does the model apply to these images? One gate for ``f2tta run`` and the app, before a run.

Each check gives a warning in words, or nothing:

* **image kind**: fundus photographs and bright-field histology look different enough for a
  simple test (:mod:`engine.model.kind`); images of the other kind than the model was trained
  on get a warning (a slide is histology). Up to :data:`GATE_SAMPLES` of a folder's images are
  judged, one at a seeded random position in each of as many equal parts of the folder
  (:func:`sample_positions`), so no part goes unread and no fixed position decides; the warning
  says what share of them looks like another kind, and a mixed folder (at least
  :data:`MIXED_SHARE` of them, and :data:`MIXED_MIN` images, of another kind) fires too.
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
from engine.model.kind import KIND_NAMES, KindTally, model_kind

#: Images read from a folder to judge its kind (one in each of as many parts of the folder): a
#: sixth of another kind is found (3 or more of 48) 99 times in 100 and a tenth 87 times in 100
#: (binomial; the stratified sample does better), and one image in a hundred misjudged makes a
#: folder look mixed about once in 80 folders.
GATE_SAMPLES = 48
#: Share of the sampled images of another kind than the model's that makes a folder mixed ...
MIXED_SHARE = 0.05
#: ... when they are at least this many (one or two odd images are not a mixture).
MIXED_MIN = 3
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


def kind_warning(judged: KindTally, card: ModelCard, total: int | None = None) -> str | None:
    """A warning when the judged images look like another kind than the model was trained on,
    all or most of them, or a share that makes the folder mixed.

    Args:
        judged: the sampled images' kinds (:func:`judge_source`).
        total: the folder's images, to estimate how many look like another kind (None: a slide,
            no share is given).
    """
    trained = model_kind(card)
    if trained is None or not judged.judged:
        return None
    others = Counter({k: n for k, n in judged.counts.items() if k != trained})
    if not others:
        return None
    kind, count = others.most_common(1)[0]
    share = count / judged.judged
    if total is None:
        sampled = ""
    elif judged.judged >= total:
        sampled = f"{count} of its {total} images ({100 * share:.0f} %) look like {KIND_NAMES[kind]}."
    else:
        sampled = (
            f"{count} of the {judged.judged} images sampled across the folder (about {100 * share:.0f} %, "
            f"some {round(share * total)} of its {total}) look like {KIND_NAMES[kind]}."
        )
    verdict = judged.verdict()
    if verdict is not None and verdict != trained:
        return (
            f"These images look like {KIND_NAMES[verdict]}, but the model was trained on {KIND_NAMES[trained]}: "
            f"the model may not apply, and its figures may mean nothing. {sampled}"
        ).strip()
    if count >= MIXED_MIN and share >= MIXED_SHARE:
        return (
            f"A mixed folder: {sampled} The model was trained on {KIND_NAMES[trained]}: it may not apply to "
            "those images, and the figures mix them in with the others."
        )
    return None


def sample_positions(n: int, samples: int = GATE_SAMPLES, seed: int = 0) -> list[int]:
    """``samples`` positions of ``n``, one at a seeded random place in each of ``samples`` equal
    parts (the part of position ``p`` is ``p * samples // n``); all of them when ``n <= samples``."""
    if n <= samples:
        return list(range(n))
    rng = np.random.default_rng([seed, n, samples])
    return [int(rng.integers(-(-i * n // samples), -(-(i + 1) * n // samples))) for i in range(samples)]


def _small(paths: Iterable[object]) -> Iterable[np.ndarray]:
    for path in paths:
        try:
            img = read_image(str(path))
        except (ImageReadError, OSError):
            continue
        img.thumbnail((_JUDGE_SIDE, _JUDGE_SIDE))
        yield np.asarray(img)


def judge_source(source: Source, samples: int = GATE_SAMPLES, seed: int = 0) -> KindTally:
    """What ``source``'s images look like: a folder's read small at :func:`sample_positions`
    (unreadable ones say nothing); a slide is bright-field histology."""
    if isinstance(source, SlideSource):
        return KindTally.known("histology")
    items = source.items
    positions = sample_positions(len(items), samples, seed)
    tally = KindTally(len(positions))
    for image in _small(items[p].path for p in positions if items[p].path is not None):
        tally.add(image)
    return tally


def check_source(source: Source, card: ModelCard, judged: KindTally | None = None) -> tuple[GateWarning, ...]:
    """Every check on ``source`` for the model of ``card``.

    Args:
        judged: the images' kinds when already judged (:func:`judge_source`; the app judges
            while it opens); None judges them here.
    """
    warnings = []
    judged = judged if judged is not None else judge_source(source)
    if isinstance(source, SlideSource):
        if not source.plan.matched and source.plan.warning:
            warnings.append(GateWarning("resolution", source.plan.warning))
    else:
        ordered = class_sorted_warning([it.ground_truth for it in source.items], card.classes)
        if ordered:
            warnings.append(GateWarning("class-sorted", ordered))
    kind = kind_warning(judged, card, None if isinstance(source, SlideSource) else len(source.items))
    if kind:
        warnings.insert(0, GateWarning("image-kind", kind))
    return tuple(warnings)
