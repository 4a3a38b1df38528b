"""The third site set of the histology kinds (``f2tta synth histo|lesion --sites v3``).

The tissue is the same as in the first set (``_histo.py``, ``_lesion.py``: the class is decided by
nuclear morphology only) and site1 is the first set's site1, unchanged. The four new target sites
image that tissue through mechanisms neither the first nor the second set used:

* ``v3site2`` — frozen sections (an intra-operative consultation): ice crystals leave clear
  holes in the tissue, the microtome's chatter makes parallel bands of thicker and thinner
  section, a rapid stain gives pale, bluish eosin, and the uneven section is a little out of focus.
* ``v3site3`` — Masson's trichrome instead of H&E: Weigert's iron haematoxylin makes the nuclei
  brown-black, Biebrich scarlet makes the cytoplasm red and aniline blue makes the collagen blue.
* ``v3site4`` — a line-scan slide scanner: the image is built from strips, so a stitching seam
  (a step in brightness and a misregistration of a pixel or two) crosses most patches, the line
  sensor's pixels differ in gain (streaks along the scan direction), and the scanner stores heavy
  JPEG (quality 30: visible 8 x 8 blocks).
* ``v3site5`` — a 40x objective (1.4 x the magnification of site1) on an over-exposed camera:
  the light through empty glass and pale stroma clips at white, the stains lose density in the
  highlights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import pixel_grid
from lab.synth._histo import _CANONICAL, RUIFROK_E, RUIFROK_H, Tissue
from lab.synth._histo_sets import collagen_stained, specs, stained_then_imaged
from lab.synth._optics import blur_yx, f32, quantise

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class HistoSiteV3:
    """How one site of the third set prepares, stains and images a section."""

    name: str
    h_vector: Vec3  # nuclear stain's optical density per R, G, B (normalised)
    h_strength: float
    e_vector: Vec3  # cytoplasm stain (eosin, or Biebrich scarlet in the trichrome)
    e_strength: float
    collagen_vector: Vec3  # third dye on collagen (aniline blue in the trichrome)
    collagen_strength: float  # 0: no third dye
    light: Vec3  # light through empty glass after white balance, 0-1 per channel
    ice: float  # ice-crystal holes per canonical field (frozen sections)
    chatter: float  # relative amplitude of the microtome's chatter bands (section thickness)
    seam_probability: float  # share of patches crossed by a strip-stitching seam
    streaks: float  # sd of the line sensor's per-pixel gain (streaks along the scan)
    exposure: float  # camera exposure (>1: highlights clip at white)
    blur: float  # Gaussian blur sigma in px at 96 px
    noise: float  # luminance noise sd on the 0-255 scale
    jpeg_quality: int | None
    scale: float  # magnification relative to site1
    stain_jitter: float = 0.08


IRON_H = (0.58, 0.62, 0.68)  # Weigert's iron haematoxylin: brown-black, absorbs every channel
SCARLET = (0.05, 0.86, 0.50)  # Biebrich scarlet-acid fuchsin: absorbs green and blue, red cytoplasm
ANILINE_BLUE = (0.88, 0.45, 0.10)  # absorbs red and green: blue collagen
FROZEN_E = (0.10, 0.80, 0.42)  # a rapid eosin, bluish-pink

# fmt: off
SITES: tuple[HistoSiteV3, ...] = (
    HistoSiteV3("v3site2", RUIFROK_H, 1.05, FROZEN_E, 0.6, (0.0, 0.0, 1.0), 0.0, (0.95, 0.96, 0.98),
                9.0, 0.3, 0.0, 0.0, 1.0, 1.1, 3.0, None, 1.0),
    HistoSiteV3("v3site3", IRON_H, 1.1, SCARLET, 1.8, ANILINE_BLUE, 1.1, (0.96, 0.95, 0.96),
                0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 2.0, None, 1.0),
    HistoSiteV3("v3site4", RUIFROK_H, 1.0, RUIFROK_E, 1.0, (0.0, 0.0, 1.0), 0.0, (0.95, 0.95, 0.96),
                0.0, 0.0, 0.85, 0.035, 1.0, 0.6, 2.0, 30, 1.0),
    HistoSiteV3("v3site5", RUIFROK_H, 1.0, RUIFROK_E, 1.0, (0.0, 0.0, 1.0), 0.0, (0.96, 0.95, 0.97),
                0.0, 0.0, 0.0, 0.0, 1.5, 0.4, 2.0, None, 1.4),
)
# fmt: on


def _ice_holes(rng: np.random.Generator, size: int, per_field: float) -> np.ndarray:
    """0-1 map of the clear holes ice crystals leave in a frozen section (many small, a few larger)."""
    f = size / _CANONICAL
    n = int(rng.poisson(per_field * (size / (f * _CANONICAL)) ** 2))
    yy, xx = pixel_grid(size)
    holes = np.zeros((size, size), np.float32)
    for _ in range(n):
        cy, cx = rng.uniform(0, size, 2)
        ry = rng.lognormal(np.log(1.8), 0.45) * f
        rx = ry * rng.uniform(0.6, 1.6)
        rho = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
        holes = np.maximum(holes, np.clip((1.0 - rho) * min(ry, rx) + 0.5, 0.0, 1.0))
    return holes


def _chatter(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    """Relative section thickness with chatter: parallel sinusoidal bands across the cut, (size, size)."""
    yy, xx = pixel_grid(size)
    phi = rng.uniform(0.0, np.pi)
    u = xx * np.cos(phi) + yy * np.sin(phi)
    period = rng.uniform(7.0, 11.0) * size / _CANONICAL
    return f32(1.0 + amplitude * np.sin(2.0 * np.pi * u / period + rng.uniform(0.0, 2.0 * np.pi)))


def optical_density(rng: np.random.Generator, layers: Tissue, site: HistoSiteV3, size: int) -> np.ndarray:
    """The section's optical density (H, W, 3): dyes, ice holes and chatter."""
    # the third dye takes the collagen from the cytoplasm stain
    od = collagen_stained(rng, layers, site, site.collagen_vector, site.collagen_strength, 0.8)
    if site.ice > 0:
        od = od * (1.0 - 0.9 * _ice_holes(rng, size, site.ice))[..., None]
    if site.chatter > 0:
        od = od * _chatter(rng, size, site.chatter)[..., None]
    return f32(od)


