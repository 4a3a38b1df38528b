"""Generated patches of models of two or more classes, and the site mechanisms that move them.

Kinds drawn at 48 px as small histology patches (pale pink tissue, purple nuclei):

* ``nuclei-grades`` (three classes, as ``scripts/many_classes_check.py``'s development model):
  ``grade 1`` (a dozen medium nuclei), ``normal`` (a few small ones), ``grade 2`` (many large ones);
* ``tissue-4`` (four classes): ``normal`` (a few small round nuclei), ``tumour`` (crowded large
  oval nuclei, darker), ``stroma`` (pink fibres in one direction, a few long nuclei), ``inflamed``
  (many tiny dark dots);
* ``grades-4`` (four classes, ordered): ``normal`` and ``grade 1`` to ``grade 3`` (grade 3: many
  large oval dark nuclei), where the neighbouring grades are the ones confused.

``normal`` is each kind's reference class (``engine.run.rows.reference_class``).

A site is a mechanism applied to every patch it draws: ``none`` (the training site), ``stain``
(another stain's colours: nuclei bluer, tissue more orange), ``blur`` (a scanner out of focus),
``dim-noisy`` (less contrast, darker, more sensor noise), ``scale`` (a magnification 1.25 times
the training site's: nuclei larger and fewer in view) and ``fade:F`` (washed out towards white by
the share F). Written for the seventh committed suite (``benchmarks/suites/many-classes-7.json``)
before any model saw a patch of it; ``fade`` is the development model's mechanism, the others are
used nowhere else. For the eighth (``many-classes-8.json``), written before it ran: the kind
``grades-4`` and the mechanisms ``tint`` (a yellowed mounting medium), ``gamma`` (another tone
curve: mid-tones darker), ``jpeg`` (stored at JPEG quality 15), ``sparse`` (a thinner section:
fewer, paler nuclei) and ``scale:Z`` (another magnification; ``scale`` alone is 1.25). For the
ninth (``site-rules-9.json``), written before it ran: two kinds of two classes, ``atypia-2``
(``normal`` and ``atypical``: a few more, slightly larger nuclei than normal; the hard one) and
``tumour-2`` (``normal`` and ``tumour``), and the mechanisms ``hue`` (colours turned 25 degrees),
``saturate`` (every colour further from grey), ``thick`` (a thicker section: more, darker nuclei),
``vignette`` (the corners darker) and ``bleach`` (the eosin faded: the pink towards white, the
nuclei towards blue-green). For the tenth (``site-rules-10.json``), written before it ran: the
two-class kind ``lowgrade-2`` (``normal`` and ``grade 1``) and the mechanisms ``haze`` (less
contrast under a bluish veil), ``warm`` (a warmer lamp), ``noise`` (a noisy sensor), ``sharpen`` (a
strong unsharp mask) and ``shadow`` (a dark band across the field).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

SIDE = 48
KINDS: dict[str, tuple[str, ...]] = {
    "nuclei-grades": ("grade 1", "normal", "grade 2"),
    "tissue-4": ("normal", "tumour", "stroma", "inflamed"),
    "grades-4": ("normal", "grade 1", "grade 2", "grade 3"),
    "atypia-2": ("normal", "atypical"),
    "tumour-2": ("normal", "tumour"),
    "lowgrade-2": ("normal", "grade 1"),
}
MECHANISMS = (
    "none", "stain", "blur", "dim-noisy", "scale", "fade", "tint", "gamma", "jpeg", "sparse",
    "hue", "saturate", "thick", "vignette", "bleach", "haze", "warm", "noise", "sharpen", "shadow",
)  # fmt: skip
_TISSUE = np.array([235.0, 175.0, 205.0])
_NUCLEUS = np.array([90.0, 40.0, 130.0])
#: nuclei per patch (Poisson mean), radius in px, elongation (1: round) and darkness (× the colour)
_NUCLEI: dict[str, tuple[float, float, float, float]] = {
    "grade 1": (14, 2.0, 1.0, 1.0),
    "grade 2": (30, 3.2, 1.0, 1.0),
    "normal": (5, 1.5, 1.0, 1.0),
    "tumour": (22, 3.0, 1.6, 0.75),
    "stroma": (4, 1.6, 3.0, 1.0),
    "inflamed": (45, 1.1, 1.0, 0.6),
    "grade 3": (40, 3.8, 1.3, 0.8),
    "atypical": (9, 1.9, 1.2, 0.9),
}
#: ``hue``: the colours turned by 25 degrees about the grey axis (another stain's hue)
_TURN = np.radians(25.0)
_AXIS = np.ones(3) / np.sqrt(3.0)
_HUE = (
    np.cos(_TURN) * np.eye(3)
    + np.sin(_TURN) * np.array([[0, -_AXIS[2], _AXIS[1]], [_AXIS[2], 0, -_AXIS[0]], [-_AXIS[1], _AXIS[0], 0]])
    + (1 - np.cos(_TURN)) * np.outer(_AXIS, _AXIS)
)


def _mechanism(site: str) -> tuple[str, float]:
    name, _, value = site.partition(":")
    if name not in MECHANISMS:
        raise ValueError(f"unknown site mechanism {site!r} (one of {', '.join(MECHANISMS)})")
    if name == "fade" and not 0.0 < float(value or "nan") < 1.0:
        raise ValueError(f"fade needs a share in (0, 1), as fade:0.4, not {site!r}")
    if name == "scale" and value and not 0.5 <= float(value) <= 2.0:
        raise ValueError(f"scale takes a magnification in [0.5, 2], as scale:0.8, not {site!r}")
    return name, float(value) if value else (1.25 if name == "scale" else 0.0)


def patch(rng: np.random.Generator, kind: str, cls: str, site: str = "none") -> np.ndarray:
    """One ``(48, 48, 3)`` uint8 patch of class ``cls`` of ``kind`` drawn at ``site``."""
    if cls not in KINDS[kind]:
        raise ValueError(f"{kind} has no class {cls!r}")
    name, value = _mechanism(site)
    zoom = value if name == "scale" else 1.0
    yy, xx = np.mgrid[:SIDE, :SIDE].astype(np.float64)
    image = np.ones((SIDE, SIDE, 3)) * (_TISSUE + rng.normal(0, 6, 3)) + rng.normal(0, 8, (SIDE, SIDE, 3))
    if cls == "stroma":  # fibres: darker pink bands across the patch in one direction
        angle = rng.uniform(0, np.pi)
        phase = rng.uniform(0, 2 * np.pi)
        along = (xx * np.cos(angle) + yy * np.sin(angle)) / zoom
        image -= (0.5 + 0.5 * np.sin(along * 1.3 + phase))[..., None] * np.array([10.0, 45.0, 25.0])
    else:
        angle = rng.uniform(0, np.pi)
    mean, radius, stretch, dark = _NUCLEI[cls]
    nucleus = _NUCLEUS * dark
    if name == "sparse":  # a thinner section: fewer nuclei in view, each paler
        mean, nucleus = 0.6 * mean, 0.7 * nucleus + 0.3 * _TISSUE
    elif name == "thick":  # a thicker section: more nuclei in view, each darker
        mean, nucleus = 1.5 * mean, 0.8 * nucleus
    for _ in range(rng.poisson(mean / zoom**2)):
        cy, cx = rng.uniform(0, SIDE, 2)
        r = radius * zoom * rng.uniform(0.7, 1.3)
        turn = angle if cls == "stroma" else rng.uniform(0, np.pi)
        u = (xx - cx) * np.cos(turn) + (yy - cy) * np.sin(turn)
        v = -(xx - cx) * np.sin(turn) + (yy - cy) * np.cos(turn)
        inside = (u / (r * np.sqrt(stretch))) ** 2 + (v * np.sqrt(stretch) / r) ** 2 < 1.0
        image[inside] = nucleus + rng.normal(0, 10, 3)
    if name == "stain":
        image = image * np.array([1.08, 0.92, 0.78]) + np.array([0.0, 10.0, 25.0])
        image[..., 2] += 0.25 * (255.0 - image[..., 0])  # the nuclei's purple towards blue
    elif name == "dim-noisy":
        image = (image - image.mean()) * 0.7 + image.mean() - 20.0 + rng.normal(0, 12, image.shape)
    elif name == "fade":
        image = image * (1 - value) + 255.0 * value
    elif name == "tint":  # a yellowed mounting medium
        image = image * np.array([1.0, 0.96, 0.78]) + np.array([6.0, 4.0, -8.0])
    elif name == "gamma":  # another scanner's tone curve: mid-tones darker
        image = 255.0 * (np.clip(image, 0, 255) / 255.0) ** 1.5
    elif name == "hue":
        image = image @ _HUE.T
    elif name == "saturate":  # an over-stained slide: every colour further from grey
        grey = image.mean(axis=2, keepdims=True)
        image = grey + 1.6 * (image - grey)
    elif name == "vignette":  # uneven light: the corners darker
        r2 = ((xx - SIDE / 2) ** 2 + (yy - SIDE / 2) ** 2) / (SIDE**2 / 2)
        image = image * (1.0 - 0.5 * r2)[..., None]
    elif name == "bleach":  # the eosin faded: the pink towards white, the nuclei towards blue-green
        image = image + (255.0 - image) * np.array([0.0, 0.45, 0.3])
    elif name == "haze":  # a dusty cover slip: less contrast, a bluish veil
        image = 0.65 * image + 0.35 * np.array([200.0, 210.0, 235.0])
    elif name == "warm":  # a warmer lamp: red up, blue down
        image = image * np.array([1.1, 1.0, 0.85]) + np.array([12.0, 0.0, -6.0])
    elif name == "noise":  # a noisy sensor at high gain
        image = image + rng.normal(0, 28, image.shape)
    elif name == "shadow":  # a dark band across the field (a fold, an uneven light)
        band = np.exp(-(((xx + yy) / 2.0 - rng.uniform(8, SIDE - 8)) ** 2) / 60.0)
        image = image * (1.0 - 0.45 * band)[..., None]
    out = np.clip(image, 0, 255).astype(np.uint8)
    if name == "blur":
        out = np.asarray(Image.fromarray(out).filter(ImageFilter.GaussianBlur(1.2)))
    elif name == "sharpen":  # a scanner's strong unsharp mask: edges ringed
        out = np.asarray(
            Image.fromarray(out).filter(ImageFilter.UnsharpMask(radius=2, percent=250, threshold=0))
        )
    elif name == "jpeg":  # stored at a low JPEG quality: blocks and ringing
        buffer = io.BytesIO()
        Image.fromarray(out).save(buffer, format="JPEG", quality=15)
        out = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    return out


def site_classes(
    rng: np.random.Generator, kind: str, n: int, reference: float, dominant: bool = False
) -> np.ndarray:
    """``n`` class indices of ``kind``: ``normal`` a share ``reference``, the other classes the rest
    equally, or (``dominant``) the first other class three quarters of the rest."""
    classes = KINDS[kind]
    ref = classes.index("normal")
    others = [i for i in range(len(classes)) if i != ref]
    shares = np.zeros(len(classes))
    shares[ref] = reference
    if dominant and len(others) > 1:  # (with one other class it has the whole rest anyway)
        shares[others[0]] = 0.75 * (1 - reference)
        shares[others[1:]] = 0.25 * (1 - reference) / len(others[1:])
    else:
        shares[others] = (1 - reference) / len(others)
    return rng.choice(len(classes), n, p=shares)


def write_site(
    folder: str,
    rng: np.random.Generator,
    kind: str,
    labels: Sequence[int] | np.ndarray,
    site: str,
    prefix: str,
) -> None:
    """Write the patches of ``labels`` (class indices) drawn at ``site`` as PNGs in one sub-folder
    per class of ``folder`` (the class folders ``f2tta`` reads its labels from)."""
    classes = KINDS[kind]
    for cls in classes:
        (Path(folder) / cls).mkdir(parents=True, exist_ok=True)
    for i, label in enumerate(labels):
        cls = classes[int(label)]
        name = f"{prefix}-{i:04d}.png"
        Image.fromarray(patch(rng, kind, cls, site)).save(Path(folder) / cls / name)
