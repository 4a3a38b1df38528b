"""The fourth site set of the OCT kind (``f2tta synth oct --sites v4``).

The retina is the same as in the first set (``_oct.py``: the class is macular oedema) and site1 is
the first set's site1, unchanged. The four new target sites scan or show it through mechanisms no
earlier set of the kind used:

* ``v4site2`` — an export of the device's review screen: the automatic segmentation drawn over the
  scan (the inner limiting membrane as a red line, Bruch's membrane as a green one) and a white
  200 µm scale bar in the lower left corner.
* ``v4site3`` — one frame instead of an average, cleaned by the device's edge-preserving noise
  reduction (a median filter over about 5 x 5 px of the log image): the speckle gone, the layers
  blotchy and flat ("plastic"), fine texture lost.
* ``v4site4`` — a myopia clinic: long (highly myopic) eyes whose posterior pole is a deep bowl, so
  the retina curves up towards both edges of the scan by 16-24 px at 96 px, and whose thin choroid
  lets more light reach the sclera.
* ``v4site5`` — the beam entering the pupil off centre: the photoreceptors guide light along their
  axis, so the ellipsoid and interdigitation zones (the bright bands just above the RPE) return
  only 12-20 % of their light (the optical Stiles-Crawford effect), and the scan is tilted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from lab.synth import _oct
from lab.synth._drawing import later_set, pixel_grid
from lab.synth._oct import _CANONICAL, _speckle, anatomy, severity
from lab.synth._optics import blur_yx, f32, grey_rgb, quantise, sample

#: The first set's site1: the acquisition every new site starts from before its own changes.
_BASE = _oct.SITES[0]
_ILM_COLOUR = np.array([1.0, 0.25, 0.2], np.float32)
_BRUCH_COLOUR = np.array([0.2, 0.95, 0.3], np.float32)


@dataclass(frozen=True)
class OctSiteV4:
    """How one site of the fourth set scans and shows a B-scan (on top of site1's device)."""

    name: str
    overlay: bool  # draw the segmentation lines and a scale bar over the scan
    median: int  # width in px at 96 px of the median filter on the log image (0: none)
    bowl: tuple[float, float]  # range of the rise of the retina at the scan's edges, px at 96 px
    penetration: float  # attenuation below the RPE divided by this
    photoreceptors: tuple[float, float]  # range of the light the outer segments' bands return
    tilt: float  # sd of the scan's extra tilt (slope, px per px)
    looks: int  # frames averaged
    jpeg_quality: int | None


# fmt: off
SITES: tuple[OctSiteV4, ...] = (
    OctSiteV4("v4site2", True, 0, (0.0, 0.0), 1.0, (1.0, 1.0), 0.0, 12, None),
    OctSiteV4("v4site3", False, 5, (0.0, 0.0), 1.0, (1.0, 1.0), 0.0, 1, 90),
    OctSiteV4("v4site4", False, 0, (16.0, 24.0), 1.6, (1.0, 1.0), 0.0, 12, None),
    OctSiteV4("v4site5", False, 0, (0.0, 0.0), 1.0, (0.12, 0.2), 0.08, 12, None),
)
# fmt: on


def _rpe_top(mu: np.ndarray) -> np.ndarray:
    """Per column, the row where the RPE (the most attenuating layer) starts."""
    return np.asarray(mu.argmax(0))


def _dim_photoreceptors(refl: np.ndarray, mu: np.ndarray, f: float, factor: float) -> np.ndarray:
    """The rows within 5.5 canonical px above the RPE (ellipsoid to interdigitation zone) times ``factor``."""
    rows = np.arange(refl.shape[0])[:, None]
    top = _rpe_top(mu)[None, :]
    band = (rows < top) & (rows >= top - 5.5 * f)
    return f32(np.where(band, refl * factor, refl))


def _tilted(signal: np.ndarray, slope: float) -> np.ndarray:
    """Each column shifted in depth in proportion to its distance from the centre."""
    size = signal.shape[0]
    yy, xx = pixel_grid(size)
    return sample(signal, yy + slope * (xx - size / 2.0), xx)


def _bowl(signal: np.ndarray, rise: float) -> np.ndarray:
    """The scan as a bowl: the retina raised by ``rise`` px at both edges, parabolically."""
    size = signal.shape[0]
    yy, xx = pixel_grid(size)
    lift = rise * ((xx - size / 2.0) / (size / 2.0)) ** 2
    src = yy + lift
    return f32(sample(signal, src, xx) * (src <= size))


def _median(grey: np.ndarray, width: int) -> np.ndarray:
    """A ``width`` x ``width`` median filter (reflected borders) of a (H, W) image."""
    r = width // 2
    padded = np.pad(grey, r, mode="reflect")
    return f32(np.median(sliding_window_view(padded, (width, width)), axis=(-2, -1)))


def _overlay(grey: np.ndarray, refl: np.ndarray, mu: np.ndarray, f: float) -> np.ndarray:
    """The review screen: red inner limiting membrane, green Bruch's membrane, a white scale bar."""
    size = grey.shape[0]
    rgb = np.repeat(grey[..., None], 3, axis=2)
    cols = np.arange(size)
    ilm = (refl > 0.01).argmax(0)
    bruch = np.clip(_rpe_top(mu) + np.round(2.2 * f).astype(int), 0, size - 1)
    rgb[ilm, cols] = _ILM_COLOUR
    rgb[bruch, cols] = _BRUCH_COLOUR
    bar = max(2, round(6.4 * f))  # 200 µm of a 3 mm wide scan
    y, x = size - max(2, round(5 * f)), max(1, round(4 * f))
    rgb[y : y + max(1, round(f)), x : x + bar] = 1.0
    return f32(rgb)


def target(rng: np.random.Generator, label: int, site: OctSiteV4, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 B-scan of class ``label`` (0 oedema, 1 normal) at ``site``."""
    f = size / _CANONICAL
    refl, mu = anatomy(rng, severity(rng, label), _BASE, size)
    if site.photoreceptors[0] < 1.0:
        refl = _dim_photoreceptors(refl, mu, f, float(rng.uniform(*site.photoreceptors)))
    attenuation = np.exp(-2.0 * np.cumsum(mu / site.penetration, axis=0))
    signal = blur_yx(refl * attenuation, _BASE.axial * f, _BASE.lateral * f)
    if site.tilt > 0:
        signal = _tilted(signal, float(rng.normal(0.0, site.tilt)))
    if site.bowl[1] > 0:
        signal = _bowl(signal, float(rng.uniform(*site.bowl)) * f)
    signal = signal * _speckle(rng, size, _BASE.axial * f, _BASE.lateral * f, site.looks)
    depth = (np.arange(size, dtype=np.float32) + 0.5) / size
    signal = signal * (10.0 ** (-_BASE.rolloff_db * depth**2 / 10.0))[:, None]
    floor = 10.0 ** (_BASE.floor_db / 10.0)
    noise = rng.gamma(site.looks, 1.0 / site.looks, (size, size)).astype(np.float32) * floor
    lo, hi = _BASE.window
    db = 10.0 * np.log10(signal + noise)
    if site.median > 0:
        db = _median(f32(db), max(3, round(site.median * f) | 1))
    grey = f32(np.power(np.clip((db - lo) / (hi - lo), 0.0, 1.0), _BASE.display_gamma))
    if site.overlay:
        return quantise(_overlay(grey, refl, mu, f))
    return grey_rgb(grey)


SPEC = later_set(
    _oct.SPEC,
    SITES,
    target,
    (
        "; fourth site set: a review-screen export with segmentation lines and a scale bar, one frame "
        "with median noise reduction, bowl-shaped myopic eyes, dim photoreceptor bands from an off-axis beam"
    ),
    "v4",
)
