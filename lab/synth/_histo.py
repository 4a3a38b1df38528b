"""Generated H&E histology patches: normal tissue or tumour, decided by nuclear morphology.

Each patch is stroma (eosin texture with fibres and empty lumens) plus nuclei drawn as irregular
ellipses. A hidden *atypia* score ``t`` in [0, 1] sets the nuclear density, size, pleomorphism,
shape irregularity, hyperchromasia and crowding; normal patches draw ``t`` below
:data:`NORMAL_MAX_ATYPIA`, tumour patches above :data:`TUMOR_MIN_ATYPIA`. Every feature is noisy,
so no single one separates the classes perfectly.

Colour is made by Beer-Lambert from per-site stain vectors (optical density per RGB channel) and
strengths, then each site's background, gamma, blur, sensor noise, JPEG quality and magnification
(scale) are applied. Sites differ only in these imaging parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lab.synth._drawing import SynthSpec, finish, gaussian_blur, pixel_grid, smooth_noise

NORMAL_MAX_ATYPIA = 0.42  # normal patches draw their atypia score from [0, this]
TUMOR_MIN_ATYPIA = 0.58  # tumour patches draw theirs from [this, 1]
_CANONICAL = 96.0  # morphology is specified in pixels of a 96 px patch at scale 1


@dataclass(frozen=True)
class HistoSite:
    """How one site stains and scans tissue."""

    name: str  # domain name ("site1" ...)
    h_vector: tuple[float, float, float]  # haematoxylin optical density per R, G, B (normalised)
    e_vector: tuple[float, float, float]  # eosin optical density per R, G, B (normalised)
    h_strength: float  # haematoxylin amount (multiplies its optical density)
    e_strength: float  # eosin amount
    background: tuple[float, float, float]  # transmitted light through empty glass, 0-1 per channel
    gamma: float  # display gamma applied to the 0-1 image (>1 darkens mid-tones)
    blur: float  # Gaussian blur sigma in pixels (focus)
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None  # JPEG quality of the stored patch; None = lossless PNG
    scale: float  # magnification relative to site1 (1.2 = structures 20 % larger)
    stain_jitter: float = 0.08  # per-patch relative variation of stain strengths within the site


RUIFROK_H = (0.650, 0.704, 0.286)
RUIFROK_E = (0.072, 0.990, 0.105)

# site1 is the reference; the others stain weaker or stronger haematoxylin relative to eosin
# (the main cue of hyperchromasia a source model learns), with their own hues, background,
# focus, noise, compression and magnification.
# fmt: off
SITES: tuple[HistoSite, ...] = (
    HistoSite("site1", RUIFROK_H, RUIFROK_E, 1.0, 1.0, (0.96, 0.95, 0.97), 1.0, 0.4, 2.0, None, 1.0),
    HistoSite("site2", (0.74, 0.64, 0.20), (0.12, 0.94, 0.32), 0.62, 1.6, (0.92, 0.93, 0.97), 1.0, 0.8, 4.0, 70, 0.9),
    HistoSite("site3", (0.60, 0.74, 0.30), (0.05, 0.93, 0.36), 1.85, 1.3, (0.97, 0.91, 0.93), 1.0, 0.3, 3.0, None, 1.2),
    HistoSite("site4", (0.62, 0.72, 0.32), (0.10, 0.96, 0.25), 0.55, 0.5, (0.98, 0.95, 0.86), 0.9, 1.2, 6.0, 60, 1.0),
    HistoSite("site5", (0.50, 0.72, 0.48), (0.18, 0.90, 0.40), 1.75, 1.1, (0.90, 0.89, 0.92), 1.2, 0.6, 3.0, 85, 1.15),
)
# fmt: on


@dataclass(frozen=True)
class Nuclei:
    """A set of nuclei in pixel units; every field has shape (n,) except the harmonics (n, 3)."""

    y: np.ndarray  # centre row
    x: np.ndarray  # centre column
    a: np.ndarray  # semi-axis along ``angle``
    b: np.ndarray  # semi-axis across ``angle``
    angle: np.ndarray  # orientation in radians
    wobble: np.ndarray  # (n, 3) relative boundary amplitude of harmonics 2, 3, 4
    phase: np.ndarray  # (n, 3) phases of those harmonics
    darkness: np.ndarray  # haematoxylin optical density of the chromatin

    @staticmethod
    def concat(parts: list[Nuclei]) -> Nuclei:
        return Nuclei(*(np.concatenate([getattr(p, f) for p in parts]) for f in Nuclei.__dataclass_fields__))


def unit(v: tuple[float, float, float]) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32)
    return arr / np.linalg.norm(arr)


class Stained(Protocol):
    """A site's two stains (every set's sites have them)."""

    @property
    def h_vector(self) -> tuple[float, float, float]: ...
    @property
    def h_strength(self) -> float: ...
    @property
    def e_vector(self) -> tuple[float, float, float]: ...
    @property
    def e_strength(self) -> float: ...
    @property
    def stain_jitter(self) -> float: ...


def dye(
    rng: np.random.Generator, vector: tuple[float, float, float], strength: float, jitter: float
) -> np.ndarray:
    """A dye's optical density per unit of its density layer in one patch: its normalised vector at
    ``strength``, varied by up to ``jitter`` (relative) from patch to patch."""
    return unit(vector) * strength * rng.uniform(1 - jitter, 1 + jitter)


def stains(rng: np.random.Generator, site: Stained) -> tuple[np.ndarray, np.ndarray]:
    """The nuclear stain's and the counterstain's :func:`dye` in one patch (drawn in that order)."""
    jit = site.stain_jitter
    return dye(rng, site.h_vector, site.h_strength, jit), dye(rng, site.e_vector, site.e_strength, jit)


def stroma(rng: np.random.Generator, size: int, f: float) -> tuple[np.ndarray, np.ndarray]:
    """Eosin density of the stroma and a 0-1 lumen (empty space) mask, both (size, size)."""
    yy, xx = pixel_grid(size)
    cells = max(2, round(3 * size / (f * _CANONICAL)))
    eosin = 0.34 + 0.07 * smooth_noise(rng, size, cells)
    phi = rng.uniform(0, np.pi)
    wavelength = rng.uniform(5.0, 9.0) * f
    warp = smooth_noise(rng, size, max(2, cells + 1))
    fibres = 0.5 + 0.5 * np.sin(2 * np.pi * (xx * np.cos(phi) + yy * np.sin(phi)) / wavelength + 2.0 * warp)
    eosin += 0.12 * fibres**3
    eosin *= 1.0 + 0.10 * gaussian_blur(rng.standard_normal((size, size)).astype(np.float32), 0.8 * f)
    threshold = rng.uniform(0.9, 2.5)
    lumen = 1.0 / (1.0 + np.exp(-6.0 * (smooth_noise(rng, size, cells) - threshold)))
    eosin *= 1.0 - 0.92 * lumen
    return np.clip(eosin, 0.0, None).astype(np.float32), lumen.astype(np.float32)


def random_nuclei(
    rng: np.random.Generator,
    n: int,
    centres: tuple[np.ndarray, np.ndarray],
    radius: float,
    pleomorphism: float,
    elongation: float,
    irregularity: float,
    darkness: float,
    f: float,
) -> Nuclei:
    """``n`` nuclei at the given centres; sizes in canonical pixels, scaled by ``f``."""
    r = radius * f * rng.lognormal(0.0, pleomorphism, n)
    aspect = 1.0 + rng.uniform(0.0, elongation, n)
    return Nuclei(
        y=centres[0].astype(np.float32),
        x=centres[1].astype(np.float32),
        a=(r * np.sqrt(aspect)).astype(np.float32),
        b=(r / np.sqrt(aspect)).astype(np.float32),
        angle=rng.uniform(0, np.pi, n).astype(np.float32),
        wobble=(rng.uniform(0, irregularity, (n, 3)) / np.array([1.0, 1.5, 2.0])).astype(np.float32),
        phase=rng.uniform(0, 2 * np.pi, (n, 3)).astype(np.float32),
        darkness=(darkness * rng.uniform(0.85, 1.15, n)).astype(np.float32),
    )


def spindles(rng: np.random.Generator, n: int, size: int, f: float, direction: float) -> Nuclei:
    """Elongated fibroblast nuclei aligned roughly with the stroma fibres (present in both classes)."""
    return Nuclei(
        y=rng.uniform(0, size, n).astype(np.float32),
        x=rng.uniform(0, size, n).astype(np.float32),
        a=(rng.uniform(3.5, 5.0, n) * f).astype(np.float32),
        b=(rng.uniform(0.9, 1.3, n) * f).astype(np.float32),
        angle=(direction + rng.normal(0, 0.3, n)).astype(np.float32),
        wobble=np.zeros((n, 3), np.float32),
        phase=np.zeros((n, 3), np.float32),
        darkness=rng.uniform(0.55, 0.8, n).astype(np.float32),
    )


def draw_nuclei(nuc: Nuclei, size: int, f: float) -> tuple[np.ndarray, np.ndarray]:
    """Haematoxylin density and coverage (0-1) of a set of nuclei, both (size, size).

    Each nucleus is evaluated in a square window around its centre (all windows in one array),
    then merged into the canvas with a scatter-max.
    """
    extent = np.maximum(nuc.a, nuc.b) * (1.0 + nuc.wobble.sum(1)) if nuc.y.size else np.zeros(0)
    reach = int(np.ceil(float(extent.max()))) + 2 if extent.size else 0
    inside = (nuc.y > -reach) & (nuc.y < size + reach) & (nuc.x > -reach) & (nuc.x < size + reach)
    if not inside.any():
        zero = np.zeros((size, size), np.float32)
        return zero, zero
    sel = np.flatnonzero(inside)
    y, x = nuc.y[sel, None, None], nuc.x[sel, None, None]
    a, b = nuc.a[sel, None, None], nuc.b[sel, None, None]
    offsets = np.arange(-reach, reach + 1)
    py = np.floor(y).astype(np.int64) + offsets[None, :, None]  # (n, W, 1) pixel rows
    px = np.floor(x).astype(np.int64) + offsets[None, None, :]  # (n, 1, W) pixel columns
    dy = (py + 0.5 - y).astype(np.float32)
    dx = (px + 0.5 - x).astype(np.float32)
    c, s = np.cos(nuc.angle[sel])[:, None, None], np.sin(nuc.angle[sel])[:, None, None]
    u = (dx * c + dy * s) / a
    v = (dy * c - dx * s) / b
    rho = np.sqrt(u * u + v * v)
    theta = np.arctan2(v, u)
    boundary = 1.0
    for k in range(3):
        boundary = boundary + nuc.wobble[sel, k, None, None] * np.cos(
            (k + 2) * theta + nuc.phase[sel, k, None, None]
        )
    edge = 0.8 * f / np.sqrt(a * b)  # anti-aliased rim, about 0.8 px wide
    cover = np.clip((boundary - rho) / edge + 0.5, 0.0, 1.0)
    pad = 2 * reach + 2
    rows, cols = np.broadcast_arrays(py + pad, px + pad)
    density = np.zeros((size + 2 * pad, size + 2 * pad), np.float32)
    coverage = np.zeros_like(density)
    np.maximum.at(density, (rows, cols), cover * nuc.darkness[sel, None, None])
    np.maximum.at(coverage, (rows, cols), cover)
    crop = (slice(pad, pad + size), slice(pad, pad + size))
    return density[crop], coverage[crop]


@dataclass(frozen=True)
class Tissue:
    """The optical-density layers of one patch, before any site's stains and optics, all (size, size)."""

    haem: np.ndarray  # haematoxylin density (nuclei, their halo)
    eosin: np.ndarray  # eosin density (stroma, cytoplasm)
    stroma: np.ndarray  # the stroma's own eosin density before the cells were placed (collagen)
    cover: np.ndarray  # 0-1 coverage of the nuclei
    nuclei: Nuclei


