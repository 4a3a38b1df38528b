"""The fifth site set of the histology kinds (``f2tta synth histo|lesion --sites v5``).

The tissue is the same as in the first set (``_histo.py``, ``_lesion.py``: the class is decided by
nuclear morphology only) and site1 is the first set's site1, unchanged. The four new target sites
image that tissue through mechanisms none of the first four sets used:

* ``v5site2`` — toluidine blue on a semi-thin resin section: one dye for everything (the nuclei
  deep blue, the cytoplasm and stroma pale blue, no second hue), a section a third as thick, sharp.
* ``v5site3`` — phase contrast of an unstained section: the optical path of the tissue, not a dye,
  makes the image: dense nuclei dark on a grey-green field (the green interference filter), each
  bordered by a bright halo from the phase ring.
* ``v5site4`` — a laboratory pipeline that normalises every patch's colour to its template
  (Reinhard-style: each channel's mean and spread of log intensity set to the template's) before
  storage: every patch has the same overall colour, whatever its stain or density.
* ``v5site5`` — blocks fixed in acid formalin (brown-black formalin pigment granules in clusters in
  about two thirds of the patches), sent by a telepathology system that stores images with a palette
  of 48 colours (Floyd-Steinberg dithering, as a GIF).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from lab.synth._drawing import pixel_grid
from lab.synth._histo import _CANONICAL, RUIFROK_E, RUIFROK_H, Tissue, stains, unit
from lab.synth._histo_sets import StainedSite, Vec3, specs
from lab.synth._optics import blur_yx, f32, quantise


@dataclass(frozen=True)
class HistoSiteV5(StainedSite):
    """How one site of the fifth set prepares, stains, images and stores a section."""

    phase: float  # phase contrast: darkening per unit of optical path (0: brightfield)
    template: tuple[Vec3, Vec3] | None  # colour normalisation: log-intensity mean and sd per channel
    pigment_probability: float  # share of patches with formalin pigment
    palette: int  # colours of the stored palette (0: full colour)
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None
    scale: float  # magnification relative to site1
    stain_jitter: float = 0.08


TOLUIDINE_BLUE = (0.72, 0.50, 0.18)  # absorbs red and some green: blue, one hue
FORMALIN_PIGMENT = (0.62, 0.70, 0.80)  # acid formalin haematin: brown-black
_PHASE_LIGHT = (0.62, 0.72, 0.60)  # a green interference filter, the phase ring's darker field
#: The template of the normalising laboratory: log intensity mean and sd per channel (a lilac H&E).
_TEMPLATE: tuple[Vec3, Vec3] = ((-0.42, -0.78, -0.36), (0.20, 0.34, 0.17))

# fmt: off
SITES: tuple[HistoSiteV5, ...] = (
    HistoSiteV5("v5site2", TOLUIDINE_BLUE, 0.75, TOLUIDINE_BLUE, 0.22, (0.97, 0.97, 0.97),
                0.0, None, 0.0, 0, 0.3, 2.0, None, 1.0),
    HistoSiteV5("v5site3", RUIFROK_H, 0.0, RUIFROK_E, 0.0, _PHASE_LIGHT,
                0.55, None, 0.0, 0, 0.6, 2.0, None, 1.0),
    HistoSiteV5("v5site4", RUIFROK_H, 1.0, RUIFROK_E, 1.0, (0.95, 0.94, 0.96),
                0.0, _TEMPLATE, 0.0, 0, 0.5, 2.0, None, 1.0),
    HistoSiteV5("v5site5", RUIFROK_H, 1.0, RUIFROK_E, 1.0, (0.95, 0.94, 0.96),
                0.0, None, 0.65, 48, 0.5, 2.0, None, 1.0),
)
# fmt: on


def _pigment(rng: np.random.Generator, size: int) -> np.ndarray:
    """Optical density (size, size) of formalin pigment: fine granules in one to three clusters."""
    f = size / _CANONICAL
    yy, xx = pixel_grid(size)
    clusters = int(rng.integers(1, 4))
    centres = rng.uniform(0.1, 0.9, (clusters, 2)) * size
    n = rng.integers(15, 40, clusters)
    gy = np.concatenate([np.full(k, c[0]) for k, c in zip(n, centres, strict=True)])
    gx = np.concatenate([np.full(k, c[1]) for k, c in zip(n, centres, strict=True)])
    gy = gy + rng.normal(0.0, 7.0 * f, gy.size)
    gx = gx + rng.normal(0.0, 7.0 * f, gx.size)
    sigma = 0.7 * f
    d2 = (yy[None] - gy[:, None, None]) ** 2 + (xx[None] - gx[:, None, None]) ** 2
    return f32(np.exp(-d2 / (2 * sigma**2)).sum(0) * 1.4)


def _phase_contrast(layers: Tissue, site: HistoSiteV5, size: int) -> np.ndarray:
    """Positive phase contrast (H, W, 3): dense structures darker than the field, bright halos round them."""
    path = 1.0 * layers.haem + 0.5 * layers.eosin  # optical path difference, arbitrary units
    halo = 3.0 * size / _CANONICAL  # the phase ring's halo: the image minus its blurred self
    relief = path - blur_yx(f32(path), halo, halo)
    grey = np.exp(-site.phase * relief) * (1.0 - 0.12 * path)
    return f32(grey[..., None] * np.asarray(site.light, np.float32))


def _normalise(light: np.ndarray, template: tuple[Vec3, Vec3]) -> np.ndarray:
    """Each channel's log intensity given the template's mean and spread (Reinhard-style)."""
    logs = np.log(np.clip(light, 1.0 / 255.0, 1.0))
    mean, sd = logs.mean((0, 1)), logs.std((0, 1)) + 1e-4
    out = (logs - mean) / sd * np.asarray(template[1]) + np.asarray(template[0])
    return f32(np.exp(out))


def _palette(rgb: np.ndarray, colours: int) -> np.ndarray:
    """``rgb`` (uint8) reduced to an adaptive palette of ``colours`` with Floyd-Steinberg dithering."""
    img = Image.fromarray(rgb).quantize(colours, Image.Quantize.MEDIANCUT, dither=Image.Dither.FLOYDSTEINBERG)
    return np.asarray(img.convert("RGB"))


def draw(rng: np.random.Generator, layers: Tissue, site: HistoSiteV5, size: int) -> np.ndarray:
    """The stored uint8 image of one patch's layers at a fifth-set site."""
    px = size / _CANONICAL
    if site.phase > 0:
        light = _phase_contrast(layers, site, size)
    else:
        hv, ev = stains(rng, site)
        od = layers.haem[..., None] * hv + layers.eosin[..., None] * ev
        if rng.random() < site.pigment_probability:
            od = od + _pigment(rng, size)[..., None] * unit(FORMALIN_PIGMENT)
        light = np.asarray(site.light, np.float32) * np.exp(-od)
    light = blur_yx(f32(light), site.blur * px, site.blur * px)
    light = light + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    if site.template is not None:
        light = _normalise(light, site.template)
    out = quantise(np.clip(light, 0.0, 1.0))
    return _palette(out, site.palette) if site.palette > 0 else out


DESCRIPTION = (
    "; fifth site set: toluidine blue on semi-thin resin sections, phase contrast of unstained sections, "
    "colour normalised to a template, formalin pigment stored with a 48-colour palette"
)
SPECS = specs(SITES, draw, DESCRIPTION, "v5")  # histo and lesion
