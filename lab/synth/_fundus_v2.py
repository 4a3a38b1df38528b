"""The second site set of the fundus kind (``f2tta synth fundus --sites v2``).

The eye is the same as in the first set (``_fundus.py``: the class is the cup-to-disc ratio) and
site1 is the first set's site1, unchanged. The four new target sites photograph it through
mechanisms the first set never used:

* ``v2site2`` — a handheld smartphone fundus adapter: coaxial LED light (a bright centre falling
  off outwards), corneal and lens reflexes (a bluish-white spot and arc in most images), the
  colour noise of a small phone sensor and strong JPEG compression.
* ``v2site3`` — a confocal scanning laser ophthalmoscope: pseudo-colour from a red and a green
  laser (no blue channel: the retina looks olive, the disc pale yellow), a square field without
  the circular mask, sharp optics, eyelid and eyelash shadows at the top or bottom edge.
* ``v2site4`` — a non-mydriatic camera through a small pupil in eyes with cataract: the yellowed
  lens absorbs blue, its scatter veils the image (lower contrast, a glow, more blur), the small
  pupil leaves a dark crescent on one side, and dust on the optics makes soft dark spots.
* ``v2site5`` — a camera with aggressive in-camera processing: unsharp-mask sharpening (halos
  along vessels and the disc), an S-shaped tone curve, boosted saturation, a notch in the field
  mask, stored as JPEG 55.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from lab.synth._drawing import pixel_grid
from lab.synth._fundus import Eye, later_fundus_set
from lab.synth._optics import blur_yx, chroma_noise, f32, quantise, ramp, unsharp

Vec3 = tuple[float, float, float]
Matrix3 = tuple[Vec3, Vec3, Vec3]
_IDENTITY: Matrix3 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
_REFLEX = np.array([0.85, 0.92, 1.0], np.float32)  # colour of light reflected by the cornea and lens


@dataclass(frozen=True)
class FundusSiteV2:
    """How one site of the second set photographs the retina."""

    name: str
    square: bool  # a square field without the circular mask (scanning laser ophthalmoscope)
    notch: bool  # the field mask has an orientation notch at its top
    lens: Vec3  # transmission of the eye's lens per channel (a yellowed lens absorbs blue)
    haze: float  # share of the light scattered by the lens into a veiling glow
    hotspot: float  # extra light at the field's centre (coaxial LED), relative
    crescent: float  # relative darkening of one side of the field (small pupil)
    reflex_probability: float  # share of images with a corneal/lens reflex
    lash_probability: float  # share of images with eyelid and eyelash shadows
    dust: int  # dark soft spots of dust on the optics, per image at most
    channels: Matrix3  # sensor response: output channel rows from the eye's R, G, B
    gain: float  # exposure
    s_curve: float  # steepness of the S-shaped tone curve (0: linear)
    saturation: float  # chroma gain around the luminance
    sharpen: float  # unsharp-mask amount (radius 1.2 px at 96 px)
    blur: float  # optical blur sigma in pixels at 96 px
    noise: float  # luminance noise sd on the 0-255 scale
    chroma: float  # colour noise sd on the 0-255 scale
    jpeg_quality: int | None


# fmt: off
SITES: tuple[FundusSiteV2, ...] = (
    FundusSiteV2("v2site2", False, False, (1.0, 1.0, 1.0), 0.0, 0.45, 0.0, 0.8, 0.0, 0, _IDENTITY,
                 1.05, 0.0, 1.0, 0.0, 0.9, 3.0, 7.0, 65),
    FundusSiteV2("v2site3", True, False, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0, 0.0, 0.7, 0,
                 ((0.85, 0.10, 0.0), (0.05, 1.15, 0.0), (0.05, 0.10, 0.0)), 1.0, 0.0, 1.0, 0.0, 0.3, 3.0,
                 0.0, None),
    FundusSiteV2("v2site4", False, False, (1.0, 0.82, 0.55), 0.35, 0.0, 0.45, 0.0, 0.0, 4, _IDENTITY,
                 1.1, 0.0, 1.0, 0.0, 1.6, 3.0, 0.0, None),
    FundusSiteV2("v2site5", False, True, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0, 0.0, 0.0, 0, _IDENTITY,
                 1.0, 5.0, 1.35, 1.4, 0.4, 2.0, 0.0, 55),
)
# fmt: on
def _reflex(rng: np.random.Generator, size: int) -> np.ndarray:
    """A corneal reflex (a bright spot near the centre) and a lens reflex (part of a ring), (size, size)."""
    yy, xx = pixel_grid(size)
    c = size / 2.0
    sy, sx = c + rng.normal(0, 0.12, 2) * size
    spot = rng.uniform(0.3, 0.6) * np.exp(
        -((yy - sy) ** 2 + (xx - sx) ** 2) / (2 * (rng.uniform(2.5, 5) * size / 96) ** 2)
    )
    ring_r = rng.uniform(0.25, 0.42) * size
    r = np.sqrt((yy - c) ** 2 + (xx - c) ** 2)
    angle = np.arctan2(yy - c, xx - c)
    centre, span = rng.uniform(-np.pi, np.pi), rng.uniform(0.6, 1.6)
    arc = np.clip(1.0 - np.abs(np.angle(np.exp(1j * (angle - centre)))) / span, 0.0, 1.0)
    ring = rng.uniform(0.15, 0.35) * np.exp(-((r - ring_r) ** 2) / (2 * (1.2 * size / 96) ** 2)) * arc
    return f32(spot + ring)


def _lashes(rng: np.random.Generator, size: int) -> np.ndarray:
    """Transmission (0-1) of an eyelid shadow and out-of-focus eyelashes at the top or bottom edge."""
    yy, _ = pixel_grid(size)
    top = rng.random() < 0.5
    depth = rng.uniform(0.06, 0.18) * size
    edge = yy if top else size - yy
    lid = 1.0 - 0.8 / (1.0 + np.exp((edge - depth) / (2.0 * size / 96)))
    ss = 3
    canvas = Image.new("L", (size * ss, size * ss), 0)
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(3, 8))):
        x0 = rng.uniform(0, size)
        length = rng.uniform(0.15, 0.35) * size
        tilt = rng.normal(0, 0.5)
        x1, y1 = x0 + np.sin(tilt) * length, depth + np.cos(tilt) * length * 0.8
        ys = (0.0, y1) if top else (size, size - y1)
        draw.line(
            [(x0 * ss, ys[0] * ss), (x1 * ss, ys[1] * ss)],
            fill=255,
            width=max(1, round(1.6 * ss * size / 96)),
        )
    lash = np.asarray(canvas.resize((size, size), Image.Resampling.BOX), np.float32) / 255.0
    lash = blur_yx(lash, 1.5 * size / 96, 1.5 * size / 96)
    return (lid * (1.0 - 0.7 * lash)).astype(np.float32)


def _dust(rng: np.random.Generator, size: int, most: int) -> np.ndarray:
    """Transmission (0-1) of up to ``most`` out-of-focus dust specks on the optics."""
    yy, xx = pixel_grid(size)
    out = np.ones((size, size), np.float32)
    for _ in range(int(rng.integers(1, most + 1))):
        cy, cx = rng.uniform(0.15, 0.85, 2) * size
        sigma = rng.uniform(2.0, 4.0) * size / 96
        out *= 1.0 - rng.uniform(0.25, 0.45) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))
    return out


def _tone(rgb: np.ndarray, k: float) -> np.ndarray:
    """An S-shaped tone curve through (0, 0), (0.5, 0.5) and (1, 1); steeper for larger ``k``."""
    if k <= 0:
        return rgb
    lo, hi = 1.0 / (1.0 + np.exp(k / 2)), 1.0 / (1.0 + np.exp(-k / 2))
    return f32((1.0 / (1.0 + np.exp(-k * (rgb - 0.5))) - lo) / (hi - lo))


def _mask(e: Eye, site: FundusSiteV2, size: int) -> np.ndarray:
    if site.square:
        return np.ones((size, size), np.float32)
    inside = e.inside
    if site.notch:
        yy, xx = pixel_grid(size)
        c, w = size / 2.0, 0.06 * size
        notch = (np.abs(xx - c) < w) & (yy < c - e.radius + 2.0 * w)
        inside = inside * (~notch)
    return inside.astype(np.float32)


def camera(rng: np.random.Generator, e: Eye, site: FundusSiteV2, size: int) -> np.ndarray:
    """The stored uint8 photograph of an eye through ``site``'s media, light, optics and sensor."""
    px = size / 96.0
    rgb = e.rgb * np.asarray(site.lens, np.float32)
    if site.haze > 0:  # forward scatter in the lens: a glow of the image itself, contrast lost
        glow = blur_yx(rgb, 8.0 * px, 8.0 * px)
        rgb = (1.0 - site.haze) * rgb + site.haze * (glow + 0.12 * np.asarray(site.lens, np.float32))
    rel = np.clip(e.r / e.radius, 0.0, 1.5)
    light = (1.0 + site.hotspot * np.exp(-(rel**2) / 0.18)) / (1.0 + site.hotspot) * (1.0 - 0.25 * rel**2.5)
    if site.crescent > 0:
        light = light * (1.0 - site.crescent * ramp(rng, size) ** 2)
    rgb = rgb * light[..., None]
    if rng.random() < site.reflex_probability:
        rgb = rgb + _reflex(rng, size)[..., None] * _REFLEX
    if rng.random() < site.lash_probability:
        rgb = rgb * _lashes(rng, size)[..., None]
    if site.dust > 0:
        rgb = rgb * _dust(rng, size, site.dust)[..., None]
    rgb = rgb @ np.asarray(site.channels, np.float32).T * site.gain
    rgb = blur_yx(rgb, site.blur * px, site.blur * px)
    rgb = rgb + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    if site.chroma > 0:
        rgb = rgb + chroma_noise(rng, size, site.chroma / 255.0, 1.2 * px)
    rgb = _tone(np.clip(rgb, 0.0, 1.0), site.s_curve)
    if site.saturation != 1.0:
        luma = rgb @ np.array([0.299, 0.587, 0.114], np.float32)
        rgb = luma[..., None] + site.saturation * (rgb - luma[..., None])
    if site.sharpen > 0:
        rgb = unsharp(rgb, 1.2 * px, site.sharpen)
    return quantise(np.clip(rgb, 0.0, 1.0) * _mask(e, site, size)[..., None])


SPEC = later_fundus_set(
    SITES,
    camera,
    (
        "; second site set: a smartphone adapter with reflexes, a red/green laser ophthalmoscope, cataract "
        "through a small pupil, a camera with aggressive sharpening and tone processing"
    ),
    "v2",
)