def stained_cells(
    rng: np.random.Generator, nuclei: Nuclei, stroma_eosin: np.ndarray, size: int, f: float
) -> Tissue:
    """Draw the nuclei over the stroma: chromatin texture, cytoplasm halo, eosin displaced by cells."""
    haem, cover = draw_nuclei(nuclei, size, f)
    chromatin = gaussian_blur(rng.standard_normal((size, size)).astype(np.float32), 0.6 * f)
    haem = haem * (1.0 + 0.25 * chromatin)
    # Cytoplasm: a faint purple-pink halo around the cells (more of it where cells crowd).
    halo = gaussian_blur(cover, 2.0 * f)
    haem = haem + 0.10 * halo * (1.0 - cover)
    eosin = stroma_eosin * (1.0 - 0.5 * cover) + 0.12 * halo
    return Tissue(haem.astype(np.float32), eosin.astype(np.float32), stroma_eosin, cover, nuclei)


def tissue(rng: np.random.Generator, t: float, size: int, f: float) -> Tissue:
    """The layers of a patch with atypia ``t`` (see :class:`Tissue`)."""
    eosin, lumen = stroma(rng, size, f)
    area = (size / (f * _CANONICAL)) ** 2  # canonical fields covered by the patch
    n = int(rng.poisson((10.0 + 38.0 * t) * rng.uniform(0.8, 1.2) * area))
    # Crowding: a fraction t of the nuclei sits in one to three sheets, the rest is scattered.
    n_crowd = round(n * t * rng.uniform(0.6, 1.0))
    k = int(rng.integers(1, 4))
    sheet_y, sheet_x = rng.uniform(0, size, k), rng.uniform(0, size, k)
    which = rng.integers(0, k, n_crowd)
    spread = rng.uniform(12.0, 22.0) * f
    cy = np.concatenate(
        [sheet_y[which] + rng.normal(0, spread, n_crowd), rng.uniform(-2, size + 2, n - n_crowd)]
    )
    cx = np.concatenate(
        [sheet_x[which] + rng.normal(0, spread, n_crowd), rng.uniform(-2, size + 2, n - n_crowd)]
    )
    iy = np.clip(cy, 0, size - 1).astype(int)
    ix = np.clip(cx, 0, size - 1).astype(int)
    keep = lumen[iy, ix] < 0.5  # no nuclei floating in empty space
    cy, cx = cy[keep], cx[keep]
    cells = random_nuclei(
        rng,
        cy.size,
        (cy, cx),
        radius=2.4 + 2.0 * t,
        pleomorphism=0.06 + 0.22 * t,
        elongation=0.15 + 0.45 * t,
        irregularity=0.03 + 0.16 * t,
        darkness=0.75 + 0.75 * t,
        f=f,
    )
    direction = float(rng.uniform(0, np.pi))
    fibro = spindles(rng, int(rng.poisson(4.0 * area)), size, f, direction)
    return stained_cells(rng, Nuclei.concat([cells, fibro]), eosin, size, f)


