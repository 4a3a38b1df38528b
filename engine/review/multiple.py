"""Many certificates in one report: e-BH keeps the share of false "verified" claims at most alpha.

A report lists every site of a project, and each site's ladder holds several comparisons
(``engine.review.ladder``). Each comparison is tested at its own level, so with dozens of
sites a few would be called better by chance. Before a report calls anything *verified*, the
comparisons' e-values (:meth:`engine.review.ladder.Comparison.e_value`) are combined by the
e-Benjamini-Hochberg procedure (Wang & Ramdas 2022, "False discovery rate control with
e-values", JRSSB 84(3)): with ``K`` e-values sorted from the largest, the first ``k*`` are
verified, ``k*`` the largest ``k`` with ``e_(k) >= K / (alpha k)``. The expected share of false
claims among those verified is at most ``alpha``, whatever the dependence between the
comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def e_bh(e_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Which hypotheses e-BH rejects (the claims it calls verified), in the input's order.

    Raises:
        ValueError: alpha outside (0, 1), or a negative or NaN e-value.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), not {alpha}")
    values = [float(e) for e in e_values]
    if any(math.isnan(e) or e < 0 for e in values):
        raise ValueError("e-values are numbers >= 0")
    k_total = len(values)
    ranked = sorted(range(k_total), key=lambda i: -values[i])
    keep = 0
    for k, i in enumerate(ranked, start=1):
        if values[i] >= k_total / (alpha * k):
            keep = k
    chosen = set(ranked[:keep])
    return [i in chosen for i in range(k_total)]
