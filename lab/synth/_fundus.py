"""Generated colour fundus photographs: normal or glaucoma, decided by the cup-to-disc ratio.

Each image is a circular field of orange-red retina with choroidal texture, a darker macula, an
optic disc (bright, yellow-orange, slightly taller than wide) holding a paler cup, and vessel
arcades leaving the disc. The vertical cup-to-disc ratio (CDR) is drawn from
:data:`NORMAL_CDR` for normal eyes and :data:`GLAUCOMA_CDR` for glaucomatous ones; nothing else
depends on the class.

Sites differ in how the eye is photographed: illumination (gain), colour cast, contrast and gamma,
vignetting, field-of-view size, blur, sensor noise and JPEG quality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from lab.synth._drawing import SynthSpec, finish, later_set, smooth_noise

CLASSES = ("glaucoma", "normal")  # sorted, as the readers order them: label 0 is glaucoma
NORMAL_CDR = (0.15, 0.45)  # range of the vertical cup-to-disc ratio of normal eyes
GLAUCOMA_CDR = (0.60, 0.85)  # and of glaucomatous eyes
REFERENCE_FIELD = 0.96  # field size at which the anatomy has its nominal size (site1's)


@dataclass(frozen=True)
class FundusSite:
    """How one site's camera photographs the retina."""

    name: str  # domain name ("site1" ...)
    gain: float  # overall illumination (multiplies the image)
    cast: tuple[float, float, float]  # per-channel colour gains (R, G, B)
    contrast: float  # deviation from the field's mean colour is scaled by this
    gamma: float  # display gamma (>1 darkens mid-tones)
    vignette: float  # relative darkening at the field edge (0 = flat)
    field: float  # diameter of the imaged field as a fraction of the image side; the anatomy scales with it
    blur: float  # Gaussian blur sigma in pixels at 96 px
    noise: float  # sensor noise sd on the 0-255 scale
    jpeg_quality: int | None  # JPEG quality of the stored image; None = lossless PNG


SITES: tuple[FundusSite, ...] = (
    FundusSite("site1", 1.00, (1.00, 1.00, 1.00), 1.00, 1.00, 0.30, 0.96, 0.3, 2.0, None),
    FundusSite("site2", 0.90, (1.05, 0.95, 0.85), 1.10, 1.00, 0.50, 0.90, 0.8, 5.0, None),
    FundusSite("site3", 1.30, (0.95, 1.05, 1.15), 0.80, 0.75, 0.15, 1.00, 0.5, 2.0, None),
    FundusSite("site4", 0.95, (0.70, 1.20, 0.85), 0.80, 1.00, 0.60, 0.85, 1.2, 4.0, 70),
    FundusSite("site5", 1.00, (1.25, 0.80, 0.70), 1.50, 1.40, 0.20, 0.92, 0.2, 3.0, None),
    FundusSite("site6", 1.10, (1.00, 1.00, 1.00), 0.75, 1.00, 0.40, 0.98, 1.0, 5.0, 60),
)


