"""Generated ophthalmic OCT B-scans through the fovea: normal, or diabetic macular oedema.

Each image is one cross-section of the macula as a spectral-domain or swept-source OCT shows it:
the vitreous (black), the retina's layers from the nerve fibre layer down to the retinal pigment
epithelium (RPE), with the foveal pit, then the choroid with its dark vessel lumens. Retinal
vessels in the inner retina cast shadows below them. A hidden *severity* ``t`` sets the oedema:
normal scans draw ``t`` below :data:`NORMAL_MAX_SEVERITY`, oedematous ones above
:data:`OEDEMA_MIN_SEVERITY`; ``t`` sets the thickening of the inner nuclear to outer nuclear
layers, the number and size of the intraretinal cysts (dark round spaces), hyperreflective foci
(exudates) and, in some oedematous eyes, subretinal fluid under the fovea. Every feature is noisy.

The morphology is specified on a canonical 96 x 96 px field of about 3 mm across and 1 mm deep.
Sites differ only in how the scan is made and shown: the lateral and axial sampling (scale), the
optical resolution (axial and lateral point-spread), speckle (the number of frames averaged), the
light's penetration below the RPE (wavelength), the sensitivity roll-off with depth (and its
direction in enhanced-depth imaging), the signal strength and noise floor, the display's log
window and tone curve, eye motion without tracking, a dim side from a beam clipped by the pupil,
the tilt of the scan, and the stored format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.synth._drawing import SynthSpec, pixel_grid, smooth_noise
from lab.synth._optics import blur_yx, f32, grey_rgb, kernel, ramp, sample

CLASSES = ("edema", "normal")  # sorted, as the readers order them: label 0 is oedema
NORMAL_MAX_SEVERITY = 0.42  # normal scans draw their severity from [0, this]
OEDEMA_MIN_SEVERITY = 0.58  # oedematous scans draw theirs from [this, 1]
_CANONICAL = 96.0

# The layers from the vitreous down: (name, linear reflectivity, attenuation per canonical px).
LAYERS: tuple[tuple[str, float, float], ...] = (
    ("vitreous", 0.0002, 0.0),
    ("rnfl", 0.40, 0.012),
    ("gcl", 0.08, 0.008),
    ("ipl", 0.15, 0.008),
    ("inl", 0.025, 0.006),
    ("opl", 0.14, 0.008),
    ("onl", 0.012, 0.005),
    ("elm", 0.06, 0.005),
    ("myoid", 0.02, 0.005),
    ("ez", 0.50, 0.02),
    ("os", 0.04, 0.01),
    ("iz", 0.25, 0.02),
    ("srf", 0.002, 0.0),
    ("rpe", 1.0, 0.35),
    ("choroid", 0.10, 0.06),
    ("sclera", 0.05, 0.08),
)
_FLUID = 0.002  # reflectivity of fluid (cysts, subretinal fluid)


@dataclass(frozen=True)
class OctSite:
    """How one site's device acquires and shows a B-scan."""

    name: str
    scale_x: float  # lateral magnification (a 9 mm scan across the same pixels: 0.67)
    scale_y: float  # axial magnification (the axial pixel spacing and display aspect)
    axial: float  # axial point-spread sigma in px at 96 px
    lateral: float  # lateral point-spread sigma in px at 96 px
    looks: int  # frames averaged (speckle contrast falls as 1/sqrt(looks))
    penetration: float  # attenuation below the RPE is divided by this (1050 nm swept source: ~2)
    rolloff_db: float  # sensitivity lost with depth across the image, in dB
    edi: bool  # enhanced-depth imaging: the roll-off runs the other way (choroid at zero delay)
    signal_db: float  # signal strength relative to site1, in dB
    floor_db: float  # noise floor relative to the RPE's reflectivity, in dB
    window: tuple[float, float]  # displayed range in dB (black, white)
    display_gamma: float  # tone curve of the display (>1 darkens the mid-tones)
    motion: float  # sd of the eye's axial motion between A-scans, px (0: tracked)
    clipping: float  # relative darkening of one side (beam clipped by the pupil)
    tilt: float  # sd of the scan's tilt (slope, px per px)
    jpeg_quality: int | None


