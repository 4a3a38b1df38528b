"""The sixth site set of the histology kinds (``f2tta synth histo|lesion --sites v6``).

The tissue is the same as in the first set (``_histo.py``, ``_lesion.py``: the class is decided by
nuclear morphology only) and site1 is the first set's site1, unchanged. The four new target sites
image that tissue through mechanisms none of the first five sets used:

* ``v6site2`` — immunohistochemistry: a stromal marker shown with DAB (brown, patchy as
  expression is) on the stroma and the cytoplasm, the nuclei in a pale haematoxylin counterstain;
  no eosin.
* ``v6site3`` — delayed fixation: the cells shrink away from what surrounds them before formalin
  reaches them, so a clear cleft (retraction artefact) rings every nucleus.
* ``v6site4`` — a scanner format with wavelet compression at a high ratio (JPEG 2000 / iSyntax-like:
  the LeGall 5/3 wavelet, three levels, the detail bands quantised with a dead zone, the colour
  more coarsely than the brightness): the finest texture goes, soft ringing along the edges, no
  8 x 8 blocks.
* ``v6site5`` — a tile server that answers from the pyramid level at half the resolution and
  enlarges it by nearest neighbour: the patch in 2 x 2 blocks of equal pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import smooth_noise
from lab.synth._histo import _CANONICAL, RUIFROK_E, RUIFROK_H, Tissue, stains
from lab.synth._histo_sets import StainedSite, specs
from lab.synth._optics import blur_yx, f32, quantise


@dataclass(frozen=True)
class HistoSiteV6(StainedSite):
    """How one site of the sixth set prepares, stains, images and stores a section (its second
    stain: the second chromogen or stain, on the stroma and the cytoplasm)."""

    patchy: float  # how much the second stain's amount varies across the patch (IHC expression), 0-1
    retraction: float  # share of the tissue lost in the cleft round each nucleus (delayed fixation)
    wavelet_step: float  # quantiser step of the finest luminance details, 0-255 scale (0: lossless)
    pyramid: int  # the level served: 1 the scanned resolution, 2 half of it enlarged by nearest neighbour
    blur: float  # optical blur sigma in px at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None
    scale: float  # magnification relative to site1
    stain_jitter: float = 0.08


DAB = (0.268, 0.570, 0.776)  # diaminobenzidine (Ruifrok and Johnston): absorbs blue most, brown
_WHITE = (0.95, 0.94, 0.96)

# fmt: off
SITES: tuple[HistoSiteV6, ...] = (
    HistoSiteV6("v6site2", RUIFROK_H, 0.55, DAB, 1.5, (0.96, 0.96, 0.95), 0.6, 0.0, 0.0, 1, 0.4, 2.0, None, 1.0),
    HistoSiteV6("v6site3", RUIFROK_H, 1.0, RUIFROK_E, 1.0, _WHITE, 0.0, 0.85, 0.0, 1, 0.4, 2.0, None, 1.0),
    HistoSiteV6("v6site4", RUIFROK_H, 1.0, RUIFROK_E, 1.0, _WHITE, 0.0, 0.0, 16.0, 1, 0.4, 2.0, None, 1.0),
    HistoSiteV6("v6site5", RUIFROK_H, 1.0, RUIFROK_E, 1.0, _WHITE, 0.0, 0.0, 0.0, 2, 0.4, 2.0, None, 1.0),
)
# fmt: on
_LEVELS = 3  # wavelet decomposition levels
#: Quantiser steps of the detail bands relative to the finest level's, from the finest level down
#: (coarser bands carry more of the picture and keep more of it, as a rate allocation would).
_LEVEL_WEIGHTS = (1.0, 0.55, 0.3)
_CHROMA_WEIGHT = 2.5  # the colour differences quantised this much more coarsely than the luminance
#: The irreversible colour transform of JPEG 2000 (RGB to Y, Cb, Cr) and its inverse.
_ICT = np.array([[0.299, 0.587, 0.114], [-0.16875, -0.33126, 0.5], [0.5, -0.41869, -0.08131]], np.float32)
_ICT_INV = np.linalg.inv(_ICT).astype(np.float32)


def _retraction(layers: Tissue, site: HistoSiteV6, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Haematoxylin and eosin densities with a clear cleft round every nucleus (delayed fixation)."""
    f = size / _CANONICAL
    near = blur_yx(layers.cover, 1.1 * f, 1.1 * f)  # reaches about 1.5 px beyond each nucleus
    cleft = np.clip(4.0 * near, 0.0, 1.0) * np.clip(1.0 - 2.0 * layers.cover, 0.0, 1.0)
    keep = 1.0 - site.retraction * cleft
    return f32(layers.haem * keep), f32(layers.eosin * keep)


