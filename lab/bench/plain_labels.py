"""The plain uses of a reviewer's K answers: what the ladder's certificates are compared with.

The review ladder (``engine.review``) spends a site's K answers on testing rules fitted without
labels, one comparison at a time, and lets a rule decide only where a certificate covers it. Two
plainer uses of the same K labels are the comparators it has to beat (issue 37, item 5; active
test-time adaptation fits with a few labels):

* **best of K** (``best-of-K``): label K images of the site drawn uniformly at random from those
  processed when the reviewer comes, and let whichever rule is right most often on them decide
  the whole site: the source model, each candidate at its threshold then, I-DiPT's prompted
  decision (a tie goes to the source model, then to the earlier rule);
* **threshold on K** (``threshold-on-K``): the threshold on the source margin that makes the
  fewest errors on those K images decides the whole site (a tie goes to the threshold nearest the
  source model's own, 0; a model with more than two classes keeps the source model's decisions).

Neither certifies anything, and both decide every later image as well. The K images are the
same for both (seeded by the stream and the site). Where sites are told and a site was decided
in several units, its K labels are shared over the units in proportion to their images.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

BEST, THRESHOLD = "best-of-K", "threshold-on-K"
PLAIN_USES = (BEST, THRESHOLD)


def _shares(sizes: list[int], budget: int) -> list[int]:
    """``budget`` split over units in proportion to their sizes (largest remainder)."""
    total = sum(sizes)
    if total == 0:
        return [0] * len(sizes)
    exact = [budget * s / total for s in sizes]
    out = [math.floor(e) for e in exact]
    for k in sorted(range(len(sizes)), key=lambda k: exact[k] - out[k], reverse=True)[: budget - sum(out)]:
        out[k] += 1
    return [min(o, s) for o, s in zip(out, sizes, strict=True)]


def fitted_threshold(margins: np.ndarray, labels: np.ndarray) -> float:
    """The threshold on the source margin (class 1 above it) with the fewest errors on these
    labelled images; among ties the one nearest 0 (the source model's own)."""
    if margins.size == 0:
        return 0.0
    values = np.sort(np.unique(margins))
    cuts = np.r_[0.0, (values[:-1] + values[1:]) / 2.0, values[0] - 1.0, values[-1]]
    errors = [int(np.sum((margins > t).astype(np.int64) != labels)) for t in cuts]
    best = min(errors)
    return float(min((t for t, e in zip(cuts, errors, strict=True) if e == best), key=abs))


def plain_uses(
    source: np.ndarray,
    margin: np.ndarray,
    candidates: Mapping[str, np.ndarray],
    prompted: np.ndarray | None,
    unit: np.ndarray,
    marks: np.ndarray,
    budget: int,
    review_at: float = 1.0,
    seed: int = 0,
    site: np.ndarray | None = None,
    reported: np.ndarray | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per plain use, ``(retroactive, online)`` decisions of one stream (module docstring).

    Args:
        source: ``(N,)`` the source model's decisions, in arrival order.
        margin: ``(N,)`` the source margins (nan: not a two-class decision).
        candidates: per candidate, ``(N,)`` its threshold when each image was decided.
        prompted: ``(N,)`` I-DiPT's prompted decisions (None or -1: not computed).
        unit: ``(N,)`` the site or site group each image was decided in (-1: none, not reviewed).
        marks: ``(N,)`` the reviewer's answers (the labels, or noisy labels).
        budget: K, labelled images per site.
        review_at: the share of a site's images processed when the reviewer comes.
        seed: seeds which images are labelled.
        site: ``(N,)`` the told site of each image (None: every unit is a site).
        reported: ``(N,)`` what was shown before the reviewer came (None: the source model's).
    """
    shown = (source if reported is None else reported).astype(np.int64)
    out = {use: (shown.copy(), shown.copy()) for use in PLAIN_USES}
    two_class = margin.size > 0 and bool(np.isfinite(margin).all())
    groups: list[list[int]] = []
    if site is None:
        groups = [[int(u)] for u in np.unique(unit[unit >= 0])]
    else:
        for s in dict.fromkeys(site[unit >= 0].tolist()):
            groups.append(list(dict.fromkeys(int(u) for u in unit[site == s] if u >= 0)))
    for g, units in enumerate(groups):
        ats = [np.flatnonzero(unit == u) for u in units]
        moments = [max(1, math.ceil(review_at * at.size)) for at in ats]
        shares = _shares(moments, budget)
        for u, at, moment, k in zip(units, ats, moments, shares, strict=True):
            rng = np.random.default_rng([seed, 41, g, u])
            asked = at[rng.choice(moment, size=min(k, moment), replace=False)] if k else at[:0]
            y = marks[asked]
            rules: list[np.ndarray] = [source[at].astype(np.int64)]
            if two_class:
                for values in candidates.values():
                    t = float(values[at[moment - 1]])
                    if math.isfinite(t):
                        rules.append((margin[at] > t).astype(np.int64))
            if prompted is not None and bool((prompted[at] >= 0).all()):
                rules.append(prompted[at].astype(np.int64))
            local = np.searchsorted(at, asked)
            scores = [int(np.sum(r[local] == y)) for r in rules]
            best = rules[int(np.argmax(scores))]  # the first of the best: the source model on a tie
            threshold = (
                (margin[at] > fitted_threshold(margin[asked], y)).astype(np.int64)
                if two_class and asked.size
                else source[at].astype(np.int64)
            )
            for use, decided in ((BEST, best), (THRESHOLD, threshold)):
                retro, online = out[use]
                retro[at] = decided
                online[at[moment:]] = decided[moment:]
    return out
