"""The third site set of the fundus kind (``f2tta synth fundus --sites v3``).

The eye is the same as in the first set (``_fundus.py``: the class is the cup-to-disc ratio) and
site1 is the first set's site1, unchanged. The four new target sites photograph it through
mechanisms neither the first nor the second set used:

* ``v3site2`` — red-free photography: a green filter in front of the flash, stored as a grey
  image (high contrast for vessels and the nerve fibre layer, the red of the retina gone).
* ``v3site3`` — scanned 35 mm colour slides from an archive: the cyan dye has faded (a red-magenta
  cast, lifted blacks), film grain that clumps, a dark scratch along the film, the slide mount
  cropping the top and bottom of the field, stored as JPEG 85.
* ``v3site4`` — near-infrared (about 820 nm) reflectance: a grey image dominated by the deeper
  red light (low vessel contrast, the choroid's large vessels showing through as broad stripes),
  a softer image from the longer wavelength.
* ``v3site5`` — a video fundus camera: a low-resolution interlaced sensor (the field captured at
  40 % of the stored resolution, the two fields of a frame offset by the eye's motion) upscaled
  by the frame grabber, with the colour subsampled (4:2:0), stored as JPEG 80.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from lab.synth._drawing import pixel_grid, smooth_noise
from lab.synth._fundus import Eye, later_fundus_set
from lab.synth._optics import blur_yx, f32, quantise, sample

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class FundusSiteV3:
    """How one site of the third set photographs the retina."""

    name: str
    grey: Vec3  # monochrome: weights of the eye's R, G, B in the grey image ((0, 0, 0): colour)
    choroid: float  # relative darkening along the choroid's large vessels (near infrared)
    fade: Vec3  # density left of each film dye layer (cyan, magenta, yellow); (1, 1, 1): no film
    grain: float  # film grain sd (0-1 scale)
    mount: float  # share of the side cropped by the slide mount, top and bottom each
    scratch_probability: float  # share of slides with a scratch
    capture: float  # sensor resolution relative to the stored image (1: full resolution)
    interlace: float  # offset in px (at 96 px) between the two fields of an interlaced frame
    chroma_subsampling: bool  # colour stored at half resolution (4:2:0)
    gain: float
    gamma: float  # stored = linear ** (1 / gamma)
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None


# fmt: off
SITES: tuple[FundusSiteV3, ...] = (
    FundusSiteV3("v3site2", (0.0, 0.92, 0.08), 0.0, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0, 1.0, 0.0, False,
                 1.0, 1.2, 0.4, 2.0, None),
    FundusSiteV3("v3site3", (0.0, 0.0, 0.0), 0.0, (0.55, 0.9, 0.8), 0.01, 0.1, 0.6, 1.0, 0.0, False,
                 1.0, 1.0, 0.6, 1.0, 85),
    FundusSiteV3("v3site4", (0.6, 0.4, 0.0), 0.12, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0, 1.0, 0.0, False,
                 1.0, 1.0, 1.5, 2.0, None),
    FundusSiteV3("v3site5", (0.0, 0.0, 0.0), 0.0, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0, 0.4, 1.2, True,
                 1.05, 1.0, 0.5, 2.0, 80),
)
# fmt: on
def _choroid_vessels(rng: np.random.Generator, size: int) -> np.ndarray:
    """0-1 map of the choroid's large vessels: broad, wavy tubes along the zero lines of a smooth field."""
    field = smooth_noise(rng, size, 5)
    return f32(np.exp(-((field / 0.5) ** 2)))


