"""How far a promoted candidate's call is shown beyond what its certificate covers.

A certificate covers the images its blocks were frozen on (and later blocks, as answers reach
them). Images that arrive after it are shown with the candidate's call *provisionally* while they
look like the covered ones, as far as a label-free check of the source model's calls can tell
(``docs/review-certificates.md``, "Shown and reported"): a slide read in scan order reaches its
tumour region, a drifting mix drifts, and from there the rule below decides what is shown too.
"""

from __future__ import annotations

import numpy as np

from engine.review.comparison import Comparison
from engine.review.images import SiteImages

WINDOW = 50  # later images whose source calls are compared with the covered ones'


def alike(c: Comparison, images: SiteImages, delta: float = 0.05) -> int:
    """The first image (a position in ``images``) from which ``c``'s call is no longer shown:
    the first later image where the source model's calls no longer look like those on the images
    its blocks were frozen on (``len(images)``: none).

    The share of the reference's most common source call among the later images is tested against
    the reference's with a confidence sequence for each (a normal-mixture boundary for a bounded
    mean, at ``delta`` each), and so is its share among the last :data:`WINDOW` images (Hoeffding,
    the window ending at the i-th later image at ``delta / (i (i + 1))``, so no window's verdict
    changes as more images arrive).
    """
    n, start = len(images), max(c.coverage, 0)
    if start >= n or c.frozen == 0:
        return n
    reference = images.source[: c.frozen]
    common = int(np.bincount(reference).argmax())
    p0 = float(np.mean(reference == common))
    hits = (images.source[start:n] == common).astype(np.float64)
    later = np.cumsum(hits)
    m = np.arange(1, n - start + 1, dtype=np.float64)
    slack = boundary(np.float64(c.frozen), delta) / c.frozen  # the reference's own uncertainty
    broken = np.abs(later / m - p0) > boundary(m, delta) / m + slack
    if m.size >= WINDOW:  # and the last WINDOW images, for a change that the running mean dilutes
        window = np.convolve(hits, np.ones(WINDOW), mode="valid") / WINDOW
        # the window ending at the i-th later image is tested at delta / (i (i + 1))
        ends = m[WINDOW - 1 :]
        bound = np.sqrt(np.log(2.0 * ends * (ends + 1.0) / delta) / (2.0 * WINDOW)) + slack
        broken[WINDOW - 1 :] |= np.abs(window - p0) > bound
    first = np.flatnonzero(broken)
    return n if first.size == 0 else start + int(first[0])


def boundary(m: np.ndarray | np.float64, delta: float, rho: float = 1.0) -> np.ndarray:
    """A time-uniform bound on ``|sum of m centred values in [0, 1]|`` at error ``delta`` (two-sided):
    the normal-mixture boundary of a sub-Gaussian sum with variance proxy ``m / 4`` (Robbins; Howard
    et al. 2021), holding at every ``m`` at once."""
    v = np.asarray(m, dtype=np.float64) / 4.0
    bound: np.ndarray = np.sqrt(2.0 * (v + rho) * np.log(np.sqrt((v + rho) / rho) * 2.0 / delta))
    return bound
