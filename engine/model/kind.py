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


#: A frame line's pixels stay within this many grey levels of the line's median, ...
_FRAME_TOLERANCE = 12
#: ... but for this share of them (noise, a scale bar's tip).
_FRAME_OUTLIERS = 0.05
#: At most this share of each side is taken for a frame.
_MAX_FRAME = 0.25


def _uniform(line: np.ndarray) -> bool:
    """Whether a row or column of ``(n, 3)`` pixels is one colour (a frame's, or a black surround)."""
    median = np.median(line, axis=0)
    off = (np.abs(line.astype(np.int16) - median) > _FRAME_TOLERANCE).any(axis=1)
    return float(off.mean()) <= _FRAME_OUTLIERS


def strip_frame(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` without the rows and columns of one colour at its edges (at most a quarter of each side).

    A frame or border (a black line round a histology tile, a white margin round a scanned
    photograph) then does not decide the kind; a fundus photograph's black surround goes only up
    to the disc, so its corners stay dark.
    """
    h, w = rgb.shape[:2]
    top, bottom, left, right = 0, h, 0, w
    while top < int(h * _MAX_FRAME) and _uniform(rgb[top, left:right]):
        top += 1
    while h - bottom < int(h * _MAX_FRAME) and _uniform(rgb[bottom - 1, left:right]):
        bottom -= 1
    while left < int(w * _MAX_FRAME) and _uniform(rgb[top:bottom, left]):
        left += 1
    while w - right < int(w * _MAX_FRAME) and _uniform(rgb[top:bottom, right - 1]):
        right -= 1
    return rgb[top:bottom, left:right]


def image_kind(rgb: np.ndarray) -> Kind | None:
    """``"fundus"`` for a bright field on dark corners, ``"histology"`` for a bright stained field,
    judged inside any frame (:func:`strip_frame`).

    Args:
        rgb: ``(H, W, 3)`` uint8 image (a preview is enough).
    """
    if rgb.ndim != 3 or rgb.shape[0] < 8 or rgb.shape[1] < 8:
        return None
    rgb = strip_frame(rgb[..., :3])
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

    @classmethod
    def known(cls, kind: Kind) -> KindTally:
        """The tally of a source whose kind is known without judging (a bright-field slide)."""
        tally = cls(1)
        tally.judged, tally.counts[kind] = 1, 1
        return tally

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
