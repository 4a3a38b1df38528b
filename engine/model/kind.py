"""What kind of image a model was trained on, and what kind a stream's images are: the one judge.

Fundus photographs (a bright disc on black corners) and bright-field histology (a bright stained
field to the edges) look different enough for a simple test on small previews. The app judges a
folder when it opens and keeps judging the previews of a run; ``docs/app.md`` describes the
warnings built on it. A verdict needs two thirds of the recognised images to agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal

import numpy as np

from engine.model.card import ModelCard

Kind = Literal["histology", "fundus"]
#: Each kind as a sentence names it.
KIND_NAMES: dict[str, str] = {"histology": "histology", "fundus": "fundus photographs"}
#: Images judged per source: when it opens, and again from a run's first previews.
KIND_SAMPLES = 24
#: Share of the recognised images that must agree for a verdict.
KIND_AGREEMENT = 2 / 3
# Synthetic-data kinds recorded in model cards (``training.dataset.synth.kind``) -> image kind.
_SYNTH_KINDS: dict[str, Kind] = {"histo": "histology", "lesion": "histology", "fundus": "fundus"}
_FUNDUS_CLASSES = {"glaucoma", "referable", "dr", "retinopathy", "amd", "cataract"}
_HISTOLOGY_CLASSES = {"tumor", "tumour", "metastasis", "stroma", "lymphocytes", "necrosis", "mucosa"}


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


class KindTally:
    """The kinds of up to :data:`KIND_SAMPLES` images, and the verdict they give."""

    def __init__(self, limit: int = KIND_SAMPLES) -> None:
        self.limit = limit
        self.judged = 0
        self.counts: Counter[Kind] = Counter()

    @property
    def full(self) -> bool:
        return self.judged >= self.limit

    def add(self, rgb: np.ndarray) -> None:
        """Judge one more image (ignored once :attr:`limit` images were judged)."""
        if self.full:
            return
        self.judged += 1
        kind = image_kind(rgb)
        if kind is not None:
            self.counts[kind] += 1

    def verdict(self) -> Kind | None:
        """The kind most judged images have, when :data:`KIND_AGREEMENT` of those recognised agree."""
        if not self.counts:
            return None
        kind, count = self.counts.most_common(1)[0]
        return kind if count >= KIND_AGREEMENT * sum(self.counts.values()) else None


def dominant_kind(images: Iterable[np.ndarray], limit: int = KIND_SAMPLES) -> Kind | None:
    """The verdict of a :class:`KindTally` over the first ``limit`` of ``images``."""
    tally = KindTally(limit)
    for image in images:
        tally.add(image)
        if tally.full:
            break
    return tally.verdict()


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
