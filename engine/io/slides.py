"""Whole-slide images through OpenSlide: thumbnail, tissue detection and a tile grid for the model.

Tiles are cut at the model's input size. When the slide reports its resolution
(``openslide.mpp-x``) and the model card records the training resolution (``ModelCard.mpp``), tiles
cover the same physical area as the training images: the pyramid level closest to (and not coarser
than) the wanted resolution is read and resampled to the input size. Otherwise tiles are cut at
full resolution and :attr:`TilePlan.warning` says why the resolutions could not be matched.

Tissue is found on the thumbnail with an Otsu threshold on the HSV saturation channel, which
separates stained tissue from the white/grey glass of bright-field slides.

A failed read leaves an OpenSlide handle in its error state: every later read of that handle
fails too (one damaged tile of a tiled TIFF made 253 of 302 tiles fail). :class:`Slide` reopens
its handle after any failed read and tries that read once more on the fresh handle, so a damaged
tile is told from the readable ones: it fails on a fresh handle too. Plans are bounded
(:data:`MAX_TILES`, :data:`MAX_GRID_CELLS`) and so is the overview (:data:`MAX_OVERVIEW_PIXELS`),
each with a message that says what to do.
The stored tile of every level read is bounded and the file read is the file opened
(:mod:`engine.io.slide_file`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path

import numpy as np
from PIL import Image

from engine.io.content import identity
from engine.io.slide_file import MAX_TILE_PIXELS, SlideError, SlideFile, why
from engine.io.tile_plan import (
    MIN_SATURATION_THRESHOLD,
    MPP_TOLERANCE,
    Tile,
    TilePlan,
    choose_downsample,
    otsu_threshold,
    tissue_cover,
    tissue_mask,
)
from engine.util.files import describe_kind

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_GRID_CELLS",
    "MAX_OVERVIEW_PIXELS",
    "MAX_TILES",
    "MAX_TILE_PIXELS",
    "MIN_SATURATION_THRESHOLD",
    "MPP_TOLERANCE",
    "THUMBNAIL_SIZE",
    "Slide",
    "SlideError",
    "Tile",
    "TilePlan",
    "open_slide",
    "otsu_threshold",
    "tissue_mask",
]

# Longest side of the thumbnail used for tissue detection and display, in pixels.
THUMBNAIL_SIZE = 1024
# Most pixels read to make the overview: the level OpenSlide reads it from must be at most this
# large (8 192 x 8 192; a slide without a reduced level of that size is refused, not read whole).
MAX_OVERVIEW_PIXELS = 8192 * 8192
# Most tissue tiles a plan may hold (each costs about 1 kB in the source, the journal and the app)
# and most grid cells examined for tissue (a sparse 200 000-pixel slide planned 2.76 M tiles).
MAX_TILES = 200_000
MAX_GRID_CELLS = 1 << 24


class Slide(SlideFile):
    """An open whole-slide image. Use as a context manager or call :meth:`close`.

    Raises:
        SlideError: the file is missing or not a format OpenSlide reads.
    """

    def __init__(self, path: str | Path) -> None:
        import openslide  # imported lazily: the engine must work where OpenSlide is not installed

        self.path = Path(path)
        self._content: str | None = None
        try:
            st = self.path.stat()
            kind = describe_kind(st.st_mode)
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
            raise SlideError(f"{self.path}: OpenSlide could not open this {fmt} slide ({why(exc)})") from exc
        self.format = fmt
        self._handle_open = True
        self.identity = identity(st)
        try:
            self.check_unchanged()
        except SlideError:
            self.close()
            raise

    def close(self) -> None:
        if self._handle_open:
            self._handle_open = False
            self._slide.close()

    def _reopen(self) -> None:
        """A fresh OpenSlide handle (the one that failed a read stays in its error state).

        Raises:
            SlideError: the file cannot be opened again; transient (it may come back).
        """
        import openslide

        self.close()
        try:
            self._slide = openslide.OpenSlide(str(self.path))
            self._handle_open = True
        except Exception as exc:
            raise SlideError(
                f"{self.path}: the slide cannot be opened again after a failed read ({why(exc)}); "
                "tried again next run",
                transient=True,
            ) from exc
        self.check_unchanged()

    def _read_region(
        self, location: tuple[int, int], level: int, size: tuple[int, int], what: str
    ) -> Image.Image:
        """``read_region`` that tells a damaged area from a handle left in OpenSlide's error state.

        A failed read is tried once more on a fresh handle; failing there too, the area is damaged
        (the handle is opened afresh again, so the next read starts clean).

        Raises:
            SlideError: the area is damaged (permanent), or the slide cannot be opened again (transient).
        """
        self.check_level(level)
        self.check_unchanged()
        try:
            region: Image.Image = self._slide.read_region(location, level, size)
        except Exception as first:
            logger.debug("%s: reading %s failed, trying a fresh handle", self.path, what, exc_info=first)
        else:
            self.check_unchanged()  # read from the file opened, not from one put in its place meanwhile
            return region
        self._reopen()
        try:
            region = self._slide.read_region(location, level, size)
        except Exception as exc:
            self._reopen()
            raise SlideError(f"{self.path}: cannot read {what}, damaged ({why(exc)})") from exc
        self.check_unchanged()
        return region

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
        """An RGB ``(H, W, 3)`` uint8 overview whose longest side is at most ``max_size``.

        Raises:
            SlideError: no pyramid level is small enough to read whole (:data:`MAX_OVERVIEW_PIXELS`),
                or the overview cannot be read; the message gives the reason.
        """
        width, height = self.dimensions
        downsample = max(width / max_size, height / max_size, 1.0)
        level = int(self._slide.get_best_level_for_downsample(downsample))
        lw, lh = (int(v) for v in self._slide.level_dimensions[level])
        if lw * lh > MAX_OVERVIEW_PIXELS:
            raise SlideError(
                f"{self.path}: cannot read the slide overview: it has no reduced level small enough to read "
                f"whole (the smallest usable is level {level}, {lw} x {lh} pixels; the limit is "
                f"{MAX_OVERVIEW_PIXELS:,} pixels). Save the slide again as a pyramid (reduced levels)"
            )
        self.check_level(level)
        try:
            thumb = self._slide.get_thumbnail((max_size, max_size))
        except Exception as exc:
            with contextlib.suppress(SlideError):
                self._reopen()
            raise SlideError(f"{self.path}: cannot read the slide overview ({why(exc)})") from exc
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
        downsample, matched, warning = choose_downsample(slide_mpp, target_mpp)
        level = int(self._slide.get_best_level_for_downsample(downsample * (1 + 1e-6)))
        level_ds = self.level_downsamples[level]
        if level_ds > downsample:  # OpenSlide returns level 0 for downsamples below 1
            level, level_ds = 0, self.level_downsamples[0]
        self.check_level(level)  # before any work: a slide whose tiles cannot be read is refused whole
        thumb = self.thumbnail() if thumbnail is None else thumbnail
        mask, threshold = tissue_mask(thumb)
        width, height = self.dimensions
        footprint = max(1, round(tile_size * downsample))
        cols, rows = math.ceil(width / footprint), math.ceil(height / footprint)
        if rows * cols > MAX_GRID_CELLS:
            raise SlideError(
                f"{self.path}: a {width} x {height} slide cut into tiles of {footprint} pixels makes a grid of "
                f"{rows:,} x {cols:,} cells, more than the limit of {MAX_GRID_CELLS:,}; use a model trained at a "
                "coarser resolution, or a region of the slide"
            )
        covered = tissue_cover(mask, width, height, footprint, rows, cols)
        keep = covered >= min_tissue
        if min_tissue > 0:
            keep &= covered > 0
        count = int(keep.sum())
        if count > MAX_TILES:
            raise SlideError(
                f"{self.path}: {count:,} tissue tiles of {footprint} level-0 pixels, more than the limit of "
                f"{MAX_TILES:,}; raise the minimum tissue per tile, use a model trained at a coarser "
                "resolution, or a region of the slide"
            )
        tiles = tuple(
            Tile(
                i,
                int(c),
                int(r),
                int(c) * footprint,
                int(r) * footprint,
                footprint,
                footprint,
                float(covered[r, c]),
            )
            for i, (r, c) in enumerate(zip(*np.nonzero(keep), strict=True))
        )
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
            tiles=tiles,
            tissue_threshold=threshold,
        )

    def read_tile(self, plan: TilePlan, tile: Tile) -> np.ndarray:
        """The tile as an RGB ``(tile_size, tile_size, 3)`` uint8 array (glass outside the slide is white)."""
        side = max(1, round(tile.width / plan.level_downsample))
        region = self._read_region((tile.x, tile.y), plan.level, (side, side), tile.label)
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
        region = self._read_region((tile.x, tile.y), level, size, tile.label)
        rgb = _flatten_rgba(region)
        if max(rgb.size) > max_size:
            rgb.thumbnail((max_size, max_size), Image.Resampling.BILINEAR)
        return np.asarray(rgb)


def _flatten_rgba(img: Image.Image) -> Image.Image:
    """Composite OpenSlide's premultiplied RGBA on white (transparent = outside the scanned area)."""
    if img.mode != "RGBA" or img.getchannel("A").getextrema()[0] == 255:  # opaque: the same pixels
        return img.convert("RGB")
    background = Image.new("RGBA", img.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, img).convert("RGB")


def open_slide(path: str | Path) -> Slide:
    """Open a slide; see :class:`Slide`."""
    return Slide(path)
