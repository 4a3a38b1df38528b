"""The third site set of the OCT kind (``f2tta synth oct --sites v3``).

The retina is the same as in the first set (``_oct.py``: the class is macular oedema) and site1 is
the first set's site1, unchanged. The four new target sites scan or show it through mechanisms
neither the first nor the second set used:

* ``v3site2`` — an export of linear intensity instead of the logarithmic display: only the most
  reflective layers (the RPE, the ellipsoid zone, the nerve fibre layer) stand out, the nuclear
  layers and the choroid sink into black; stored as JPEG 90.
* ``v3site3`` — a dispersion mismatch between the sample and reference arms: the axial
  point-spread broadens and grows side lobes, so every bright layer is smeared in depth with faint
  ghost copies a few pixels above and below it.
* ``v3site4`` — a display flattened to the RPE: each A-scan is shifted in depth so that the RPE
  lies on one straight row; the scan's curvature and tilt move into the shape of the layers above,
  and the vitreous edge follows the inverse of the RPE's course.
* ``v3site5`` — specular saturation: where the beam meets the retina at normal incidence (the
  foveal pit, and a few other columns) the reflection saturates the spectrometer and the whole
  A-scan turns into a bright vertical line through every depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth import _oct
from lab.synth._drawing import later_set, pixel_grid
from lab.synth._oct import _CANONICAL, _speckle, anatomy, severity
from lab.synth._optics import blur_yx, convolve_axis, f32, grey_rgb, kernel, sample

#: The first set's site1: the acquisition every new site starts from before its own changes.
_BASE = _oct.SITES[0]


@dataclass(frozen=True)
class OctSiteV3:
    """How one site of the third set scans and shows a B-scan (on top of site1's device)."""

    name: str
    linear: bool  # show linear intensity (no logarithm)
    dispersion: float  # side-lobe height of the axial point-spread (0: dispersion compensated)
    flatten: bool  # shift each A-scan so the RPE lies on one row
    specular: float  # saturated A-scans' level relative to the RPE's signal (0: none)
    axial: float  # axial point-spread sigma in px at 96 px
    looks: int  # frames averaged
    jpeg_quality: int | None


# fmt: off
SITES: tuple[OctSiteV3, ...] = (
    OctSiteV3("v3site2", True, 0.0, False, 0.0, 0.6, 12, 90),
    OctSiteV3("v3site3", False, 0.45, False, 0.0, 1.6, 12, None),
    OctSiteV3("v3site4", False, 0.0, True, 0.0, 0.6, 12, None),
    OctSiteV3("v3site5", False, 0.0, False, 0.35, 0.6, 12, None),
)
# fmt: on
_FLAT_ROW = 0.7  # where the RPE lies in a flattened display, as a share of the height


def _dispersed(signal: np.ndarray, f: float, lobes: float) -> np.ndarray:
    """The axial point-spread of an uncompensated dispersion: the main peak with a ghost either side."""
    gap = max(2, round(4.0 * f))
    psf = np.zeros(2 * gap + 1, np.float32)
    psf[gap] = 1.0
    psf[0] = psf[-1] = lobes
    psf = np.convolve(psf, kernel(0.8 * f))
    return convolve_axis(signal, f32(psf / psf.sum()), 0)


def _flatten(signal: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Each A-scan shifted in depth so that its RPE (the most attenuating layer's top) lies on one row."""
    size = signal.shape[0]
    rpe = mu.argmax(0).astype(np.float32) + 0.5
    yy, xx = pixel_grid(size)
    src = yy + (rpe - _FLAT_ROW * size)[None, :]
    inside = (src >= 0.0) & (src <= size)
    return f32(sample(signal, src, xx) * inside)


def _saturated(rng: np.random.Generator, signal: np.ndarray, refl: np.ndarray, level: float) -> np.ndarray:
    """Bright full-depth lines at the foveal pit's centre and at one to three other columns."""
    size = signal.shape[0]
    f = size / _CANONICAL
    surface = (refl > 0.01).argmax(0)  # the inner limiting membrane's row per column
    pit = float(np.argmax(blur_yx(surface[None, :].astype(np.float32), 0.0, 2.0 * f)[0])) + 0.5
    cols = np.array([pit, *rng.uniform(0.0, size, int(rng.integers(1, 4)))])
    x = np.arange(size, dtype=np.float32) + 0.5
    width = rng.uniform(0.6, 1.2, cols.size) * f
    heights = level * rng.uniform(0.5, 1.0, cols.size) * np.where(np.arange(cols.size) == 0, 1.0, 0.4)
    lines = (heights[:, None] * np.exp(-(((x[None, :] - cols[:, None]) / width[:, None]) ** 2))).max(0)
    fade = np.exp(-np.arange(size, dtype=np.float32) / (1.5 * size))  # the saturated line dims with depth
    return f32(signal + lines[None, :] * fade[:, None])


def target(rng: np.random.Generator, label: int, site: OctSiteV3, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 grey B-scan of class ``label`` (0 oedema, 1 normal) at ``site``."""
    f = size / _CANONICAL
    refl, mu = anatomy(rng, severity(rng, label), _BASE, size)
    attenuation = np.exp(-2.0 * np.cumsum(mu / _BASE.penetration, axis=0))
    signal = blur_yx(refl * attenuation, site.axial * f, _BASE.lateral * f)
    if site.dispersion > 0:
        signal = _dispersed(signal, f, site.dispersion)
    signal = signal * _speckle(rng, size, site.axial * f, _BASE.lateral * f, site.looks)
    depth = (np.arange(size, dtype=np.float32) + 0.5) / size
    signal = signal * (10.0 ** (-_BASE.rolloff_db * depth**2 / 10.0))[:, None]
    if site.flatten:
        signal = _flatten(signal, mu)
    if site.specular > 0:
        signal = _saturated(rng, signal, refl, site.specular)
    floor = 10.0 ** (_BASE.floor_db / 10.0)
    intensity = signal + rng.gamma(site.looks, 1.0 / site.looks, (size, size)).astype(np.float32) * floor
    if site.linear:  # intensity, scaled so that the RPE's typical signal is near white
        grey = np.clip(intensity / 0.3, 0.0, 1.0)
    else:
        lo, hi = _BASE.window
        grey = np.power(np.clip((10.0 * np.log10(intensity) - lo) / (hi - lo), 0.0, 1.0), _BASE.display_gamma)
    return grey_rgb(f32(grey))


SPEC = later_set(
    _oct.SPEC,
    SITES,
    target,
    (
        "; third site set: a linear-intensity export, an axial point-spread with dispersion side lobes, "
        "a display flattened to the RPE, specular saturation lines"
    ),
    "v3",
)
