"""The second site set of the histology kinds (``f2tta synth histo|lesion --sites v2``).

The tissue is the same as in the first set (``_histo.py``, ``_lesion.py``: the class is decided by
nuclear morphology only) and site1 is the first set's site1, unchanged. The four new target
sites image that tissue through mechanisms the first set never used:

* ``v2site2`` — a three-dye stain, haematoxylin-phloxine-saffron (HPS, routine in France and
  Canada): phloxine, redder than eosin, on cytoplasm; saffron, yellow, on collagen; scanned by a
  camera whose colour correction matrix boosts saturation (cross-talk between channels).
* ``v2site3`` — thick sections (optical density x 1.45) cut with folds (a band of doubled tissue
  with a dark crease, in about a third of the patches), scanned with the focus changing across the
  field (a tilted slide: sharp on one side, defocused on the other).
* ``v2site4`` — a scanner without flat-field correction (the illumination drops by a third across
  the field), marker-pen ink on the coverslip (blue, green or black strokes, about a third of the
  patches), and the colour noise of a small demosaicking sensor, stored as JPEG 75.
* ``v2site5`` — a camera on a microscope under a tungsten lamp (warm light, white balance only
  partly corrected), with vignetting, lateral chromatic aberration, a gamma-encoding tone curve,
  a low-saturation colour response, a little less magnification, stored as JPEG 80.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._histo import _CANONICAL, RUIFROK_E, RUIFROK_H, Tissue
from lab.synth._histo_sets import collagen_stained, specs, stained_then_imaged
from lab.synth._optics import (
    band,
    chroma_noise,
    lateral_chromatic,
    quantise,
    radial,
    ramp,
    stroke,
    varying_blur,
)

Vec3 = tuple[float, float, float]
Matrix3 = tuple[Vec3, Vec3, Vec3]
_IDENTITY: Matrix3 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


@dataclass(frozen=True)
class HistoSiteV2:
    """How one site of the second set prepares, stains and images a section."""

    name: str
    h_vector: Vec3  # haematoxylin optical density per R, G, B (normalised)
    h_strength: float
    e_vector: Vec3  # the counterstain on cytoplasm: eosin, or phloxine in HPS
    e_strength: float
    saffron_strength: float  # saffron on collagen (0: no third dye)
    thickness: float  # section thickness relative to site1 (multiplies every optical density)
    fold_probability: float  # share of patches crossed by a fold of doubled tissue
    pen_probability: float  # share of patches with marker-pen ink on the coverslip
    light: Vec3  # colour of the light through empty glass after white balance, 0-1 per channel
    illumination: float  # relative drop of the illumination across the field (no flat-field correction)
    vignette: float  # relative darkening at the corners (camera adapter)
    camera: Matrix3  # the sensor's colour response after its correction matrix (rows: R, G, B out)
    encoding: float  # tone curve: stored = linear ** encoding (1 = linear, 0.55 = a camera's gamma)
    focus: tuple[float, float]  # blur sigma (px at 96 px) at the two ends of a focus gradient
    chromatic: float  # lateral chromatic aberration: px of red/blue displacement at the corners (96 px)
    noise: float  # luminance noise sd on the 0-255 scale
    chroma: float  # colour (per-channel, demosaicked) noise sd on the 0-255 scale
    jpeg_quality: int | None
    scale: float  # magnification relative to site1
    stain_jitter: float = 0.08


SAFFRON = (0.02, 0.30, 0.95)  # crocin absorbs blue: collagen looks yellow-orange
PHLOXINE = (0.06, 0.92, 0.38)  # absorbs green and some blue: redder than eosin
MAYER_H = (0.70, 0.62, 0.36)  # a bluer haematoxylin
INKS: tuple[Vec3, ...] = (
    (1.05, 0.62, 0.10),  # blue marker: absorbs red and green
    (0.95, 0.15, 0.80),  # green marker: absorbs red and blue
    (1.10, 1.05, 1.00),  # black marker
)

# fmt: off
SITES: tuple[HistoSiteV2, ...] = (
    HistoSiteV2("v2site2", MAYER_H, 1.0, PHLOXINE, 0.9, 0.6, 1.0, 0.0, 0.0, (0.97, 0.96, 0.95), 0.0, 0.0,
                ((1.18, -0.12, -0.06), (-0.10, 1.16, -0.06), (-0.04, -0.14, 1.18)), 1.0, (0.5, 0.5), 0.0,
                2.0, 0.0, None, 1.0),
    HistoSiteV2("v2site3", RUIFROK_H, 1.0, RUIFROK_E, 1.0, 0.0, 1.45, 0.35, 0.0, (0.95, 0.95, 0.96), 0.0, 0.0,
                _IDENTITY, 1.0, (0.3, 2.4), 0.0, 3.0, 0.0, None, 1.0),
    HistoSiteV2("v2site4", RUIFROK_H, 1.0, RUIFROK_E, 1.0, 0.0, 1.0, 0.0, 0.3, (0.96, 0.96, 0.97), 0.35, 0.0,
                _IDENTITY, 1.0, (0.6, 0.6), 0.0, 2.0, 6.0, 75, 1.0),
    HistoSiteV2("v2site5", RUIFROK_H, 1.0, RUIFROK_E, 1.0, 0.0, 1.0, 0.0, 0.0, (1.0, 0.86, 0.68), 0.0, 0.45,
                ((0.90, 0.07, 0.03), (0.06, 0.88, 0.06), (0.03, 0.09, 0.88)), 0.55, (0.7, 0.7), 0.9,
                4.0, 0.0, 80, 0.85),
)
# fmt: on


def optical_density(rng: np.random.Generator, layers: Tissue, site: HistoSiteV2, size: int) -> np.ndarray:
    """The section's optical density (H, W, 3): dyes, thickness, folds and ink."""
    # saffron displaces phloxine on collagen
    od = collagen_stained(rng, layers, site, SAFFRON, site.saffron_strength, 0.5) * site.thickness
    if rng.random() < site.fold_probability:
        f = size / _CANONICAL
        fold = band(rng, size, rng.uniform(10.0, 24.0) * f, 1.5 * f)
        shift = tuple(int(s) for s in rng.integers(-size // 3, size // 3 + 1, 2))
        under = np.roll(od, shift, axis=(0, 1))  # the folded-over layer: other tissue of the same section
        crease = 4.0 * fold * (1.0 - fold)  # darkest where the section bends, at the fold's edges
        od = od + fold[..., None] * under + 0.5 * crease[..., None] * od.mean((0, 1))
    if rng.random() < site.pen_probability:
        ink = np.asarray(INKS[int(rng.integers(0, len(INKS)))], np.float32) * rng.uniform(0.5, 0.9)
        od = od + stroke(rng, size, rng.uniform(16.0, 36.0) * size / _CANONICAL)[..., None] * ink
    return od.astype(np.float32)


def image(rng: np.random.Generator, od: np.ndarray, site: HistoSiteV2, size: int) -> np.ndarray:
    """The stored uint8 image of a section's optical density under ``site``'s light, optics and camera."""
    light = np.asarray(site.light, np.float32) * np.exp(-od)
    field: np.ndarray = np.ones((size, size), np.float32)
    if site.illumination > 0:
        field = field * (1.0 - site.illumination * ramp(rng, size))
    if site.vignette > 0:
        field = field * (1.0 - site.vignette * radial(size) ** 2)
    light = light * field[..., None]
    px = size / _CANONICAL
    near, far = site.focus
    sigma = (near + (far - near) * ramp(rng, size)) * px
    light = varying_blur(light, sigma)
    if site.chromatic > 0:
        light = lateral_chromatic(light, site.chromatic * px)
    light = light + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    if site.chroma > 0:
        light = light + chroma_noise(rng, size, site.chroma / 255.0, 1.2 * px)
    rgb = light @ np.asarray(site.camera, np.float32).T
    return quantise(np.power(np.clip(rgb, 0.0, 1.0), site.encoding))


DESCRIPTION = (
    "; second site set: HPS stain with a saturating camera, thick folded sections with a focus gradient, "
    "uneven illumination with marker ink and colour noise, a microscope camera under tungsten light"
)
SPECS = specs(SITES, stained_then_imaged(optical_density, image), DESCRIPTION, "v2")  # histo and lesion
