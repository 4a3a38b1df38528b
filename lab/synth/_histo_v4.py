"""The fourth site set of the histology kinds (``f2tta synth histo|lesion --sites v4``).

The tissue is the same as in the first set (``_histo.py``, ``_lesion.py``: the class is decided by
nuclear morphology only) and site1 is the first set's site1, unchanged. The four new target sites
image that tissue through mechanisms none of the first three sets used:

* ``v4site2`` — a Romanowsky (Giemsa-like) stain instead of H&E: azure-eosinate makes the
  chromatin purple-magenta, methylene blue makes the cytoplasm and stroma pale blue-grey; a cool
  white LED lamp.
* ``v4site3`` — epi-fluorescence instead of transmitted light: a nuclear fluorochrome and the
  eosin's own fluorescence glow on a black background (blue nuclei, green cytoplasm), the dyes
  bleached unevenly across the field by the earlier exposure, and the photon (shot) noise of a
  short exposure.
* ``v4site4`` — an archive of old slides: the eosin bleached by decades of light, the
  haematoxylin oxidised to brown, and air bubbles under the coverslip (a dark refracting rim round
  a clearer disc) in about half the patches; stored as JPEG 85.
* ``v4site5`` — a phone held to the microscope's eyepiece: the eyepiece's circular field stop
  (black corners), the phone tilted (a keystone: one side of the field larger than the other),
  the phone's automatic white balance (grey world) and its noise reduction; stored as JPEG 70.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import pixel_grid
from lab.synth._histo import _CANONICAL, RUIFROK_E, RUIFROK_H, Tissue, stains
from lab.synth._histo_sets import StainedSite, specs
from lab.synth._optics import blur_yx, f32, quantise, ramp, sample


@dataclass(frozen=True)
class HistoSiteV4(StainedSite):
    """How one site of the fourth set prepares, stains and images a section."""

    photons: float  # fluorescence: photons per pixel at full emission (0: transmitted light)
    bleach: float  # fluorescence: relative loss of emission across the field (photobleaching)
    bubble_probability: float  # share of patches with an air bubble under the coverslip
    field_stop: float  # radius of the eyepiece's circular field, relative to half the side (0: none)
    keystone: float  # relative change of magnification across the field (a tilted phone)
    grey_world: bool  # automatic white balance: each channel scaled to the image's mean grey
    denoise: float  # noise-reduction blur sigma in px at 96 px (a phone's processing)
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None
    scale: float  # magnification relative to site1
    stain_jitter: float = 0.08


AZURE_EOSINATE = (0.34, 0.90, 0.24)  # absorbs green, some red: purple-magenta chromatin
METHYLENE_BLUE = (0.86, 0.48, 0.12)  # absorbs red: pale blue cytoplasm
OXIDISED_H = (0.30, 0.52, 0.80)  # faded haematoxylin: absorbs blue most, brown
NUCLEAR_EMISSION = (0.20, 0.45, 1.00)  # a blue nuclear fluorochrome (DAPI-like)
EOSIN_EMISSION = (0.55, 1.00, 0.25)  # eosin fluoresces yellow-green
_NONE = (0.0, 0.0, 0.0)

# fmt: off
SITES: tuple[HistoSiteV4, ...] = (
    HistoSiteV4("v4site2", AZURE_EOSINATE, 1.0, METHYLENE_BLUE, 0.55, (0.93, 0.96, 1.0),
                0.0, 0.0, 0.0, 0.0, 0.0, False, 0.0, 0.5, 2.0, None, 1.0),
    HistoSiteV4("v4site3", NUCLEAR_EMISSION, 1.0, EOSIN_EMISSION, 0.55, _NONE,
                60.0, 0.45, 0.0, 0.0, 0.0, False, 0.0, 0.6, 1.0, None, 1.0),
    HistoSiteV4("v4site4", OXIDISED_H, 0.9, RUIFROK_E, 0.35, (0.96, 0.95, 0.96),
                0.0, 0.0, 0.5, 0.0, 0.0, False, 0.0, 0.5, 2.0, 85, 1.0),
    HistoSiteV4("v4site5", RUIFROK_H, 1.0, RUIFROK_E, 1.0, (0.97, 0.93, 0.85),
                0.0, 0.0, 0.0, 0.92, 0.25, True, 1.0, 0.7, 5.0, 70, 1.0),
)
# fmt: on


def _bubble(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """An air bubble under the coverslip: ``(rim, inside)``, 0-1 maps (size, size) of its edge and disc."""
    f = size / _CANONICAL
    yy, xx = pixel_grid(size)
    radius = rng.uniform(18.0, 40.0) * f
    cy, cx = rng.uniform(-0.2, 1.2, 2) * size
    r = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
    width = rng.uniform(1.5, 3.0) * f
    rim = np.exp(-(((r - radius) / width) ** 2))
    inside = np.clip((radius - r) / f + 0.5, 0.0, 1.0)
    return f32(rim), f32(inside)


def _brightfield(rng: np.random.Generator, layers: Tissue, site: HistoSiteV4, size: int) -> np.ndarray:
    """Transmitted light (H, W, 3) through the stained section, with an air bubble if one is drawn."""
    hv, ev = stains(rng, site)
    od = layers.haem[..., None] * hv + layers.eosin[..., None] * ev
    light = np.asarray(site.light, np.float32) * np.exp(-od)
    if rng.random() < site.bubble_probability:  # no mounting medium inside: less light scattered off
        rim, inside = _bubble(rng, size)
        return f32(light * (1.0 + 0.06 * inside[..., None]) * (1.0 - 0.75 * rim[..., None]))
    return f32(light)


def _fluorescence(rng: np.random.Generator, layers: Tissue, site: HistoSiteV4, size: int) -> np.ndarray:
    """Emitted light (H, W, 3) on a black background, bleached across the field, with shot noise."""
    jit = site.stain_jitter
    nuclear = (1.0 - np.exp(-1.6 * layers.haem)) * site.h_strength * rng.uniform(1 - jit, 1 + jit)
    cyto = (1.0 - np.exp(-2.0 * layers.eosin)) * site.e_strength * rng.uniform(1 - jit, 1 + jit)
    emitted = nuclear[..., None] * np.asarray(site.h_vector, np.float32)
    emitted = emitted + cyto[..., None] * np.asarray(site.e_vector, np.float32)
    emitted = emitted * (1.0 - site.bleach * ramp(rng, size))[..., None]
    px = size / _CANONICAL
    emitted = blur_yx(f32(emitted), site.blur * px, site.blur * px)
    counts = rng.poisson(np.clip(emitted, 0.0, None) * site.photons + 0.5)  # + the camera's dark counts
    return f32(counts / site.photons)


def _eyepiece(rng: np.random.Generator, light: np.ndarray, site: HistoSiteV4) -> np.ndarray:
    """A phone's photograph through the eyepiece: keystone, circular field stop, grey-world balance."""
    size = light.shape[0]
    yy, xx = pixel_grid(size)
    c = size / 2.0
    phi = rng.uniform(0.0, 2.0 * np.pi)
    along = ((xx - c) * np.cos(phi) + (yy - c) * np.sin(phi)) / size  # -0.7 .. 0.7 across the tilt
    mag = 1.0 + site.keystone * along
    light = sample(light, c + (yy - c) / mag, c + (xx - c) / mag)
    r = np.sqrt((yy - c) ** 2 + (xx - c) ** 2) / c
    stop = np.clip((site.field_stop - r) * c / 1.5 + 0.5, 0.0, 1.0)  # a soft-edged circle
    light = light * (stop * (1.0 - 0.35 * (r / site.field_stop) ** 4))[..., None]
    if site.grey_world:
        seen = stop > 0.5
        means = light[seen].mean(0)
        light = light * (means.mean() / np.maximum(means, 1e-3)) ** 0.7  # partly: a phone's AWB is damped
    return f32(light)


def draw(rng: np.random.Generator, layers: Tissue, site: HistoSiteV4, size: int) -> np.ndarray:
    """The stored uint8 image of one patch's layers at a fourth-set site."""
    px = size / _CANONICAL
    if site.photons > 0:
        light = _fluorescence(rng, layers, site, size)
    else:
        light = blur_yx(_brightfield(rng, layers, site, size), site.blur * px, site.blur * px)
    light = light + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    if site.field_stop > 0:
        light = _eyepiece(rng, light, site)
    if site.denoise > 0:
        light = blur_yx(light, site.denoise * px, site.denoise * px)
    return quantise(np.clip(light, 0.0, 1.0))


DESCRIPTION = (
    "; fourth site set: a Giemsa-like stain, epi-fluorescence with photobleaching and shot noise, "
    "archival slides with bleached eosin, brown haematoxylin and air bubbles, a phone at the eyepiece"
)
SPECS = specs(SITES, draw, DESCRIPTION, "v4")  # histo and lesion
