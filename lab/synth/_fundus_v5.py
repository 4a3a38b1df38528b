"""The fifth site set of the fundus kind (``f2tta synth fundus --sites v5``).

The eye is the same as in the first set (``_fundus.py``: the class is the cup-to-disc ratio) and
site1 is the first set's site1, unchanged. The four new target sites photograph it through
mechanisms none of the first four sets used:

* ``v5site2`` — a flash too bright for lightly pigmented eyes: the red channel saturates over most
  of the retina and the disc, and the saturated light blooms into its surroundings; the cup stays
  visible in green and blue only.
* ``v5site3`` — referral letters: the photograph printed with a halftone screen (3 px at 96 px; cyan, magenta and
  yellow dots on screens at 15, 75 and 0 degrees) on cream paper, then scanned.
* ``v5site4`` — a montage of two captures: the software joins a second photograph, exposed 15-25 %
  differently and 1-2 px out of register, along a vertical seam with a narrow feather.
* ``v5site5`` — a dim flash with the sensor's gain turned up: amplified noise, and the sensor's own
  pattern (the same for every image of the camera): an offset per column and hot pixels, visible
  outside the field too.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import pixel_grid
from lab.synth._fundus import Eye, later_fundus_set
from lab.synth._optics import blur_yx, f32, quantise, sample

Vec3 = tuple[float, float, float]
_PAPER = np.array([0.96, 0.94, 0.86], np.float32)  # cream paper's reflectance
_INKS = np.array([[0.95, 0.10, 0.05], [0.10, 0.90, 0.15], [0.03, 0.08, 0.92]], np.float32)  # C, M, Y
_ANGLES = (15.0, 75.0, 0.0)  # screen angles of cyan, magenta, yellow (degrees)


@dataclass(frozen=True)
class FundusSiteV5:
    """How one site of the fifth set photographs, prints, joins or stores the retina."""

    name: str
    flash: Vec3  # exposure per channel (>1 in red: the red channel saturates)
    bloom: float  # share of the light above saturation spread into the surroundings
    halftone: float  # period of the printing screen in px at 96 px (0: not printed)
    montage: tuple[float, float]  # range of the second capture's exposure difference (0, 0: one capture)
    gain: float  # amplification after the sensor (noise, column offsets and hot pixels amplified with it)
    columns: float  # sd of the sensor's column offsets on the 0-255 scale, before the gain
    hot_pixels: float  # share of the sensor's pixels that are hot
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale, before the gain
    jpeg_quality: int | None


# fmt: off
SITES: tuple[FundusSiteV5, ...] = (
    FundusSiteV5("v5site2", (1.9, 1.05, 1.0), 0.25, 0.0, (0.0, 0.0), 1.0, 0.0, 0.0, 0.4, 2.0, None),
    FundusSiteV5("v5site3", (1.0, 1.0, 1.0), 0.0, 3.0, (0.0, 0.0), 1.0, 0.0, 0.0, 0.4, 2.0, 90),
    FundusSiteV5("v5site4", (1.0, 1.0, 1.0), 0.0, 0.0, (0.15, 0.25), 1.0, 0.0, 0.0, 0.4, 2.0, 85),
    FundusSiteV5("v5site5", (0.45, 0.45, 0.45), 0.0, 0.0, (0.0, 0.0), 2.2, 2.5, 0.004, 0.4, 3.0, None),
)
# fmt: on
def _bloom(rgb: np.ndarray, amount: float) -> np.ndarray:
    """Saturated light spilling round the saturated areas (a sensor's blooming), then clipped."""
    size = rgb.shape[0]
    excess = np.clip(rgb - 1.0, 0.0, None)
    spread = blur_yx(excess, 3.0 * size / 96.0, 3.0 * size / 96.0)
    return f32(np.clip(rgb + amount * spread.mean(2, keepdims=True), 0.0, 1.0))


def _halftone(rgb: np.ndarray, period: float) -> np.ndarray:
    """The image printed with rotated dot screens of cyan, magenta and yellow ink on paper, 0-1 reflectance."""
    size = rgb.shape[0]
    yy, xx = pixel_grid(size)
    cover = 1.0 - np.clip(rgb / _PAPER, 0.0, 1.0)  # ink coverage wanted per channel (C, M, Y)
    out = np.ones_like(rgb) * _PAPER
    for k, angle in enumerate(_ANGLES):
        a = np.deg2rad(angle)
        u = (xx * np.cos(a) + yy * np.sin(a)) * 2.0 * np.pi / period
        v = (-xx * np.sin(a) + yy * np.cos(a)) * 2.0 * np.pi / period
        screen = 0.5 - 0.25 * (np.cos(u) + np.cos(v))  # 0 at the dot centres, 1 between them
        dot = np.clip((cover[..., k] - screen) * 4.0 + 0.5, 0.0, 1.0)  # anti-aliased dot edges
        out = out * (1.0 - dot[..., None] * _INKS[k])
    return f32(out)


def _montage(rng: np.random.Generator, rgb: np.ndarray, difference: float) -> np.ndarray:
    """A second capture, exposed differently and out of register, joined at a vertical seam."""
    size = rgb.shape[0]
    yy, xx = pixel_grid(size)
    dy, dx = rng.uniform(1.0, 2.0, 2) * size / 96.0 * rng.choice((-1.0, 1.0), 2)
    second = sample(rgb, yy + dy, xx + dx) * (1.0 + difference * rng.choice((-1.0, 1.0)))
    seam = rng.uniform(0.35, 0.65) * size
    weight = np.clip((xx - seam) / (1.5 * size / 96.0) + 0.5, 0.0, 1.0)[..., None]
    return f32(rgb * (1.0 - weight) + second * weight)


def _sensor_pattern(size: int, site: FundusSiteV5) -> tuple[np.ndarray, np.ndarray]:
    """The camera's own column offsets (1, size) and hot-pixel mask (size, size): the same for every image."""
    fixed = np.random.default_rng(np.random.SeedSequence([zlib.crc32(site.name.encode()), size]))
    columns = f32(fixed.normal(0.0, site.columns / 255.0, (1, size)))
    hot = f32(fixed.random((size, size)) < site.hot_pixels)
    return columns, hot


def camera(rng: np.random.Generator, e: Eye, site: FundusSiteV5, size: int) -> np.ndarray:
    """The stored uint8 image of an eye through ``site``'s camera, print, montage or sensor."""
    px = size / 96.0
    rgb = e.rgb * (1.0 - 0.3 * (np.clip(e.r / e.radius, 0, 1) ** 2.5))[..., None]
    rgb = rgb * np.asarray(site.flash, np.float32)
    if site.bloom > 0:
        rgb = _bloom(rgb, site.bloom)
    rgb = blur_yx(f32(rgb * e.inside[..., None]), site.blur * px, site.blur * px)
    if site.montage[1] > 0:
        rgb = _montage(rng, rgb, float(rng.uniform(*site.montage))) * e.inside[..., None]
    noise = rng.normal(0.0, site.noise / 255.0, (size, size, 3)).astype(np.float32)
    if site.columns > 0 or site.hot_pixels > 0:  # on the sensor: outside the field too
        columns, hot = _sensor_pattern(size, site)
        rgb = (rgb + noise + columns[..., None] + 0.02) * site.gain + hot[..., None]
    else:
        rgb = (rgb + noise * e.inside[..., None]) * site.gain
    if site.halftone > 0:
        rgb = _halftone(np.clip(rgb, 0.0, 1.0), site.halftone * px)
        rgb = blur_yx(rgb, 0.6 * px, 0.6 * px)  # the scanner's optics
    return quantise(np.clip(rgb, 0.0, 1.0))


SPEC = later_fundus_set(
    SITES,
    camera,
    (
        "; fifth site set: a red channel saturated by a bright flash, a halftone print scanned, a two-capture "
        "montage with a seam, a high-gain sensor with column offsets and hot pixels"
    ),
    "v5",
)
