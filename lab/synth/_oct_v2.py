"""The second site set of the OCT kind (``f2tta synth oct --sites v2``).

The retina is the same as in the first set (``_oct.py``: the class is macular oedema) and site1 is
the first set's site1, unchanged. The four new target sites scan it through mechanisms the first
set never used:

* ``v2site2`` — a time-domain device (a moving reference mirror): coarse axial resolution, few
  A-scans across the scan (interpolated between them), and a false-colour display (blue through
  green and yellow to red and white with the signal), as those devices showed their scans.
* ``v2site3`` — a spectral-domain scan placed too close to zero delay: the inner retina crosses
  it and folds back as a mirror image overlapping the scan (the complex-conjugate artefact), with
  the bright line of the zero-delay (DC) term at the top and fixed-pattern horizontal lines.
* ``v2site4`` — eyes with vitreous floaters and blinks: bright opacities in the vitreous, each
  casting a dark vertical shadow through every layer below it; a blink leaves a band of A-scans
  with no signal, only noise.
* ``v2site5`` — a saccade during the scan and a black-on-white display: the A-scans after the
  saccade come from a laterally and axially displaced part of the retina (a break in the layers),
  and the grey scale is inverted (the vitreous white, the reflective layers dark).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth import _oct
from lab.synth._drawing import later_set, pixel_grid
from lab.synth._oct import _CANONICAL, _speckle, anatomy, severity
from lab.synth._optics import blur_yx, f32, grey_rgb, quantise, sample

#: The first set's site1: the acquisition every new site starts from before its own changes.
_BASE = _oct.SITES[0]
#: False-colour map of the time-domain device: (level 0-1, R, G, B), linearly interpolated.
_FALSE_COLOUR = np.array(
    [
        (0.00, 0.00, 0.00, 0.10),
        (0.20, 0.05, 0.15, 0.60),
        (0.40, 0.05, 0.65, 0.45),
        (0.60, 0.85, 0.85, 0.10),
        (0.80, 0.95, 0.25, 0.05),
        (1.00, 1.00, 1.00, 1.00),
    ],
    np.float32,
)


@dataclass(frozen=True)
class OctSiteV2:
    """How one site of the second set scans and shows a B-scan (on top of site1's device)."""

    name: str
    axial: float  # axial point-spread sigma in px at 96 px
    lateral: float  # lateral point-spread sigma in px at 96 px
    looks: int  # frames averaged
    ascans: float  # A-scans acquired per image column (1: every column; 0.3: interpolated between)
    false_colour: bool  # the signal shown through a colour map instead of grey
    mirror: float  # the scan moved up by this share of the side past zero delay (folds back)
    fixed_pattern: float  # strength of horizontal fixed-pattern lines (relative to the signal floor)
    floaters: float  # floaters per image (Poisson mean), each with a shadow below it
    blink_probability: float  # share of scans with a blink (a band of A-scans without signal)
    saccade_probability: float  # share of scans with a saccade (a break in the layers)
    inverted: bool  # black-on-white display
    window: tuple[float, float]  # displayed range in dB (black, white)
    jpeg_quality: int | None


# fmt: off
SITES: tuple[OctSiteV2, ...] = (
    OctSiteV2("v2site2", 1.8, 1.4, 1, 0.3, True, 0.0, 0.0, 0.0, 0.0, 0.0, False, (-30.0, 0.0), 85),
    OctSiteV2("v2site3", 0.6, 0.9, 6, 1.0, False, 0.5, 0.5, 0.0, 0.0, 0.0, False, (-31.0, 1.0), None),
    OctSiteV2("v2site4", 0.6, 0.9, 6, 1.0, False, 0.0, 0.0, 3.0, 0.5, 0.0, False, (-31.0, 1.0), None),
    OctSiteV2("v2site5", 0.6, 0.9, 8, 1.0, False, 0.0, 0.0, 0.0, 0.0, 0.9, True, (-31.0, 1.0), 90),
)
# fmt: on


def _floaters(rng: np.random.Generator, signal: np.ndarray, mean: float, top: float) -> np.ndarray:
    """Vitreous opacities above the retina (row ``top``), each shadowing the A-scans below it."""
    size = signal.shape[0]
    yy, xx = pixel_grid(size)
    f = size / _CANONICAL
    out = signal.copy()
    for _ in range(int(rng.poisson(mean))):
        cy, cx = rng.uniform(0.05, 0.8) * top, rng.uniform(0.0, size)
        ry, rx = rng.uniform(1.0, 3.0) * f, rng.uniform(2.0, 7.0) * f
        blob = np.exp(-(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2))
        out = out + rng.uniform(0.05, 0.3) * blob
        shadow = np.exp(-(((xx[0] - cx) / rx) ** 2)) * rng.uniform(0.5, 0.85)
        below = np.clip((yy - cy) / ry, 0.0, 1.0)
        out = out * (1.0 - shadow[None, :] * below)
    return f32(out)


def _saccade(rng: np.random.Generator, signal: np.ndarray) -> np.ndarray:
    """The A-scans after a random column come from a displaced part of the retina."""
    size = signal.shape[0]
    f = size / _CANONICAL
    yy, xx = pixel_grid(size)
    at = int(rng.integers(size // 4, 3 * size // 4))
    dy = rng.choice((-1.0, 1.0)) * rng.uniform(3.0, 7.0) * f
    dx = rng.choice((-1.0, 1.0)) * rng.uniform(6.0, 14.0) * f
    moved = sample(signal, yy + dy, xx + dx)
    out = signal.copy()
    out[:, at:] = moved[:, at:]
    return out


def _mirror(rng: np.random.Generator, signal: np.ndarray, share: float) -> np.ndarray:
    """Move the scan up past zero delay (row 0): what lies above it folds back, mirrored."""
    size = signal.shape[0]
    shift = round(size * share * rng.uniform(0.85, 1.1))
    deep = signal[-1:] * np.exp(-np.arange(1, shift + 1, dtype=np.float32) / (0.05 * size))[:, None]
    moved = np.concatenate([signal[shift:], deep], axis=0)  # the sclera fades below the old bottom
    folded = signal[:shift][::-1]  # rows above zero delay appear at their distance from it
    moved[:shift] = moved[:shift] + 0.8 * folded
    return f32(moved)


def _colour(grey: np.ndarray) -> np.ndarray:
    """The false-colour map of the time-domain display, (H, W, 3) in 0-1."""
    lv = _FALSE_COLOUR[:, 0]
    return f32(np.stack([np.interp(grey, lv, _FALSE_COLOUR[:, c]) for c in (1, 2, 3)], axis=-1))


def target(rng: np.random.Generator, label: int, site: OctSiteV2, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 B-scan of class ``label`` (0 oedema, 1 normal) at ``site``."""
    f = size / _CANONICAL
    refl, mu = anatomy(rng, severity(rng, label), _BASE, size)
    attenuation = np.exp(-2.0 * np.cumsum(mu / _BASE.penetration, axis=0))
    signal = blur_yx(refl * attenuation, site.axial * f, site.lateral * f)
    if rng.random() < site.saccade_probability:
        signal = _saccade(rng, signal)
    if site.floaters > 0:
        top = float((refl > 0.01).argmax(0).min())  # the highest point of the retina
        signal = _floaters(rng, signal, site.floaters, max(top, 4.0 * f))
    signal = signal * _speckle(rng, size, site.axial * f, site.lateral * f, site.looks)
    depth = (np.arange(size, dtype=np.float32) + 0.5) / size
    signal = signal * (10.0 ** (-_BASE.rolloff_db * depth**2 / 10.0))[:, None]
    if site.mirror > 0:
        signal = _mirror(rng, signal, site.mirror)
    floor = 10.0 ** (_BASE.floor_db / 10.0)
    noise = rng.gamma(site.looks, 1.0 / site.looks, (size, size)).astype(np.float32) * floor
    if site.fixed_pattern > 0:  # reference-arm lines at fixed depths, and the DC term at zero delay
        lines = np.abs(blur_yx(rng.standard_normal((size, 1)).astype(np.float32), 0.0, 0.0)) ** 3
        noise = noise + site.fixed_pattern * floor * lines
        noise[: max(1, round(f))] += 0.3
    if rng.random() < site.blink_probability:
        start, width = int(rng.integers(0, size)), max(2, round(rng.uniform(4.0, 12.0) * f))
        signal[:, start : start + width] = 0.0
    db = 10.0 * np.log10(signal + noise)
    lo, hi = site.window
    grey = np.power(np.clip((db - lo) / (hi - lo), 0.0, 1.0), _BASE.display_gamma)
    if site.ascans < 1.0:  # few A-scans acquired: interpolated across the columns between them
        n = max(4, round(size * site.ascans))
        at = np.linspace(0.0, size - 1.0, n)
        kept = grey[:, np.rint(at).astype(np.int64)]
        grey = f32(np.stack([np.interp(np.arange(size), at, row) for row in kept]))
    if site.inverted:
        grey = 1.0 - grey
    if site.false_colour:
        return quantise(_colour(grey))
    return grey_rgb(grey)


SPEC = later_set(
    _oct.SPEC,
    SITES,
    target,
    (
        "; second site set: a time-domain device with a false-colour display, a mirror artefact near zero "
        "delay, vitreous floaters with shadows and blinks, a saccade with a black-on-white display"
    ),
    "v2",
)
