"""The sixth site set of the fundus kind (``f2tta synth fundus --sites v6``).

The eye is the same as in the first set (``_fundus.py``: the class is the cup-to-disc ratio) and
site1 is the first set's site1, unchanged. The four new target sites photograph, process or pass
it on through mechanisms none of the first five sets used:

* ``v6site2`` — an export with burnt-in annotations: the eye (OD or OS, from the disc's side) in
  the upper left corner, the date and the time in the lower corners, in white pixel letters.
* ``v6site3`` — a dim exposure stored in 8 bits and then stretched by a viewer's automatic levels
  (each channel from its 0.1th to its 99.9th percentile): the colour balance shifts, the disc
  clips, and the histogram is combed (levels in between never occur).
* ``v6site4`` — a phone photograph of the monitor showing the image, sent on by a messaging app:
  colour moiré between the screen's subpixels and the phone's sensor (rainbow fringes 9-16 px apart
  at 96 px, slightly curved), the screen's black level, a reflection of a lamp on the glass; JPEG 80.
* ``v6site5`` — a camera with a narrower angle of view (30 degrees, as in ETDRS-style field
  photography, where site1's is 45): the anatomy 1.5 times larger, the view centred half way from
  the posterior pole towards the disc.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth import _fundus
from lab.synth._drawing import later_set, pixel_grid
from lab.synth._fundus import Eye, eye
from lab.synth._optics import blur_yx, f32, quantise


@dataclass(frozen=True)
class FundusSiteV6:
    """How one site of the sixth set photographs, processes or passes on the retina."""

    name: str
    annotate: bool  # burn the eye, the date and the time into the corners
    exposure: float  # light reaching the sensor relative to site1's
    levels: float  # automatic levels: share of each channel clipped at each end (0: none)
    moire: float  # amplitude of the colour moiré of a photographed monitor (0: not photographed)
    view: float  # magnification of the anatomy by a narrower angle of view (1: site1's camera)
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None


# fmt: off
SITES: tuple[FundusSiteV6, ...] = (
    FundusSiteV6("v6site2", True, 1.0, 0.0, 0.0, 1.0, 0.3, 2.0, None),
    FundusSiteV6("v6site3", False, 0.3, 0.001, 0.0, 1.0, 0.3, 2.0, None),
    FundusSiteV6("v6site4", False, 1.0, 0.0, 0.1, 1.0, 0.3, 2.0, 80),
    FundusSiteV6("v6site5", False, 1.0, 0.0, 0.0, 1.5, 0.3, 2.0, None),
)
# fmt: on
_FIELD = _fundus.SITES[0].field  # the field stop keeps site1's size in the image
_DISC_GREEN = 0.52  # green reflectance above which a pixel is the disc's rim or cup (the retina stays below)
_SCREEN_BLACK = 0.05  # light a monitor gives for black
#: 3 x 5 pixel letters of the burnt-in annotations ("1" for a lit pixel).
_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001010010",
    "8": "111101111101111", "9": "111101111001111", "O": "111101101101111", "D": "110101101101110",
    "S": "111100111001111", ".": "000000000000010", ":": "000010000010000",
}  # fmt: skip


def _disc_centre(e: Eye) -> tuple[float, float]:
    """Where the optic disc is: the centroid of the pixels as green as only the disc's rim and cup are."""
    ys, xs = np.nonzero(e.rgb[..., 1] * e.inside > _DISC_GREEN)
    if ys.size == 0:  # not expected: the disc always lies in the field
        c = e.rgb.shape[0] / 2.0
        return c, c
    return float(ys.mean()) + 0.5, float(xs.mean()) + 0.5


def _narrow_view(rng: np.random.Generator, label: int, view: float, size: int) -> Eye:
    """The eye through a camera with a ``view`` times narrower angle: a crop of the larger anatomy."""
    big_size = round(size * view)
    big = eye(rng, label, _FIELD, big_size)
    c = big_size / 2.0
    dy, dx = _disc_centre(big)
    y0 = int(np.clip(round(c + 0.45 * (dy - c) - size / 2.0), 0, big_size - size))
    x0 = int(np.clip(round(c + 0.45 * (dx - c) - size / 2.0), 0, big_size - size))
    crop = big.rgb[y0 : y0 + size, x0 : x0 + size]
    yy, xx = pixel_grid(size)
    r = np.sqrt((yy - size / 2.0) ** 2 + (xx - size / 2.0) ** 2)
    radius = 0.5 * size * _FIELD * float(rng.uniform(0.98, 1.02))
    inside = np.clip(radius - r + 0.5, 0.0, 1.0) * big.inside[y0 : y0 + size, x0 : x0 + size]
    return Eye(f32(crop), f32(inside), f32(r), radius)


def _text(mask: np.ndarray, text: str, row: int, col: int, cell: int) -> None:
    """Burn ``text`` into ``mask`` (in place) from (row, col), each letter 3 x 5 cells of ``cell`` px."""
    for k, ch in enumerate(text):
        glyph = np.array([int(b) for b in _GLYPHS[ch]], np.float32).reshape(5, 3)
        block = np.kron(glyph, np.ones((cell, cell), np.float32))
        top, left = row, col + k * 4 * cell
        h = min(block.shape[0], mask.shape[0] - top)
        w = min(block.shape[1], mask.shape[1] - left)
        if h > 0 and w > 0:
            mask[top : top + h, left : left + w] = np.maximum(
                mask[top : top + h, left : left + w], block[:h, :w]
            )


