"""What is known of one site's images without labels, and what each rule of its ladder decides.

:class:`SiteImages` holds a site's label-free record in arrival order (the decisions reported,
the source model's, the source margin, the candidates' thresholds, I-DiPT's prompted decision);
:func:`rule_decisions` gives a rule's decisions on it (``engine.review.ladder``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.review.comparison import LABEL_FREE, PROMPTED, SOURCE_RULE

#: :attr:`SiteImages.prompted` of an image whose prompted decision is still to be made (on demand).
PROMPTED_PENDING = -2


@dataclass(frozen=True)
class SiteImages:
    """What is known of one site's images without labels, in arrival order.

    Attributes:
        reported: ``(n,)`` the label-free decision reported when each image arrived.
        source: ``(n,)`` the source model's decision (A0).
        threshold: ``(n,)`` the label-free threshold on the margin in use when each image arrived
            (A1; 0 is the source's own; None: the decisions are not thresholds, ``reported`` stands).
        margin: ``(n,)`` the source margin ``l_1 - l_0`` (nan: none kept); with more than two
            classes, the log-probability of the most likely class other than the reference class
            less the reference class's (``classes``).
        candidates: per candidate, ``(n,)`` its threshold when each image was decided (nan: none yet).
        prompted: ``(n,)`` I-DiPT's prompted decision (-1: not computed; :data:`PROMPTED_PENDING`:
            not yet, its prompt step runs when the ladder reaches that candidate).
        classes: ``(n, 2)`` with more than two classes, each image's reference class and that other
            class: a threshold calls the second where the margin exceeds it, the first elsewhere
            (None: two classes, 0 and 1).
        decided: per candidate that is not a threshold but decides each image itself when it is
            processed (with more than two classes, the class-balance correction:
            ``engine.review.balance``), ``(n,)`` its decisions; a comparison freezes them as it
            freezes I-DiPT's prompted decisions.
    """

    reported: np.ndarray
    source: np.ndarray
    margin: np.ndarray
    threshold: np.ndarray | None = None
    candidates: Mapping[str, np.ndarray] = field(default_factory=dict)
    prompted: np.ndarray | None = None
    classes: np.ndarray | None = None
    decided: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.reported.shape[0])

    def head(self, n: int) -> SiteImages:
        """The first ``n`` images."""
        return SiteImages(
            self.reported[:n],
            self.source[:n],
            self.margin[:n],
            None if self.threshold is None else self.threshold[:n],
            {k: v[:n] for k, v in self.candidates.items()},
            None if self.prompted is None else self.prompted[:n],
            None if self.classes is None else self.classes[:n],
            {k: v[:n] for k, v in self.decided.items()},
        )

    def candidate_at(self, name: str, n: int) -> float | None:
        """What a comparison of candidate ``name`` started on the first ``n`` images freezes: its
        threshold then (a threshold candidate), nan (a candidate in :attr:`decided`), None (the
        site has no such candidate)."""
        if name in self.candidates:
            return float(self.candidates[name][n - 1])
        return math.nan if name in self.decided else None

    def calls(self, threshold: float | np.ndarray, n: int | None = None, other: int = -1) -> np.ndarray:
        """The decisions of a threshold on the margin for the first ``n`` images (all: None);
        ``other``: the class the images it moves from the reference class are called (:func:`calls`)."""
        n = len(self) if n is None else n
        return calls(self.margin[:n], None if self.classes is None else self.classes[:n], threshold, other)

    def latest_threshold(self, n: int) -> float:
        """A1's threshold after the first ``n`` images (nan when A1 is not a threshold)."""
        if self.threshold is None or n == 0 or not np.isfinite(self.margin[:n]).all():
            return math.nan
        return float(self.threshold[n - 1])


def calls(
    margin: np.ndarray, classes: np.ndarray | None, threshold: float | np.ndarray, other: int = -1
) -> np.ndarray:
    """A threshold's decisions: where ``margin`` exceeds it class 1 (``classes`` given: each image's
    second class), elsewhere class 0 (its first); see :class:`SiteImages`. With more than two
    classes, ``other`` (0 or more) is the class called where the threshold moves an image from its
    reference class (a margin above the threshold, at or below 0); images above 0, which the source
    model already calls their second class, keep it (-1: every image its own second class)."""
    above = margin > threshold
    if classes is None:
        return above.astype(np.int64)
    second = classes[:, 1] if other < 0 else np.where(margin > 0, classes[:, 1], other)
    out: np.ndarray = np.where(above, second, classes[:, 0]).astype(np.int64)
    return out


def site_seed(seed: int, site: str) -> int:
    """A stable integer for ``(seed, site)`` (the site's random orders do not depend on hashing)."""
    return (int(seed) * 1_000_003 + zlib.crc32(site.encode("utf-8", "surrogateescape"))) & 0x7FFFFFFF


def rule_decisions(images: SiteImages, rule: str, threshold: float, n: int, other: int = -1) -> np.ndarray:
    """The decisions of ``rule`` (with its frozen ``threshold`` and, a threshold fitted to the
    answers at a site of more than two classes, the ``other`` class it calls: :func:`calls`) for
    the first ``n`` images."""
    if rule == LABEL_FREE:
        latest = images.latest_threshold(len(images))
        if math.isnan(latest):
            return images.reported[:n].copy()
        return images.calls(latest, n)
    if rule == SOURCE_RULE:
        return images.source[:n].copy()
    if rule == PROMPTED:
        prompted = images.prompted[:n] if images.prompted is not None else np.full(n, -1)
        return np.where(prompted >= 0, prompted, images.reported[:n])
    if rule in images.decided and rule not in images.candidates:
        return images.decided[rule][:n].copy()
    return images.calls(threshold, n, other)