def _lift(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """One level of the LeGall 5/3 wavelet along ``axis`` by lifting: (low band, high band).

    Borders are extended symmetrically, as JPEG 2000 does, so any length works.
    """
    x = np.moveaxis(x, axis, 0)
    s, d = x[0::2].copy(), x[1::2].copy()
    if d.shape[0]:
        right = np.concatenate([s[1:], s[-1:]])[: d.shape[0]]
        d -= 0.5 * (s[: d.shape[0]] + right)
        m = s.shape[0]
        s += 0.25 * (np.concatenate([d[:1], d])[:m] + np.concatenate([d, d[-1:]])[:m])
    return np.moveaxis(s, 0, axis), np.moveaxis(d, 0, axis)


def _unlift(s: np.ndarray, d: np.ndarray, axis: int) -> np.ndarray:
    """The inverse of :func:`_lift`."""
    s, d = np.moveaxis(s, axis, 0).copy(), np.moveaxis(d, axis, 0).copy()
    out = np.empty((s.shape[0] + d.shape[0], *s.shape[1:]), np.float32)
    if d.shape[0]:
        m = s.shape[0]
        s -= 0.25 * (np.concatenate([d[:1], d])[:m] + np.concatenate([d, d[-1:]])[:m])
        right = np.concatenate([s[1:], s[-1:]])[: d.shape[0]]
        d += 0.5 * (s[: d.shape[0]] + right)
    out[0::2], out[1::2] = s, d
    return np.moveaxis(out, 0, axis)


def _dead_zone(c: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Coefficients quantised with a dead zone and rebuilt at the middle of their interval."""
    q = np.floor(np.abs(c) / step)
    return f32(np.sign(c) * np.where(q > 0, (q + 0.5) * step, 0.0))


def _wavelet_compress(rgb: np.ndarray, step: float) -> np.ndarray:
    """A 0-255 (H, W, 3) image through a wavelet codec: colour transform, 5/3 wavelet, dead-zone quantiser."""
    steps = np.array([1.0, _CHROMA_WEIGHT, _CHROMA_WEIGHT], np.float32) * step
    low = f32((rgb - 128.0) @ _ICT.T)
    bands = []
    for level in range(_LEVELS):
        if min(low.shape[:2]) < 2:
            break
        q = steps * _LEVEL_WEIGHTS[level]
        lo_y, hi_y = _lift(low, 0)
        ll, lh = _lift(lo_y, 1)
        hl, hh = _lift(hi_y, 1)
        bands.append((_dead_zone(lh, q), _dead_zone(hl, q), _dead_zone(hh, q)))
        low = ll
    for lh, hl, hh in reversed(bands):
        low = _unlift(_unlift(low, lh, 1), _unlift(hl, hh, 1), 0)
    return f32(low @ _ICT_INV.T + 128.0)


def _half_level(rgb: np.ndarray) -> np.ndarray:
    """The pyramid level at half the resolution (2 x 2 means) enlarged again by nearest neighbour."""
    size = rgb.shape[0]
    even = size + size % 2
    padded = np.pad(rgb, ((0, even - size), (0, even - size), (0, 0)), mode="edge")
    level = padded.reshape(even // 2, 2, even // 2, 2, 3).mean((1, 3))
    return f32(level.repeat(2, 0).repeat(2, 1)[:size, :size])


def draw(rng: np.random.Generator, layers: Tissue, site: HistoSiteV6, size: int) -> np.ndarray:
    """The stored uint8 image of one patch's layers at a sixth-set site."""
    px = size / _CANONICAL
    haem, eosin = layers.haem, layers.eosin
    if site.retraction > 0:
        haem, eosin = _retraction(layers, site, size)
    hv, ev = stains(rng, site)
    if site.patchy > 0:  # expression differs from region to region
        cells = max(2, round(size / (24.0 * px)))
        eosin = eosin * np.clip(1.0 - site.patchy * (0.5 + 0.5 * smooth_noise(rng, size, cells)), 0.1, 1.0)
    od = haem[..., None] * hv + eosin[..., None] * ev
    light = np.asarray(site.light, np.float32) * np.exp(-od)
    light = blur_yx(f32(light), site.blur * px, site.blur * px)
    light = light + rng.normal(0.0, site.noise / 255.0, (size, size, 1)).astype(np.float32)
    out = np.clip(light, 0.0, 1.0)
    if site.pyramid == 2:
        out = _half_level(f32(out))
    if site.wavelet_step > 0:
        stored = _wavelet_compress(np.rint(out * 255.0), site.wavelet_step)
        out = np.clip(stored / 255.0, 0.0, 1.0)
    return quantise(f32(out))


DESCRIPTION = (
    "; sixth site set: immunohistochemistry (DAB on the stroma, a pale haematoxylin counterstain), "
    "retraction clefts round the nuclei from delayed fixation, wavelet compression at a high ratio, "
    "a half-resolution pyramid level enlarged by nearest neighbour"
)
SPECS = specs(SITES, draw, DESCRIPTION, "v6")  # histo and lesion
