"""Uncertainty overlays as plain arrays (Qt-free): kept per image, drawn by the view and the report.

The heat map is the method's per-token uncertainty on the patch grid; the masked sets are the
uncertain tokens T_U and the reliable tokens T_R that I-DiPT selects from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

# Colour stops of the heat map (an inferno-like ramp: dark = certain, bright = uncertain).
HEAT_STOPS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
HEAT_COLORS = np.array(
    [[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], dtype=np.float64
)
UNCERTAIN_COLOR = (255, 64, 64)  # T_U outline
RELIABLE_COLOR = (64, 220, 255)  # T_R outline


@dataclass(frozen=True)
class Overlay:
    """What one image's overlay needs, stored compactly (float16 map, int32 token indices)."""

    grid: tuple[int, int]  # (gh, gw) patch grid
    uncertainty: np.ndarray | None  # (gh, gw) float16, or None for methods without a map
    uncertain_tokens: np.ndarray  # flat row-major indices into the grid (T_U)
    reliable_tokens: np.ndarray  # flat row-major indices into the grid (T_R)

    @classmethod
    def from_step(
        cls,
        grid: tuple[int, int],
        uncertainty: np.ndarray | None,
        uncertain_tokens: np.ndarray | None,
        reliable_tokens: np.ndarray | None,
    ) -> Overlay:
        def tokens(values: np.ndarray | None) -> np.ndarray:
            out = np.asarray(values if values is not None else [], dtype=np.int32).ravel().copy()
            out.setflags(write=False)
            return out

        heat = None
        if uncertainty is not None:
            heat = np.asarray(uncertainty, dtype=np.float16).reshape(grid).copy()
            heat.setflags(write=False)
        return cls((int(grid[0]), int(grid[1])), heat, tokens(uncertain_tokens), tokens(reliable_tokens))

    def levels(self) -> tuple[float, float]:
        """Colour-scale limits of the heat map (min and max; a flat map gets a unit range)."""
        if self.uncertainty is None:
            return 0.0, 1.0
        values = self.uncertainty.astype(np.float32)
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            return 0.0, 1.0
        lo, hi = float(finite.min()), float(finite.max())
        return (lo, hi) if hi > lo else (lo, lo + 1.0)

    def token_cells(self, which: str) -> np.ndarray:
        """``(K, 2)`` (row, col) grid cells of ``"uncertain"`` or ``"reliable"`` tokens."""
        flat = self.uncertain_tokens if which == "uncertain" else self.reliable_tokens
        gw = self.grid[1]
        return np.stack([flat // gw, flat % gw], axis=1) if flat.size else np.zeros((0, 2), np.int64)


def widen_levels(current: tuple[float, float] | None, overlay: Overlay) -> tuple[float, float] | None:
    """A stream-wide heat-map range that only grows, in steps, so the colour bar rarely changes."""
    if overlay.uncertainty is None:
        return current
    values = overlay.uncertainty.astype(np.float32)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return current
    lo, hi = float(finite.min()), float(finite.max())
    lo = min(lo, 0.0)  # uncertainties are non-negative: anchor the scale at zero
    if current is None:
        return lo, hi + 0.1 * max(hi - lo, 1e-6)
    cur_lo, cur_hi = current
    if hi > cur_hi:
        cur_hi = hi + 0.25 * (hi - cur_lo)
    return min(cur_lo, lo), cur_hi


def heat_rgb(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map values to ``(..., 3)`` uint8 heat-map colours (nan -> black)."""
    t = np.clip((np.nan_to_num(values.astype(np.float64), nan=lo) - lo) / max(hi - lo, 1e-12), 0, 1)
    channels = [np.interp(t, HEAT_STOPS, HEAT_COLORS[:, c]) for c in range(3)]
    return np.stack(channels, axis=-1).round().astype(np.uint8)


def composite(
    image: np.ndarray,
    overlay: Overlay | None,
    opacity: float = 0.45,
    heat: bool = True,
    uncertain: bool = True,
    reliable: bool = False,
) -> np.ndarray:
    """The image with its overlay burnt in, for reports (the live view draws layers instead).

    Args:
        image: ``(H, W, 3)`` uint8.
        overlay: the image's overlay; None returns a copy of the image.
        opacity: heat-map opacity (0-1).
        heat, uncertain, reliable: which layers to draw.
    """
    out = np.array(image, dtype=np.float64, copy=True)
    if overlay is None:
        return out.astype(np.uint8)
    h, w = out.shape[:2]
    gh, gw = overlay.grid
    if heat and overlay.uncertainty is not None:
        lo, hi = overlay.levels()
        colours = heat_rgb(overlay.uncertainty.astype(np.float32), lo, hi)
        big = np.asarray(Image.fromarray(colours).resize((w, h), Image.Resampling.NEAREST), dtype=np.float64)
        out = out * (1 - opacity) + big * opacity
    for which, enabled, colour in (
        ("uncertain", uncertain, UNCERTAIN_COLOR),
        ("reliable", reliable, RELIABLE_COLOR),
    ):
        if not enabled:
            continue
        for r, c in overlay.token_cells(which):
            y0, y1 = int(r * h / gh), max(int((r + 1) * h / gh) - 1, int(r * h / gh))
            x0, x1 = int(c * w / gw), max(int((c + 1) * w / gw) - 1, int(c * w / gw))
            out[y0, x0 : x1 + 1] = colour
            out[y1, x0 : x1 + 1] = colour
            out[y0 : y1 + 1, x0] = colour
            out[y0 : y1 + 1, x1] = colour
    return out.round().clip(0, 255).astype(np.uint8)


def preview_array(image: Image.Image | np.ndarray, max_size: int = 384) -> np.ndarray:
    """A read-only RGB uint8 copy whose longest side is at most ``max_size``."""
    pil = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image, dtype=np.uint8))
    pil = pil.convert("RGB")
    if max(pil.size) > max_size:
        pil = pil.copy()
        pil.thumbnail((max_size, max_size), Image.Resampling.BILINEAR)
    arr = np.array(pil, dtype=np.uint8)
    arr.setflags(write=False)
    return arr


# Slide heat map colours for the positive-class probability: blue (0) - white (0.5) - red (1).
PROB_STOPS = np.array([0.0, 0.5, 1.0])
PROB_COLORS = np.array([[49, 104, 200], [245, 245, 245], [214, 39, 40]], dtype=np.float64)


def probability_rgba(values: np.ndarray, alpha: int = 255) -> np.ndarray:
    """``(R, C)`` probabilities (nan = not processed) -> ``(R, C, 4)`` uint8, unprocessed transparent."""
    finite = np.isfinite(values)
    t = np.clip(np.where(finite, values, 0.0), 0.0, 1.0)
    rgba = np.zeros((*values.shape, 4), dtype=np.uint8)
    for c in range(3):
        rgba[..., c] = np.interp(t, PROB_STOPS, PROB_COLORS[:, c]).round().astype(np.uint8)
    rgba[..., 3] = np.where(finite, alpha, 0).astype(np.uint8)
    return rgba


def slide_heatmap(
    thumbnail: np.ndarray, grid_values: np.ndarray, footprint_px: float, opacity: float = 0.5
) -> np.ndarray:
    """The slide thumbnail with the tile heat map burnt in, for reports.

    Args:
        thumbnail: ``(H, W, 3)`` uint8 overview.
        grid_values: ``(rows, cols)`` positive probability per tile (nan = not processed).
        footprint_px: tile side in thumbnail pixels.
        opacity: heat-map opacity (0-1).
    """
    rows, cols = grid_values.shape
    rgba = probability_rgba(grid_values)
    size = (max(1, round(cols * footprint_px)), max(1, round(rows * footprint_px)))
    big = np.asarray(Image.fromarray(rgba).resize(size, Image.Resampling.NEAREST), dtype=np.float64)
    h, w = thumbnail.shape[:2]
    canvas = np.zeros((h, w, 4), dtype=np.float64)
    ch, cw = min(h, big.shape[0]), min(w, big.shape[1])
    canvas[:ch, :cw] = big[:ch, :cw]
    a = canvas[..., 3:4] / 255.0 * opacity
    out = thumbnail.astype(np.float64) * (1 - a) + canvas[..., :3] * a
    return out.round().clip(0, 255).astype(np.uint8)