def _annotations(rng: np.random.Generator, e: Eye, size: int) -> np.ndarray:
    """The burnt-in letters (size, size), 0-1: the eye upper left, the date lower left, the time lower right."""
    cell = max(1, size // 96)
    mask = np.zeros((size, size), np.float32)
    right_eye = _disc_centre(e)[1] > size / 2.0  # a right eye's disc lies to the right of its macula
    day, month, year = rng.integers(1, 29), rng.integers(1, 13), rng.integers(10, 25)
    hour, minute = rng.integers(7, 19), rng.integers(0, 60)
    time = f"{hour:02d}:{minute:02d}"
    bottom = size - 6 * cell
    _text(mask, "OD" if right_eye else "OS", cell, cell, cell)
    _text(mask, f"{day:02d}.{month:02d}.{year:02d}", bottom, cell, cell)
    _text(mask, time, bottom, max(cell, size - cell - (4 * len(time) - 1) * cell), cell)
    return mask


def _auto_levels(stored: np.ndarray, clip: float) -> np.ndarray:
    """An 8-bit image (0-255 floats) stretched per channel from its ``clip`` to its ``1 - clip`` quantile, 0-1."""
    lo = np.quantile(stored, clip, axis=(0, 1))
    hi = np.maximum(np.quantile(stored, 1.0 - clip, axis=(0, 1)), lo + 1.0)
    return f32(np.clip((stored - lo) / (hi - lo), 0.0, 1.0))


def _photographed_monitor(rng: np.random.Generator, rgb: np.ndarray, amplitude: float) -> np.ndarray:
    """The image as a phone photographs it on a monitor: black level, colour moiré and a lamp's reflection."""
    size = rgb.shape[0]
    yy, xx = pixel_grid(size)
    c = size / 2.0
    phi = rng.uniform(0.0, np.pi)
    u = (xx - c) * np.cos(phi) + (yy - c) * np.sin(phi)
    v = -(xx - c) * np.sin(phi) + (yy - c) * np.cos(phi)
    period = rng.uniform(9.0, 16.0) * size / 96.0
    bend = rng.uniform(-0.6, 0.6) * period * (v / c) ** 2  # the lens's distortion curves the fringes
    phase = 2.0 * np.pi * (u + bend) / period + rng.uniform(0.0, 2.0 * np.pi)
    # The red, green and blue subpixels sit a third of a pixel apart: their fringes a third of a period.
    fringes = np.stack([np.cos(phase + 2.0 * np.pi * k / 3.0) for k in range(3)], axis=-1)
    shown = _SCREEN_BLACK + (1.0 - _SCREEN_BLACK) * rgb
    gy, gx = rng.uniform(0.15, 0.85, 2) * size
    lamp = np.exp(-((yy - gy) ** 2 + (xx - gx) ** 2) / (2.0 * (0.25 * size) ** 2))
    return f32(shown * (1.0 + amplitude * fringes) + rng.uniform(0.05, 0.12) * lamp[..., None])


def camera(rng: np.random.Generator, e: Eye, site: FundusSiteV6, size: int) -> np.ndarray:
    """The stored uint8 image of an eye through ``site``'s camera, processing or hand-on."""
    px = size / 96.0
    rgb = e.rgb * (1.0 - 0.3 * (np.clip(e.r / e.radius, 0, 1) ** 2.5))[..., None]
    rgb = blur_yx(f32(rgb * e.inside[..., None]), site.blur * px, site.blur * px) * site.exposure
    noise = rng.normal(0.0, site.noise / 255.0, (size, size, 3)).astype(np.float32)
    rgb = np.clip(rgb + noise * e.inside[..., None], 0.0, 1.0)
    if site.levels > 0:  # the camera's 8 bits, then the viewer's stretch
        rgb = _auto_levels(np.rint(rgb * 255.0), site.levels)
    if site.moire > 0:
        shot = _photographed_monitor(rng, f32(rgb), site.moire)
        rgb = blur_yx(shot, 0.5 * px, 0.5 * px) + rng.normal(0.0, 2.0 / 255.0, (size, size, 3))
    if site.annotate:
        rgb = np.maximum(rgb, _annotations(rng, e, size)[..., None])
    return quantise(np.clip(rgb, 0.0, 1.0))


def target(rng: np.random.Generator, label: int, site: FundusSiteV6, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 fundus image of class ``label`` at a target site of the sixth set."""
    e = _narrow_view(rng, label, site.view, size) if site.view != 1.0 else eye(rng, label, _FIELD, size)
    return camera(rng, e, site, size)


SPEC = later_set(
    _fundus.SPEC,
    SITES,
    target,
    (
        "; sixth site set: burnt-in annotations, a dim exposure stretched by automatic levels, a phone "
        "photograph of the monitor with colour moiré, a 30-degree camera (the anatomy 1.5 times larger)"
    ),
    "v6",
)
