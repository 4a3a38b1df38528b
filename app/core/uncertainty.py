"""The uncertainty of a prediction as a reader can use it: its rank within the site (Qt-free).

The mean patch uncertainty of a model is a small number (0.0020-0.0033 on every image of a site
is usual) whose size says little across models and sites; its rank among the images of the same
folder or slide says which images the model was least sure about. ``high`` is the top 10 % (the
table's "High uncertainty" filter), ``low`` below the median, ``medium`` between.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

HIGH_SHARE = 0.9  # at or above this share of the site's images: high (the top 10 %)
LOW_SHARE = 0.5  # below the median: low
MEANING = (
    "Uncertainty within this folder or slide: high = the top 10 % of its images (the "
    "“High uncertainty” filter), low = below the median, medium = between. "
    "Sorting orders by the figure itself."
)


class UncertaintyRanks:
    """The uncertainties of a site's images so far, sorted, to rank one among them."""

    def __init__(self) -> None:
        self._sorted: list[float] = []

    def add(self, values: Iterable[float]) -> None:
        for value in values:
            if math.isfinite(value):
                bisect.insort(self._sorted, value)

    def clear(self) -> None:
        self._sorted = []

    def __len__(self) -> int:
        return len(self._sorted)

    def share_below(self, value: float) -> float:
        """The share of the site's images with a lower uncertainty (nan without one)."""
        if not (math.isfinite(value) and self._sorted):
            return math.nan
        return bisect.bisect_left(self._sorted, value) / len(self._sorted)

    def band(self, value: float) -> str:
        """``low``, ``medium`` or ``high`` within the site ("" without a figure)."""
        share = self.share_below(value)
        if not math.isfinite(share):
            return ""
        return "high" if share >= HIGH_SHARE else "low" if share < LOW_SHARE else "medium"

    def describe(self, value: float) -> str:
        """A tooltip: the band, the rank in words and the figure, then what the bands mean."""
        share = self.share_below(value)
        if not math.isfinite(share):
            return "No uncertainty for this image.\n" + MEANING
        return (
            f"{self.band(value).capitalize()}: more uncertain than {share:.0%} of the {len(self)} images "
            f"of this folder or slide so far (mean patch uncertainty {value:.4f}).\n{MEANING}"
        )