def stain(rng: np.random.Generator, haem: np.ndarray, eosin: np.ndarray, site: HistoSite) -> np.ndarray:
    """Beer-Lambert colour of the densities under a site's stains: float (H, W, 3) in 0-1."""
    hv, ev = stains(rng, site)
    od = haem[..., None] * hv + eosin[..., None] * ev
    rgb = np.asarray(site.background, np.float32) * np.exp(-od)
    colour: np.ndarray = np.power(np.clip(rgb, 0.0, 1.0), site.gamma).astype(np.float32)
    return colour


def atypia(rng: np.random.Generator, label: int) -> float:
    """The hidden atypia score of a patch of class ``label`` (0 normal, 1 tumour)."""
    if label == 0:
        return float(rng.uniform(0.0, NORMAL_MAX_ATYPIA))
    return float(rng.uniform(TUMOR_MIN_ATYPIA, 1.0))


def render(rng: np.random.Generator, label: int, site: HistoSite, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 patch of class ``label`` as ``site`` would image it."""
    f = size / _CANONICAL * site.scale
    layers = tissue(rng, atypia(rng, label), size, f)
    rgb = stain(rng, layers.haem, layers.eosin, site)
    return finish(rgb, rng, site.blur * size / _CANONICAL, site.noise)


SPEC = SynthSpec(
    kind="histo",
    classes=("normal", "tumor"),
    positive_class="tumor",
    sites=SITES,
    render=render,
    description="H&E-like patches; tumour = nuclear atypia (density, size, pleomorphism, irregularity, "
    "hyperchromasia, crowding); sites differ in stain vectors/strengths, background, gamma, blur, noise, "
    "JPEG quality and magnification",
)
