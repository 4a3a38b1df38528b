"""The fourth site set of the fundus kind (``f2tta synth fundus --sites v4``).

The eye is the same as in the first set (``_fundus.py``: the class is the cup-to-disc ratio) and
site1 is the first set's site1, unchanged. The four new target sites photograph it through
mechanisms none of the first three sets used:

* ``v4site2`` — a phone camera with a rolling shutter under an LED dimmed by pulse-width
  modulation: the rows are exposed one after another while the light flickers, so bright and dark
  horizontal bands cross the image; stored as JPEG 75.
* ``v4site3`` — a long exposure on an eye that moves: motion blur along one direction (6-11 px at
  96 px), and a faint ghost of the fundus displaced by a reflection between two surfaces of an
  uncoated objective.
* ``v4site4`` — a camera whose 4:3 frame is stored squeezed into a square without correcting the
  aspect: the round field becomes an upright ellipse (three quarters as wide as it is tall) and
  the anatomy is narrowed with it; a wide-angle adapter adds barrel distortion; JPEG 90.
* ``v4site5`` — a screening programme's enhancement before storage: local contrast normalisation
  of the luminance (each region stretched to the same contrast around its own mean, as adaptive
  histogram equalisation does), which flattens the disc's glow and the field's fall-off and
  exaggerates fine texture; JPEG 80.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import pixel_grid
from lab.synth._fundus import Eye, later_fundus_set
from lab.synth._optics import blur_yx, f32, quantise, sample

_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


@dataclass(frozen=True)
class FundusSiteV4:
    """How one site of the fourth set photographs the retina."""

    name: str
    flicker: float  # relative amplitude of the rolling shutter's bands (0: none)
    motion: float  # length of the motion blur in px at 96 px (0: none)
    ghost: float  # brightness of the displaced ghost image, relative (0: none)
    squeeze: float  # stored width of the field relative to its height (1: square pixels)
    barrel: float  # barrel distortion: relative displacement at the field's edge (0: none)
    local_contrast: float  # strength of the local contrast normalisation (0: none)
    gain: float
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None


# fmt: off
SITES: tuple[FundusSiteV4, ...] = (
    FundusSiteV4("v4site2", 0.22, 0.0, 0.0, 1.0, 0.0, 0.0, 1.05, 0.6, 4.0, 75),
    FundusSiteV4("v4site3", 0.0, 8.5, 0.15, 1.0, 0.0, 0.0, 1.0, 0.4, 2.0, None),
    FundusSiteV4("v4site4", 0.0, 0.0, 0.0, 0.75, 0.08, 0.0, 1.0, 0.4, 2.0, 90),
    FundusSiteV4("v4site5", 0.0, 0.0, 0.0, 1.0, 0.0, 0.8, 1.0, 0.4, 2.0, 80),
)
# fmt: on
def _geometry(e: Eye, site: FundusSiteV4) -> tuple[np.ndarray, np.ndarray]:
    """The eye's colour and field mask as stored: squeezed horizontally and barrel-distorted."""
    size = e.rgb.shape[0]
    yy, xx = pixel_grid(size)
    c = size / 2.0
    dy, dx = (yy - c) / e.radius, (xx - c) / (e.radius * site.squeeze)
    bend = 1.0 + site.barrel * (dy**2 + dx**2)  # a stored point shows the scene further out
    sy, sx = c + dy * bend * e.radius, c + dx * bend * e.radius
    outside = np.sqrt(dy**2 + dx**2) * bend * e.radius - e.radius  # px beyond the field's edge
    inside = f32(np.clip(0.5 - outside, 0.0, 1.0))
    return sample(e.rgb, sy, sx), inside


def _motion(rng: np.random.Generator, rgb: np.ndarray, length: float) -> np.ndarray:
    """Motion blur: the mean of the image shifted along a line of ``length`` px in a random direction."""
    size = rgb.shape[0]
    yy, xx = pixel_grid(size)
    phi = rng.uniform(0.0, np.pi)
    steps = np.linspace(-0.5, 0.5, max(3, round(length) + 1))
    out = np.zeros_like(rgb)
    for t in steps:
        out += sample(rgb, yy + t * length * np.sin(phi), xx + t * length * np.cos(phi))
    return f32(out / steps.size)


def _flicker(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    """The rows' exposure under a flickering light: a pulse train smoothed by the exposure time, (size, 1)."""
    rows = np.arange(size, dtype=np.float32) + 0.5
    period = rng.uniform(10.0, 18.0) * size / 96.0
    wave = np.sin(2.0 * np.pi * rows / period + rng.uniform(0.0, 2.0 * np.pi))
    return f32(1.0 + amplitude * np.clip(1.6 * wave, -1.0, 1.0))[:, None]


def _equalise(rgb: np.ndarray, inside: np.ndarray, strength: float) -> np.ndarray:
    """Local contrast normalisation of the luminance inside the field; the chroma follows it."""
    size = rgb.shape[0]
    sigma = 6.0 * size / 96.0
    w = blur_yx(inside, sigma, sigma) + 1e-3
    luma = rgb @ _LUMA
    mean = blur_yx(luma * inside, sigma, sigma) / w
    detail = luma - mean
    sd = np.sqrt(blur_yx(detail**2 * inside, sigma, sigma) / w) + 0.02
    target = 0.42 + 0.12 * np.tanh(detail / (2.0 * sd)) * 2.0
    new = (1.0 - strength) * luma + strength * target
    return f32(rgb * (new / np.maximum(luma, 1e-3))[..., None])


def camera(rng: np.random.Generator, e: Eye, site: FundusSiteV4, size: int) -> np.ndarray:
    """The stored uint8 image of an eye through ``site``'s camera and processing."""
    px = size / 96.0
    rgb = e.rgb * (1.0 - 0.3 * (np.clip(e.r / e.radius, 0, 1) ** 2.5))[..., None]
    inside = e.inside
    if site.squeeze != 1.0 or site.barrel > 0:
        rgb, inside = _geometry(Eye(rgb, e.inside, e.r, e.radius), site)
    rgb = rgb * inside[..., None]
    if site.motion > 0:
        rgb = _motion(rng, rgb, site.motion * px)
        inside = _motion(rng, inside[..., None], site.motion * px)[..., 0]
    if site.ghost > 0:
        shift = rng.uniform(8.0, 15.0, 2) * px * rng.choice((-1.0, 1.0), 2)
        rgb = rgb + site.ghost * np.roll(rgb, tuple(int(s) for s in shift), axis=(0, 1))
    rgb = blur_yx(rgb, site.blur * px, site.blur * px)
    if site.local_contrast > 0:
        rgb = _equalise(rgb, inside, site.local_contrast)
    if site.flicker > 0:
        rgb = rgb * _flicker(rng, size, site.flicker)[..., None]
    noise = rng.normal(0.0, site.noise / 255.0, (size, size, 3)).astype(np.float32)
    return quantise(np.clip(rgb * site.gain + noise, 0.0, 1.0) * inside[..., None])


SPEC = later_fundus_set(
    SITES,
    camera,
    (
        "; fourth site set: rolling-shutter flicker bands, motion blur with a ghost image, a squeezed "
        "(anamorphic) frame with barrel distortion, local contrast normalisation"
    ),
    "v4",
)