def _line_scan(rng: np.random.Generator, light: np.ndarray, site: HistoSiteV3) -> np.ndarray:
    """Strips of a line-scan scanner (scan along the rows): sensor streaks and a stitching seam."""
    size = light.shape[1]
    if site.streaks > 0:  # each sensor pixel's gain, constant along the scan (down a column)
        gain = 1.0 + site.streaks * blur_yx(rng.standard_normal((1, size)).astype(np.float32), 0.0, 0.6)
        light = light * gain[0][None, :, None]
    if rng.random() < site.seam_probability:
        seam = int(rng.integers(size // 5, size - size // 5))
        shift = int(rng.choice((-2, -1, 1, 2)))
        right = np.roll(light[:, seam:], shift * max(1, round(size / _CANONICAL)), axis=0)
        light = np.concatenate([light[:, :seam], right * rng.uniform(0.86, 0.92)], axis=1)
    return f32(light)


def image(rng: np.random.Generator, od: np.ndarray, site: HistoSiteV3, size: int) -> np.ndarray:
    """The stored uint8 image of a section's optical density under ``site``'s light and camera."""
    light = np.asarray(site.light, np.float32) * np.exp(-od)
    px = size / _CANONICAL
    light = blur_yx(light, site.blur * px, site.blur * px)
    light = _line_scan(rng, light, site)
    light = light * site.exposure
    light = light + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    return quantise(np.clip(light, 0.0, 1.0))


DESCRIPTION = (
    "; third site set: frozen sections with ice-crystal holes and chatter, Masson's trichrome, a line-scan "
    "scanner with stitching seams, sensor streaks and JPEG 30, a 40x objective on an over-exposed camera"
)
SPECS = specs(SITES, stained_then_imaged(optical_density, image), DESCRIPTION, "v3")  # histo and lesion