# fmt: off
SITES: tuple[OctSite, ...] = (
    # site1: spectral-domain, eye tracking, 12 frames averaged.
    OctSite("site1", 1.0, 1.0, 0.6, 0.9, 12, 1.0, 4.0, False, 0.0, -34.0, (-31.0, 1.0), 1.0, 0.0, 0.0, 0.04, None),
    # site2: spectral-domain without tracking, 2 frames (grainy), coarser resolution, brighter floor.
    OctSite("site2", 1.0, 0.9, 0.8, 1.2, 2, 1.0, 6.0, False, -2.0, -30.0, (-32.0, 0.0), 0.8, 0.5, 0.0, 0.05, 90),
    # site3: swept-source 1050 nm, 9 mm wide scan, 4 frames, little roll-off, deeper penetration.
    OctSite("site3", 0.67, 1.0, 0.9, 1.4, 4, 2.0, 1.0, False, 0.0, -33.0, (-38.0, 0.0), 1.1, 0.0, 0.0, 0.04, None),
    # site4: a portable device on eyes with poor media: weak signal, no averaging, clipped beam, motion.
    OctSite("site4", 1.0, 1.0, 0.7, 1.6, 1, 1.0, 5.0, False, -7.0, -30.0, (-34.0, -2.0), 1.0, 0.8, 0.5, 0.10, 75),
    # site5: enhanced-depth imaging, stretched axially, 8 frames, a darker display curve.
    OctSite("site5", 1.0, 1.2, 0.6, 1.0, 8, 1.0, 8.0, True, 0.0, -33.0, (-40.0, 3.0), 1.4, 0.0, 0.0, 0.04, None),
)
# fmt: on


def severity(rng: np.random.Generator, label: int) -> float:
    """The hidden oedema severity of a scan of class ``label`` (0 oedema, 1 normal)."""
    if CLASSES[label] == "normal":
        return float(rng.uniform(0.0, NORMAL_MAX_SEVERITY))
    return float(rng.uniform(OEDEMA_MIN_SEVERITY, 1.0))


def _thicknesses(rng: np.random.Generator, u: np.ndarray, t: float) -> dict[str, np.ndarray]:
    """Each layer's thickness in canonical px at lateral positions ``u`` (canonical px from the fovea)."""
    pit = np.exp(-((u / rng.uniform(10.0, 14.0)) ** 2))
    side = 1.0 if rng.random() < 0.5 else -1.0  # the optic disc's side: the nerve fibres thicken there
    nasal = np.clip(side * u / 45.0, 0.0, 1.0)
    centre = rng.normal(0.0, 4.0)
    spread = rng.uniform(16.0, 28.0)
    oedema = 1.0 + 1.6 * t**2 * rng.uniform(0.7, 1.3) * np.exp(-(((u - centre) / spread) ** 2))
    lateral = 1.0 + 0.06 * np.interp(u, np.linspace(-80, 80, 9), rng.standard_normal(9))
    th = {
        "rnfl": (1.5 + 2.5 * nasal) * (1.0 - pit),
        "gcl": 4.0 * (1.0 - pit),
        "ipl": 3.0 * (1.0 - 0.95 * pit),
        "inl": 3.0 * (1.0 - 0.9 * pit) * oedema,
        "opl": 2.5 * (1.0 - 0.5 * pit) * oedema,
        "onl": (7.0 + 4.0 * pit) * oedema,
        "elm": np.full_like(u, 0.6),
        "myoid": np.full_like(u, 1.2),
        "ez": np.full_like(u, 1.2),
        "os": 2.0 + 1.0 * pit,
        "iz": np.full_like(u, 1.0),
        "srf": np.zeros_like(u),
        "rpe": np.full_like(u, 2.2),
        "choroid": np.full_like(u, rng.uniform(18.0, 26.0)),
    }
    if rng.random() < np.clip(1.6 * (t - 0.55), 0.0, 0.6):  # subretinal fluid under the fovea
        width = rng.uniform(8.0, 16.0)
        th["srf"] = rng.uniform(2.0, 6.0) * t * np.clip(1.0 - ((u - centre) / width) ** 2, 0.0, None)
    return {k: v * lateral if k in ("inl", "opl", "onl", "gcl") else v for k, v in th.items()}


