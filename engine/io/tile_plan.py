"""A slide's tile grid (Qt-free, OpenSlide-free): tiles, the plan, tissue detection and resolution.

Tissue is found on the slide's thumbnail with an Otsu threshold on the HSV saturation channel,
which separates stained tissue from the white/grey glass of bright-field slides; each grid cell
keeps the share of its footprint that is tissue. :mod:`engine.io.slides` reads the slide and makes
the plan from these pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

# Saturation threshold floor (0-255): Otsu on a slide that is almost all glass would otherwise split noise.
MIN_SATURATION_THRESHOLD = 20
# Relative difference of resolutions tolerated before tiles are resampled (0.1 = 10 %).
MPP_TOLERANCE = 0.10


@dataclass(frozen=True)
class Tile:
    """One tile of a :class:`TilePlan`, in reading order."""

    index: int  # position in reading order (0-based, tissue tiles only)
    col: int  # grid column
    row: int  # grid row
    x: int  # left edge in level-0 pixels
    y: int  # top edge in level-0 pixels
    width: int  # footprint width in level-0 pixels
    height: int  # footprint height in level-0 pixels
    tissue: float  # fraction of the footprint detected as tissue (0-1)

    @property
    def key(self) -> str:
        """A stable identifier of the tile within its slide and plan."""
        return f"{self.x},{self.y}"

    @property
    def label(self) -> str:
        """The name a person reads: grid row and column counted from 1 (as the table's "#"), then
        the tile's level-0 pixel position (``tile r16 c4 (3072, 7680)``)."""
        return f"tile r{self.row + 1} c{self.col + 1} ({self.x}, {self.y})"


@dataclass(frozen=True)
class TilePlan:
    """Where to cut tiles and at which resolution."""

    tile_size: int  # model input side in pixels
    level: int  # pyramid level that is read
    level_downsample: float  # that level's downsample relative to level 0
    downsample: float  # level-0 pixels per tile pixel (>= level_downsample)
    slide_mpp: float | None  # slide's level-0 microns per pixel, if reported
    target_mpp: float | None  # model card's training microns per pixel, if recorded
    matched: bool  # True when tiles have the training resolution (within MPP_TOLERANCE)
    warning: str | None  # user-facing explanation when they do not
    grid: tuple[int, int]  # (rows, cols) of the full grid, tissue or not
    tiles: tuple[Tile, ...]  # tissue tiles in reading order (row by row, left to right)
    tissue_threshold: float  # saturation threshold used (0-255)

    @property
    def footprint(self) -> int:
        """Tile side in level-0 pixels."""
        return max(1, round(self.tile_size * self.downsample))

    @property
    def effective_mpp(self) -> float | None:
        return None if self.slide_mpp is None else self.slide_mpp * self.downsample

    def describe(self) -> str:
        parts = [f"{len(self.tiles)} tissue tiles of {self.tile_size}px", f"level {self.level}"]
        if self.effective_mpp is not None:
            parts.append(f"{self.effective_mpp:.3g} µm/px")
        return ", ".join(parts)


def otsu_threshold(values: np.ndarray) -> float:
    """Otsu's threshold of 8-bit values (maximises the between-class variance)."""
    hist = np.bincount(values.astype(np.uint8).ravel(), minlength=256).astype(np.float64)
    total = hist.sum()
    if total == 0:
        return 0.0
    levels = np.arange(256, dtype=np.float64)
    weight0 = np.cumsum(hist)
    weight1 = total - weight0
    mean0_num = np.cumsum(hist * levels)
    mean_total = mean0_num[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean0 = mean0_num / weight0
        mean1 = (mean_total - mean0_num) / weight1
        between = weight0 * weight1 * (mean0 - mean1) ** 2
    between = np.nan_to_num(between, nan=0.0, posinf=0.0)
    return float(np.argmax(between))


def tissue_mask(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    """Tissue pixels of an RGB thumbnail.

    Args:
        rgb: ``(H, W, 3)`` uint8 image.

    Returns:
        A boolean ``(H, W)`` mask and the saturation threshold used (0-255).
    """
    hsv = np.asarray(Image.fromarray(np.ascontiguousarray(rgb[..., :3])).convert("HSV"))
    saturation = hsv[..., 1]
    # Pure black (scanner padding, pen) has undefined saturation; leave it out of the statistics.
    valid = hsv[..., 2] > 30
    threshold = max(otsu_threshold(saturation[valid]) if valid.any() else 0.0, MIN_SATURATION_THRESHOLD)
    return (saturation > threshold) & valid, threshold


def tissue_cover(
    mask: np.ndarray, width: int, height: int, footprint: int, rows: int, cols: int
) -> np.ndarray:
    """Each grid cell's fraction of tissue, ``(rows, cols)``, from the thumbnail's tissue mask.

    A cell's share is the mean of the mask over the thumbnail pixels it touches, scaled by the
    part of its footprint that lies on the slide (tiles hanging over the edge count the overhang
    as glass); computed for every cell at once from the mask's summed-area table.
    """
    sx, sy = mask.shape[1] / width, mask.shape[0] / height
    x = np.arange(cols, dtype=np.int64) * footprint
    y = np.arange(rows, dtype=np.int64) * footprint
    tw, th = np.minimum(footprint, width - x), np.minimum(footprint, height - y)
    x0, y0 = (x * sx).astype(np.int64), (y * sy).astype(np.int64)
    x1 = np.maximum(x0 + 1, np.ceil((x + tw) * sx).astype(np.int64))
    y1 = np.maximum(y0 + 1, np.ceil((y + th) * sy).astype(np.int64))
    x1, y1 = np.minimum(x1, mask.shape[1]), np.minimum(y1, mask.shape[0])
    table = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), dtype=np.int64)
    table[1:, 1:] = mask.astype(np.int64).cumsum(0).cumsum(1)
    sums = table[y1][:, x1] - table[y0][:, x1] - table[y1][:, x0] + table[y0][:, x0]
    counts = (y1 - y0)[:, None] * (x1 - x0)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    share: np.ndarray = mean * (th[:, None] * tw[None, :]) / (footprint * footprint)
    return share


def choose_downsample(slide_mpp: float | None, target_mpp: float | None) -> tuple[float, bool, str | None]:
    """Level-0 pixels per tile pixel, whether that matches the training resolution, and why not."""
    if slide_mpp is None and target_mpp is None:
        return (
            1.0,
            False,
            (
                "Neither the slide nor the model card records microns-per-pixel: tiles are cut at full "
                "resolution and may not match the magnification the model was trained at."
            ),
        )
    if slide_mpp is None:
        return (
            1.0,
            False,
            (
                f"The slide does not report microns-per-pixel, so the model's training resolution "
                f"({target_mpp:.3g} µm/px) cannot be matched: tiles are cut at full resolution."
            ),
        )
    if target_mpp is None:
        return (
            1.0,
            False,
            (
                f"The model card does not record its training resolution: tiles are cut at the slide's full "
                f"resolution ({slide_mpp:.3g} µm/px), which may not match what the model was trained on."
            ),
        )
    ratio = target_mpp / slide_mpp
    if ratio < 1 - MPP_TOLERANCE:
        return (
            1.0,
            False,
            (
                f"The slide's finest resolution ({slide_mpp:.3g} µm/px) is coarser than the model's training "
                f"resolution ({target_mpp:.3g} µm/px): tiles are cut at full resolution and show "
                f"{1 / ratio:.2g}x more tissue than the training images did."
            ),
        )
    if abs(ratio - 1) <= MPP_TOLERANCE:
        ratio = 1.0
    return ratio, True, None
