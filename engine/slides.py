"""Whole-slide images through OpenSlide: thumbnail, tissue detection and a tile grid for the model.

Tiles are cut at the model's input size. When the slide reports its resolution
(``openslide.mpp-x``) and the model card records the training resolution (``ModelCard.mpp``), tiles
cover the same physical area as the training images: the pyramid level closest to (and not coarser
than) the wanted resolution is read and resampled to the input size. Otherwise tiles are cut at
full resolution and :attr:`TilePlan.warning` says why the resolutions could not be matched.

Tissue is found on the thumbnail with an Otsu threshold on the HSV saturation channel, which
separates stained tissue from the white/grey glass of bright-field slides.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from engine._closing import Closing
from engine._files import describe_kind
from engine.errors import F2TTAError

logger = logging.getLogger(__name__)

# Saturation threshold floor (0-255): Otsu on a slide that is almost all glass would otherwise split noise.
MIN_SATURATION_THRESHOLD = 20
# Relative difference of resolutions tolerated before tiles are resampled (0.1 = 10 %).
MPP_TOLERANCE = 0.10
# Longest side of the thumbnail used for tissue detection and display, in pixels.
THUMBNAIL_SIZE = 1024


class SlideError(F2TTAError):
    """A slide cannot be opened or read; the message names the file and the reason."""


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
        return f"tile r{self.row} c{self.col} ({self.x}, {self.y})"


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


class Slide(Closing):
    """An open whole-slide image. Use as a context manager or call :meth:`close`.

    Raises:
        SlideError: the file is missing or not a format OpenSlide reads.
    """

    def __init__(self, path: str | Path) -> None:
        import openslide  # imported lazily: the engine must work where OpenSlide is not installed

        self.path = Path(path)
        try:
            kind = describe_kind(self.path.stat().st_mode)
        except OSError as exc:
            reason = (
                "slide file not found" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
            )
            raise SlideError(f"{self.path}: {reason}") from exc
        if kind is not None:  # OpenSlide would block on a FIFO and read a device for ever
            raise SlideError(f"{self.path}: not a regular file: it is {kind}")
        try:
            fmt = openslide.OpenSlide.detect_format(str(self.path))
        except Exception as exc:  # OpenSlide raises OSError subclasses on unreadable files
            raise SlideError(f"{self.path}: cannot be read ({exc})") from exc
        if fmt is None:
            raise SlideError(
                f"{self.path}: not a slide format OpenSlide can read (tiled TIFF, SVS, NDPI, MRXS, ...); "
                "plain images belong in a folder opened with 'Open folder'"
            )
        try:
            self._slide = openslide.OpenSlide(str(self.path))
        except Exception as exc:
            raise SlideError(f"{self.path}: OpenSlide could not open this {fmt} slide ({exc})") from exc
        self.format = fmt

    def close(self) -> None:
        self._slide.close()

    @property
    def dimensions(self) -> tuple[int, int]:
        """Level-0 ``(width, height)`` in pixels."""
        w, h = self._slide.dimensions
        return int(w), int(h)

    @property
    def level_count(self) -> int:
        return int(self._slide.level_count)

    @property
    def level_downsamples(self) -> tuple[float, ...]:
        return tuple(float(d) for d in self._slide.level_downsamples)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._slide.properties)

    @property
    def mpp(self) -> float | None:
        """Level-0 microns per pixel (mean of x and y), or None when the slide does not say."""
        values = []
        for key in ("openslide.mpp-x", "openslide.mpp-y"):
            try:
                value = float(self._slide.properties.get(key, "nan"))
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                values.append(value)
        return sum(values) / len(values) if values else None

    def thumbnail(self, max_size: int = THUMBNAIL_SIZE) -> np.ndarray:
        """An RGB ``(H, W, 3)`` uint8 overview whose longest side is at most ``max_size``."""
        try:
            thumb = self._slide.get_thumbnail((max_size, max_size))
        except Exception as exc:
            raise SlideError(f"{self.path}: cannot read the slide overview ({exc})") from exc
        return np.asarray(_flatten_rgba(thumb))

    def plan_tiles(
        self,
        tile_size: int,
        target_mpp: float | None = None,
        min_tissue: float = 0.25,
        thumbnail: np.ndarray | None = None,
    ) -> TilePlan:
        """Tiles of ``tile_size`` pixels covering the tissue, in reading order.

        Args:
            tile_size: the model's input side in pixels.
            target_mpp: the model's training resolution in microns per pixel, if known.
            min_tissue: smallest fraction of tissue for a tile to be kept (0 keeps every tile).
            thumbnail: a thumbnail from :meth:`thumbnail`, to avoid reading it twice.
        """
        slide_mpp = self.mpp
        downsample, matched, warning = self._choose_downsample(slide_mpp, target_mpp)
        level = int(self._slide.get_best_level_for_downsample(downsample * (1 + 1e-6)))
        level_ds = self.level_downsamples[level]
        if level_ds > downsample:  # OpenSlide returns level 0 for downsamples below 1
            level, level_ds = 0, self.level_downsamples[0]
        thumb = self.thumbnail() if thumbnail is None else thumbnail
        mask, threshold = tissue_mask(thumb)
        width, height = self.dimensions
        footprint = max(1, round(tile_size * downsample))
        cols, rows = math.ceil(width / footprint), math.ceil(height / footprint)
        sx, sy = mask.shape[1] / width, mask.shape[0] / height
        tiles: list[Tile] = []
        for r in range(rows):
            for c in range(cols):
                x, y = c * footprint, r * footprint
                tw, th = min(footprint, width - x), min(footprint, height - y)
                x0, y0 = int(x * sx), int(y * sy)
                x1 = max(x0 + 1, math.ceil((x + tw) * sx))
                y1 = max(y0 + 1, math.ceil((y + th) * sy))
                # Fraction of the whole footprint: tiles hanging over the slide edge count the overhang as glass.
                covered = float(mask[y0:y1, x0:x1].mean()) * (tw * th) / (footprint * footprint)
                if covered >= min_tissue and (covered > 0 or min_tissue <= 0):
                    tiles.append(Tile(len(tiles), c, r, x, y, footprint, footprint, covered))
        return TilePlan(
            tile_size=tile_size,
            level=level,
            level_downsample=level_ds,
            downsample=downsample,
            slide_mpp=slide_mpp,
            target_mpp=target_mpp,
            matched=matched,
            warning=warning,
            grid=(rows, cols),
            tiles=tuple(tiles),
            tissue_threshold=threshold,
        )

    def _choose_downsample(
        self, slide_mpp: float | None, target_mpp: float | None
    ) -> tuple[float, bool, str | None]:
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

    def read_tile(self, plan: TilePlan, tile: Tile) -> np.ndarray:
        """The tile as an RGB ``(tile_size, tile_size, 3)`` uint8 array (glass outside the slide is white)."""
        side = max(1, round(tile.width / plan.level_downsample))
        try:
            region = self._slide.read_region((tile.x, tile.y), plan.level, (side, side))
        except Exception as exc:
            raise SlideError(f"{self.path}: cannot read {tile.label} ({exc})") from exc
        rgb = _flatten_rgba(region)
        if rgb.size != (plan.tile_size, plan.tile_size):
            rgb = rgb.resize((plan.tile_size, plan.tile_size), Image.Resampling.BILINEAR)
        return np.asarray(rgb)

    def read_area(self, tile: Tile, max_size: int = 512) -> np.ndarray:
        """A tile's footprint at a display resolution (longest side at most ``max_size``)."""
        ds_wanted = max(tile.width, tile.height) / max_size
        level = int(self._slide.get_best_level_for_downsample(max(ds_wanted, 1.0)))
        ds = self.level_downsamples[level]
        size = (max(1, round(tile.width / ds)), max(1, round(tile.height / ds)))
        try:
            region = self._slide.read_region((tile.x, tile.y), level, size)
        except Exception as exc:
            raise SlideError(f"{self.path}: cannot read {tile.label} ({exc})") from exc
        rgb = _flatten_rgba(region)
        if max(rgb.size) > max_size:
            rgb.thumbnail((max_size, max_size), Image.Resampling.BILINEAR)
        return np.asarray(rgb)


def _flatten_rgba(img: Image.Image) -> Image.Image:
    """Composite OpenSlide's premultiplied RGBA on white (transparent = outside the scanned area)."""
    if img.mode != "RGBA":
        return img.convert("RGB")
    background = Image.new("RGBA", img.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, img).convert("RGB")


def open_slide(path: str | Path) -> Slide:
    """Open a slide; see :class:`Slide`."""
    return Slide(path)