def _ellipses(
    yy: np.ndarray, xx: np.ndarray, cy: np.ndarray, cx: np.ndarray, ry: np.ndarray, rx: np.ndarray
) -> np.ndarray:
    """0-1 coverage of the union of ellipses (soft edge of about a pixel), (H, W)."""
    if cy.size == 0:
        return np.zeros_like(yy)
    rho = np.sqrt(
        ((yy[None] - cy[:, None, None]) / ry[:, None, None]) ** 2
        + ((xx[None] - cx[:, None, None]) / rx[:, None, None]) ** 2
    )
    cover = np.clip((1.0 - rho) * np.minimum(ry, rx)[:, None, None] + 0.5, 0.0, 1.0)
    return f32(cover.max(0))


def anatomy(rng: np.random.Generator, t: float, site: OctSite, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Linear reflectivity and attenuation per image pixel of one scan, both (size, size)."""
    f = size / _CANONICAL
    fx, fy = f * site.scale_x, f * site.scale_y  # image px per canonical px
    yy, xx = pixel_grid(size)
    cols = xx[0]
    fovea = size / 2.0 + rng.normal(0.0, 6.0) * f
    u = (cols - fovea) / fx  # canonical px from the fovea
    th = _thicknesses(rng, u, t)
    names = [name for name, _, _ in LAYERS[1:]]
    # Bruch's membrane: a tilted, curved line; the layers stack upwards from it and the choroid below.
    bruch = size * rng.uniform(0.60, 0.68) + rng.normal(0.0, site.tilt) * (cols - size / 2.0)
    bruch = bruch + rng.uniform(0.0, 0.004) / f * (cols - size / 2.0) ** 2
    above = names[: names.index("rpe") + 1]
    tops = {}
    depth = bruch.copy()
    for name in reversed(above):
        depth = depth - th[name] * fy
        tops[name] = depth.copy()
    tops["choroid"] = bruch
    tops["sclera"] = bruch + th["choroid"] * fy
    refl: np.ndarray = np.full((size, size), LAYERS[0][1], np.float32)
    mu = np.zeros((size, size), np.float32)
    prev_r, prev_m = LAYERS[0][1], LAYERS[0][2]
    for name, r, m in LAYERS[1:]:
        step = np.clip(yy - tops[name][None, :] + 0.5, 0.0, 1.0)  # 0 above the layer's top, 1 below
        refl += (r - prev_r) * step
        mu += (m - prev_m) * step
        prev_r, prev_m = r, m
    refl *= 1.0 + 0.15 * smooth_noise(rng, size, 12)  # patchy reflectivity within the layers
    # The choroid's vessels: dark lumens in its lower two thirds.
    k = int(rng.integers(6, 11))
    vx = rng.uniform(0, size, k)
    vy = np.interp(vx, cols, bruch) + rng.uniform(0.35, 0.9, k) * np.interp(vx, cols, th["choroid"]) * fy
    lumens = _ellipses(yy, xx, vy, vx, rng.uniform(1.5, 3.5, k) * fy, rng.uniform(2.0, 5.0, k) * fx)
    refl = refl * (1.0 - 0.6 * lumens)  # flowing blood still scatters a little: darker, not black
    # Intraretinal cysts in the inner and outer nuclear layers, and exudates at the plexiform layer.
    n = int(rng.poisson(16.0 * np.clip((t - 0.4) / 0.6, 0.0, 1.0) ** 1.2))  # none in most normal eyes
    cx = np.clip(fovea + rng.normal(0.0, 20.0, n) * fx, 0, size - 1)
    layer_top = np.interp(cx, cols, tops["inl"])
    layer_bottom = np.interp(cx, cols, tops["elm"])
    cy = layer_top + rng.uniform(0.15, 0.85, n) * (layer_bottom - layer_top)
    radius = (1.0 + 3.5 * t) * rng.lognormal(0.0, 0.25, n)
    cysts = _ellipses(
        yy, xx, cy, cx, radius * rng.uniform(1.0, 1.5, n) * fy, radius * rng.uniform(0.7, 1.2, n) * fx
    )
    refl = refl * (1.0 - cysts) + _FLUID * cysts
    m = int(rng.poisson(10.0 * np.clip((t - 0.4) / 0.6, 0.0, 1.0) ** 1.2))
    ex = rng.uniform(0, size, m)
    ey = np.interp(ex, cols, tops["onl"]) + rng.normal(0.0, 1.0, m) * fy
    foci = _ellipses(yy, xx, ey, ex, rng.uniform(0.7, 1.3, m) * fy, rng.uniform(0.7, 1.3, m) * fx)
    refl = np.maximum(refl, 0.6 * foci)
    # Retinal vessels in the inner retina: bright, with a shadow below (blood absorbs).
    v = int(rng.integers(1, 4))
    sx = rng.uniform(0, size, v)
    sy = np.interp(sx, cols, tops["gcl"]) + rng.uniform(0.0, 2.0, v) * fy
    vessels = _ellipses(yy, xx, sy, sx, np.full(v, 0.9) * fy, np.full(v, 1.2) * fx)
    refl = np.maximum(refl, 0.5 * vessels)
    below = np.clip((yy[None] - sy[:, None, None]) / (2.0 * fy), 0.0, 1.0)
    across = np.exp(-(((xx[None] - sx[:, None, None]) / (1.3 * fx)) ** 2))
    shadow = 1.0 - 0.6 * (below * across).max(0)
    return (refl * shadow).astype(np.float32), (mu / fy).astype(np.float32)


def _speckle(rng: np.random.Generator, size: int, sy: float, sx: float, looks: int) -> np.ndarray:
    """Fully developed speckle averaged over ``looks`` frames, mean 1, grain of the point-spread."""
    energy = float((kernel(sy) ** 2).sum() * (kernel(sx) ** 2).sum())
    total = np.zeros((size, size), np.float32)
    for _ in range(looks):
        field = rng.standard_normal((2, size, size)).astype(np.float32)
        re, im = blur_yx(field[0], sy, sx), blur_yx(field[1], sy, sx)
        total += (re**2 + im**2) / (2.0 * energy)
    return total / looks


def render(rng: np.random.Generator, label: int, site: OctSite, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 grey B-scan of class ``label`` (0 oedema, 1 normal) at ``site``."""
    f = size / _CANONICAL
    refl, mu = anatomy(rng, severity(rng, label), site, size)
    # Light is attenuated on its way down and back up; less so at a longer wavelength below the RPE.
    attenuation = np.exp(-2.0 * np.cumsum(mu / site.penetration, axis=0))
    signal = blur_yx(refl * attenuation, site.axial * f, site.lateral * f)
    if site.motion > 0:  # axial eye motion between A-scans: each column shifted
        shift = np.cumsum(rng.normal(0.0, site.motion * f, size))
        shift = (shift - shift.mean()).astype(np.float32)
        yy, xx = pixel_grid(size)
        signal = sample(signal, yy - shift[None, :], xx)
    signal = signal * _speckle(rng, size, site.axial * f, site.lateral * f, site.looks)
    depth = (np.arange(size, dtype=np.float32) + 0.5) / size
    depth = 1.0 - depth if site.edi else depth
    signal = signal * (10.0 ** (-site.rolloff_db * depth**2 / 10.0))[:, None]
    if site.clipping > 0:
        signal = signal * (1.0 - site.clipping * ramp(rng, size) ** 2)
    floor = 10.0 ** (site.floor_db / 10.0)
    noise = rng.gamma(site.looks, 1.0 / site.looks, (size, size)).astype(np.float32) * floor
    db = 10.0 * np.log10(signal * 10.0 ** (site.signal_db / 10.0) + noise)
    lo, hi = site.window
    grey = np.power(np.clip((db - lo) / (hi - lo), 0.0, 1.0), site.display_gamma)
    return grey_rgb(grey)


SPEC = SynthSpec(
    kind="oct",
    classes=CLASSES,
    positive_class="edema",
    sites=SITES,
    render=render,
    description="OCT B-scans through the fovea; edema = retinal thickening, intraretinal cysts, exudates, "
    "subretinal fluid; sites differ in sampling, resolution, speckle averaging, penetration, roll-off "
    "(enhanced depth imaging), signal strength, noise floor, display window and curve, motion, beam "
    "clipping, tilt and JPEG quality",
)
