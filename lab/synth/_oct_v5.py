"""The fifth site set of the OCT kind (``f2tta synth oct --sites v5``).

The retina is the same as in the first set (``_oct.py``: the class is macular oedema) and site1 is
the first set's site1, unchanged. The four new target sites scan or show it through mechanisms no
earlier set of the kind used:

* ``v5site2`` — an attenuation-compensated display (the depth-resolved compensation of Vermeer and
  Girard): each pixel's intensity divided by twice the light returned from everything below it, so
  what a layer's attenuation dims below it is restored: the choroid and the sclera as bright as the
  inner retina, the vessels' shadows filled, and the bottom rows bright where little lies below.
* ``v5site3`` — a swept source whose power varies from sweep to sweep, not normalised: each A-scan
  brighter or darker as a whole (a log-normal gain, sd 0.3), vertical stripes across the scan.
* ``v5site4`` — an export through a viewer that equalises the histogram of the log image: every
  grey level equally common, so the vitreous and the noise below the sclera become mid grey.
* ``v5site5`` — a spectrometer whose wavelength calibration has drifted: the uncorrected
  non-linearity in wavenumber widens the axial point-spread with depth, from site1's 0.6 px at the
  top to 3.2 px at the bottom of the scan (96 px), and the speckle grain coarsens with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth import _oct
from lab.synth._drawing import later_set
from lab.synth._oct import _CANONICAL, _speckle, anatomy, severity
from lab.synth._optics import blur_yx, convolve_axis, f32, grey_rgb, kernel

#: The first set's site1: the acquisition every new site starts from before its own changes.
_BASE = _oct.SITES[0]
_COMPENSATED_WINDOW = (-42.0, -4.0)  # dB of the compensated intensity shown black and white


@dataclass(frozen=True)
class OctSiteV5:
    """How one site of the fifth set scans and shows a B-scan (on top of site1's device)."""

    name: str
    compensate: bool  # show the attenuation-compensated intensity
    sweep_noise: float  # sd of the log power of each A-scan's sweep (0: a stable source)
    equalise: bool  # the grey levels of the log image equalised
    axial_bottom: float  # axial point-spread sigma at the bottom of the scan, px at 96 px (site1's: 0.6)
    looks: int  # frames averaged
    jpeg_quality: int | None


# fmt: off
SITES: tuple[OctSiteV5, ...] = (
    OctSiteV5("v5site2", True, 0.0, False, _BASE.axial, 12, None),
    OctSiteV5("v5site3", False, 0.3, False, _BASE.axial, 12, None),
    OctSiteV5("v5site4", False, 0.0, True, _BASE.axial, 12, None),
    OctSiteV5("v5site5", False, 0.0, False, 3.2, 12, None),
)
# fmt: on


def _drifting_psf(size: int, top: float, bottom: float) -> np.ndarray:
    """Weights (2 r + 1, size) spreading the light of each depth (column) over the depths r above to r below.

    The point-spread's sigma grows linearly from ``top`` at the first row to ``bottom`` at the last;
    each column sums to one, so a layer's light is spread, not lost.
    """
    reach = max(1, round(3.0 * max(top, bottom)))
    z = np.arange(size, dtype=np.float32) + 0.5
    sigma = top + (bottom - top) * z / size
    offsets = np.arange(-reach, reach + 1, dtype=np.float32)[:, None]
    weights = np.exp(-0.5 * (offsets / sigma[None, :]) ** 2)
    return f32(weights / weights.sum(0, keepdims=True))


def _spread(arr: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``arr`` (size, W) with the light of each row spread over the rows around it by ``weights``."""
    reach = weights.shape[0] // 2
    size = arr.shape[0]
    out = np.zeros((size + 2 * reach, *arr.shape[1:]), np.float32)
    for k in range(weights.shape[0]):  # one offset in depth at a time: the band of a sparse matrix
        out[k : k + size] += weights[k][:, None] * arr
    return out[reach : reach + size]


def _drifting_speckle(rng: np.random.Generator, psf: np.ndarray, sx: float, looks: int) -> np.ndarray:
    """Speckle averaged over ``looks`` frames, mean 1 at every depth, its axial grain that of ``psf``."""
    size = psf.shape[1]
    k = kernel(sx)
    energy = _spread(np.ones((size, 1), np.float32), psf**2) * float((k**2).sum())  # for unit white noise
    total = np.zeros((size, size), np.float32)
    for _ in range(looks):
        field = rng.standard_normal((2, size, size)).astype(np.float32)
        re, im = (convolve_axis(_spread(part, psf), k, 1) for part in field)
        total += (re**2 + im**2) / (2.0 * energy)
    return f32(total / looks)


def _compensated(intensity: np.ndarray) -> np.ndarray:
    """Each pixel's intensity over twice the sum of the intensities from its depth down (per A-scan)."""
    below = np.cumsum(intensity[::-1], axis=0)[::-1]
    return f32(intensity / (2.0 * below))


def _equalised(db: np.ndarray) -> np.ndarray:
    """The grey level of each pixel its rank among the image's pixels: a flat histogram, 0-1."""
    ranks = np.argsort(np.argsort(db, axis=None, kind="stable"), kind="stable")
    return f32(((ranks + 0.5) / ranks.size).reshape(db.shape))


def target(rng: np.random.Generator, label: int, site: OctSiteV5, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 grey B-scan of class ``label`` (0 oedema, 1 normal) at ``site``."""
    f = size / _CANONICAL
    refl, mu = anatomy(rng, severity(rng, label), _BASE, size)
    attenuation = np.exp(-2.0 * np.cumsum(mu / _BASE.penetration, axis=0))
    lateral = _BASE.lateral * f
    if site.axial_bottom != _BASE.axial:
        psf = _drifting_psf(size, _BASE.axial * f, site.axial_bottom * f)
        signal = convolve_axis(_spread(f32(refl * attenuation), psf), kernel(lateral), 1)
        signal = signal * _drifting_speckle(rng, psf, lateral, site.looks)
    else:
        signal = blur_yx(refl * attenuation, _BASE.axial * f, lateral)
        signal = signal * _speckle(rng, size, _BASE.axial * f, lateral, site.looks)
    if site.sweep_noise > 0:
        signal = signal * np.exp(rng.normal(0.0, site.sweep_noise, size)).astype(np.float32)[None, :]
    depth = (np.arange(size, dtype=np.float32) + 0.5) / size
    signal = signal * (10.0 ** (-_BASE.rolloff_db * depth**2 / 10.0))[:, None]
    floor = 10.0 ** (_BASE.floor_db / 10.0)
    intensity = signal + rng.gamma(site.looks, 1.0 / site.looks, (size, size)).astype(np.float32) * floor
    lo, hi = _BASE.window
    if site.compensate:
        intensity = _compensated(f32(intensity)) * (_CANONICAL / size)  # per canonical px of depth
        lo, hi = _COMPENSATED_WINDOW
    db = f32(10.0 * np.log10(intensity))
    if site.equalise:
        grey = _equalised(db)
    else:
        grey = f32(np.power(np.clip((db - lo) / (hi - lo), 0.0, 1.0), _BASE.display_gamma))
    return grey_rgb(grey)


SPEC = later_set(
    _oct.SPEC,
    SITES,
    target,
    (
        "; fifth site set: an attenuation-compensated display, a swept source's sweep-to-sweep power "
        "stripes, a histogram-equalised export, an axial point-spread widening with depth"
    ),
    "v5",
)