def _vessels(
    rng: np.random.Generator, size: int, span: float, disc: tuple[float, float], side: float
) -> np.ndarray:
    """Vessel coverage (0-1, (size, size)) of the arcades leaving the disc, drawn anti-aliased at 3x.

    Paths are traced for a disc on the left (temporal side towards +x) and mirrored for ``side`` +1;
    lengths and widths are fractions of ``span``, the anatomical scale in pixels.
    """
    ss = 3
    canvas = Image.new("L", (size * ss, size * ss), 0)
    draw = ImageDraw.Draw(canvas)
    dy, dx = disc
    flip = -side
    # (initial heading, turn per step, steps, step length): the temporal arcades sweep round the
    # macula, the nasal vessels run short and straighter.
    arcades = [
        (-np.pi / 2 + 0.45, 0.11, 14, 0.055),  # superior temporal
        (np.pi / 2 - 0.45, -0.11, 14, 0.055),  # inferior temporal
        (-np.pi / 2 - 0.6, -0.05, 8, 0.05),  # superior nasal
        (np.pi / 2 + 0.6, 0.05, 8, 0.05),  # inferior nasal
    ]
    paths: list[tuple[list[tuple[float, float]], float]] = []
    for heading, turn, steps, step_frac in arcades:
        step = span * step_frac
        width = span * rng.uniform(0.018, 0.024)
        h = heading + rng.normal(0, 0.12)
        turn *= rng.uniform(0.8, 1.2)
        y, x = 0.0, 0.0
        points = [(x, y)]
        for i in range(steps):
            h += turn + rng.normal(0, 0.10)
            x += np.cos(h) * step
            y += np.sin(h) * step
            points.append((x, y))
            if i in (3, 7, 11) and rng.random() < 0.8:
                # A thinner branch leaving at an angle, wandering outwards.
                bh = h + rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.0)
                by, bx = y, x
                branch = [(bx, by)]
                for _ in range(int(rng.integers(3, 7))):
                    bh += rng.normal(0, 0.25)
                    bx += np.cos(bh) * step * 0.8
                    by += np.sin(bh) * step * 0.8
                    branch.append((bx, by))
                paths.append((branch, width * 0.55))
        paths.append((points, width))
    for points, w in paths:
        for j in range(len(points) - 1):  # taper along the path
            wj = max(1.0, w * (1.0 - 0.6 * j / len(points)) * ss)
            (x0, y0), (x1, y1) = points[j], points[j + 1]
            line = [((dx + flip * x0) * ss, (dy + y0) * ss), ((dx + flip * x1) * ss, (dy + y1) * ss)]
            draw.line(line, fill=255, width=round(wj), joint="curve")
    small = canvas.resize((size, size), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


def _soft_ellipse(
    yy: np.ndarray, xx: np.ndarray, cy: float, cx: float, ry: float, rx: float, edge: float
) -> np.ndarray:
    rho = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
    return np.clip((1.0 - rho) * min(ry, rx) / edge + 0.5, 0.0, 1.0)


@dataclass(frozen=True)
class Eye:
    """One eye as the optics deliver it, before any camera: linear RGB and the field's geometry."""

    rgb: np.ndarray  # (size, size, 3) float, 0-1 reflectance-like colour, inside the field
    inside: np.ndarray  # (size, size) 0-1 mask of the circular field
    r: np.ndarray  # (size, size) distance of each pixel from the image centre
    radius: float  # radius of the field in pixels


def eye(rng: np.random.Generator, label: int, field: float, size: int) -> Eye:
    """The anatomy of one eye of class ``label`` (0 glaucoma, 1 normal) in a field of ``field`` x the side."""
    cdr = rng.uniform(*(GLAUCOMA_CDR if CLASSES[label] == "glaucoma" else NORMAL_CDR))
    coords = np.arange(size, dtype=np.float32) + 0.5
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    c = size / 2.0
    span = size * field / REFERENCE_FIELD  # the camera's field of view sets the anatomy's scale
    radius = 0.5 * size * field * rng.uniform(0.98, 1.02)
    r = np.sqrt((yy - c) ** 2 + (xx - c) ** 2)
    inside = np.clip((radius - r) / 1.0 + 0.5, 0.0, 1.0)

    # Retina: orange-red, pigment varying per eye, choroidal texture.
    base = np.array([0.80, 0.36, 0.16], np.float32) * rng.uniform(0.88, 1.12, 3).astype(np.float32)
    texture = 1.0 + 0.06 * smooth_noise(rng, size, 8) + 0.03 * smooth_noise(rng, size, 24)
    rgb = base[None, None, :] * texture[..., None]

    # Optic disc on the nasal side (left or right eye), macula on the temporal side.
    side = 1.0 if rng.random() < 0.5 else -1.0  # +1: disc right of centre
    dcy = c + rng.normal(0, 0.03) * span
    dcx = c + side * rng.uniform(0.20, 0.26) * span
    rd = rng.uniform(0.10, 0.125) * span
    ry, rx = rd * rng.uniform(1.02, 1.15), rd
    mcy, mcx = c + rng.normal(0, 0.02) * span, c - side * rng.uniform(0.05, 0.10) * span
    macula = np.exp(-(((yy - mcy) ** 2 + (xx - mcx) ** 2) / (2 * (0.07 * span) ** 2)))
    rgb = rgb * (1.0 - 0.35 * macula[..., None])

    disc = _soft_ellipse(yy, xx, dcy, dcx, ry, rx, 1.2)
    rim_colour = np.array([0.98, 0.62, 0.36], np.float32) * rng.uniform(0.92, 1.05)
    rgb = rgb * (1 - disc[..., None]) + rim_colour * disc[..., None]
    cup_y = dcy + rng.normal(0, 0.05) * ry
    cup_x = dcx - side * rng.uniform(0.0, 0.12) * rx  # the cup sits a little temporally
    cup = _soft_ellipse(yy, xx, cup_y, cup_x, cdr * ry, cdr * rx * rng.uniform(0.9, 1.05), 1.0) * disc
    cup_colour = np.array([1.0, 0.92, 0.74], np.float32)
    rgb = rgb * (1 - cup[..., None]) + cup_colour * cup[..., None]

    vessels = _vessels(rng, size, span, (dcy, dcx), side)
    vessel_colour = np.array([0.50, 0.10, 0.06], np.float32)
    rgb = rgb * (1 - 0.85 * vessels[..., None]) + vessel_colour * 0.85 * vessels[..., None]
    return Eye(rgb, inside, r, float(radius))


def render(rng: np.random.Generator, label: int, site: FundusSite, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 fundus image of class ``label`` (0 glaucoma, 1 normal) at ``site``."""
    e = eye(rng, label, site.field, size)
    # The camera: vignetting, illumination, colour cast, contrast and gamma.
    rgb = e.rgb * (1.0 - site.vignette * (np.clip(e.r / e.radius, 0, 1) ** 2.5))[..., None]
    rgb = rgb * site.gain * np.asarray(site.cast, np.float32)
    mean = (rgb * e.inside[..., None]).sum((0, 1)) / e.inside.sum()
    rgb = (rgb - mean) * site.contrast + mean
    rgb = np.power(np.clip(rgb, 0.0, 1.0), site.gamma) * e.inside[..., None]
    return finish(rgb.astype(np.float32), rng, site.blur * size / 96.0, site.noise)


SPEC = SynthSpec(
    kind="fundus",
    classes=CLASSES,
    positive_class="glaucoma",
    sites=SITES,
    render=render,
    description="fundus-like photographs; glaucoma = large cup-to-disc ratio; sites differ in illumination, "
    "colour cast, contrast/gamma, vignetting, field size, blur, noise and JPEG quality",
)

#: How a later site's camera stores an eye: ``camera(rng, eye, site, size)``, a uint8 image.
Camera = Callable[[np.random.Generator, Eye, Any, int], np.ndarray]


def later_fundus_set(sites: tuple[Any, ...], camera: Camera, description: str, site_set: str) -> SynthSpec:
    """A later fundus site set: site1 as the first set draws it, and ``sites``, each an eye drawn at
    site1's scale (only the camera changes) seen through ``camera``."""
    field = SITES[0].field

    def target(rng: np.random.Generator, label: int, site: Any, size: int) -> np.ndarray:
        return camera(rng, eye(rng, label, field, size), site, size)

    return later_set(SPEC, sites, target, description, site_set)
