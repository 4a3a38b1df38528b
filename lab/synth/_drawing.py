"""What the kinds of generated data share: the spec of a kind and the drawing helpers.

Kept apart from :mod:`lab.synth.generate` (which imports the kind modules) so that the kind
modules (``_histo``, ``_fundus``, ``_lesion``) import these without an import cycle. All helpers
are vectorised: no per-pixel Python loops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

Renderer = Callable[[np.random.Generator, int, Any, int], np.ndarray]


@dataclass(frozen=True)
class SynthSpec:
    """One kind of generated data: its classes, its sites and how one image is drawn."""

    kind: str  # "histo", "fundus", "lesion" or "oct"
    classes: tuple[str, ...]  # class names; label i is classes[i] (sorted, as the readers order them)
    positive_class: str  # the class that precision/recall/AUC treat as positive
    sites: tuple[Any, ...]  # frozen dataclasses with at least ``name`` and ``jpeg_quality``
    render: Renderer  # (rng, label, site, size) -> (size, size, 3) uint8 RGB
    description: str  # one line for synth.json and the docs
    site_set: str = "v1"  # which of the kind's site sets ``sites`` is (``f2tta synth --sites``)


def pixel_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre coordinates ``(yy, xx)`` in pixels, each of shape (size, size), float32."""
    coords = np.arange(size, dtype=np.float32) + 0.5
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    return yy, xx


def smooth_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """Smooth random field of about unit variance, ``cells`` bumps across, shape (size, size)."""
    grid = rng.standard_normal((cells + 1, cells + 1)).astype(np.float32)
    img = Image.fromarray(grid).resize((size, size), Image.Resampling.BICUBIC)
    return np.asarray(img, dtype=np.float32)


def gaussian_blur(arr: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of a (H, W) or (H, W, C) float array with reflected borders."""
    if sigma <= 0.05:
        return arr
    radius = max(1, round(3.0 * sigma))
    x = np.arange(-radius, radius + 1, dtype=np.float32)
    kernel = np.exp(-0.5 * (x / sigma) ** 2)
    kernel /= kernel.sum()
    out = arr
    for axis in (0, 1):
        pad = [(0, 0)] * out.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="reflect")
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1, axis=axis)
        out = windows @ kernel
    return out.astype(np.float32, copy=False)


def finish(rgb: np.ndarray, rng: np.random.Generator, blur: float, noise: float) -> np.ndarray:
    """Blur, add Gaussian sensor noise (sd ``noise`` on the 0-255 scale) and quantise to uint8."""
    rgb = gaussian_blur(rgb, blur)
    rgb = rgb * 255.0
    if noise > 0:
        rgb = rgb + rng.normal(0.0, noise, rgb.shape).astype(np.float32)
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def later_set(
    first: SynthSpec, sites: tuple[Any, ...], target: Renderer, description: str, site_set: str
) -> SynthSpec:
    """A later site set of ``first``'s kind: ``first``'s site1, drawn as ``first`` draws it, and ``sites``.

    ``target`` draws an image at one of ``sites``; ``description`` is added to ``first``'s.
    """
    source = first.sites[0]

    def render(rng: np.random.Generator, label: int, site: Any, size: int) -> np.ndarray:
        if isinstance(site, type(source)):  # site1 of the first set
            return first.render(rng, label, site, size)
        return target(rng, label, site, size)

    return SynthSpec(
        kind=first.kind,
        classes=first.classes,
        positive_class=first.positive_class,
        sites=(source, *sites),
        render=render,
        description=first.description + description,
        site_set=site_set,
    )