def _film(rng: np.random.Generator, rgb: np.ndarray, site: FundusSiteV3) -> np.ndarray:
    """A colour slide of ``rgb``: dye densities, faded per layer, grain, then scanned back to RGB."""
    size = rgb.shape[0]
    density = -np.log10(np.clip(rgb, 1e-3, 1.0))  # each dye layer absorbs its complementary channel
    density = density * np.asarray(site.fade, np.float32) + 0.12 * (1.0 - np.asarray(site.fade, np.float32))
    grain = blur_yx(rng.standard_normal((size, size, 3)).astype(np.float32), 0.7, 0.7)
    density = density * (1.0 + site.grain * 12.0 * grain)
    out = np.power(10.0, -density)
    if rng.random() < site.scratch_probability:  # a scratch through the emulsion: a thin dark line
        yy, xx = pixel_grid(size)
        phi = rng.uniform(-0.3, 0.3) + (np.pi / 2 if rng.random() < 0.5 else 0.0)
        d = (xx - rng.uniform(0.2, 0.8) * size) * np.cos(phi) + (yy - size / 2.0) * np.sin(phi)
        out = out * (1.0 - 0.6 * np.exp(-(d**2) / (2 * (0.5 * size / 96) ** 2)))[..., None]
    mount = round(site.mount * size)
    if mount > 0:
        out[:mount] = 0.0
        out[size - mount :] = 0.0
    return f32(out)


def _video(rng: np.random.Generator, rgb: np.ndarray, site: FundusSiteV3) -> np.ndarray:
    """An interlaced low-resolution capture, upscaled by the frame grabber; colour at half resolution."""
    size = rgb.shape[0]
    low = max(8, round(size * site.capture))
    small = np.stack(
        [
            np.asarray(Image.fromarray(rgb[..., c]).resize((low, low), Image.Resampling.BOX), np.float32)
            for c in range(3)
        ],
        axis=-1,
    )
    offset = rng.uniform(0.5, 1.0) * site.interlace * low / 96.0 * (1 if rng.random() < 0.5 else -1)
    yy, xx = pixel_grid(low)
    shifted = sample(small, yy, xx + offset)  # the second field, half a frame time later
    small[1::2] = shifted[1::2]
    big = np.stack(
        [
            np.asarray(
                Image.fromarray(small[..., c]).resize((size, size), Image.Resampling.BILINEAR), np.float32
            )
            for c in range(3)
        ],
        axis=-1,
    )
    rows = np.repeat(np.arange(low), int(np.ceil(size / low)))[:size]
    lines = np.asarray(
        Image.fromarray(small[..., 1]).resize((size, low), Image.Resampling.BILINEAR), np.float32
    )
    big = big + (lines[rows] - big[..., 1])[..., None] * 0.6  # the field lines stay visible: combing
    if site.chroma_subsampling:
        luma = big @ np.array([0.299, 0.587, 0.114], np.float32)
        chroma = big - luma[..., None]
        chroma = blur_yx(chroma, 1.2 * size / 96, 1.2 * size / 96)
        big = luma[..., None] + chroma
    return f32(big)


def camera(rng: np.random.Generator, e: Eye, site: FundusSiteV3, size: int) -> np.ndarray:
    """The stored uint8 image of an eye through ``site``'s filter, film or sensor."""
    px = size / 96.0
    rgb = e.rgb * (1.0 - 0.3 * (np.clip(e.r / e.radius, 0, 1) ** 2.5))[..., None]
    rgb = blur_yx(rgb, site.blur * px, site.blur * px)
    if any(site.grey):
        grey = rgb @ np.asarray(site.grey, np.float32)
        if site.choroid > 0:
            grey = grey * (1.0 - site.choroid * _choroid_vessels(rng, size))
        rgb = np.repeat(grey[..., None], 3, axis=2)
    rgb = np.clip(rgb * site.gain, 0.0, 1.0) * e.inside[..., None]
    if site.fade != (1.0, 1.0, 1.0):
        rgb = _film(rng, rgb, site)
    if site.capture < 1.0:
        rgb = _video(rng, rgb, site)
    noise = rng.normal(0.0, site.noise / 255.0, (size, size, 1 if any(site.grey) else 3)).astype(np.float32)
    rgb = np.power(np.clip(rgb + noise, 0.0, 1.0), 1.0 / site.gamma)
    return quantise(rgb * e.inside[..., None])


SPEC = later_fundus_set(
    SITES,
    camera,
    (
        "; third site set: red-free monochrome, scanned faded colour slides, near-infrared reflectance, "
        "an interlaced low-resolution video camera"
    ),
    "v3",
)
