"""Generated patches whose class evidence is local: one small lesion in otherwise normal tissue.

Every patch is normal H&E-like tissue (the histo generator's morphology at low atypia). A
``lesion`` patch also holds one compact cluster of a few large, dark, irregular nuclei, covering
one to four 12 px tokens of a 96 px patch. To keep the task from being "any dark blob", a third of
the normal patches hold a *mimic*: a cluster of small, round, regular lymphocyte-like nuclei.

The sites are the histo sites (same stains, blur, noise, JPEG quality and magnification), so the
appearance shift is the same while the evidence is confined to a few tokens: the case where
uncertainty-based token masking can remove the evidence (see ``docs/method.md``).
"""

from __future__ import annotations

import numpy as np

from lab.synth._drawing import SynthSpec, finish
from lab.synth._histo import (
    _CANONICAL,
    SITES,
    HistoSite,
    Nuclei,
    Tissue,
    random_nuclei,
    spindles,
    stain,
    stained_cells,
    stroma,
)

NORMAL_ATYPIA = 0.25  # background tissue atypia (normal morphology)
MIMIC_PROBABILITY = 1.0 / 3.0  # share of normal patches holding a benign cluster
CLASSES = ("lesion", "normal")  # sorted, as the readers order them: label 0 is the lesion
LESION = CLASSES.index("lesion")


def _cluster(
    rng: np.random.Generator, size: int, f: float, lumen: np.ndarray, malignant: bool
) -> tuple[Nuclei, tuple[float, float]]:
    """A compact group of nuclei placed on tissue, away from the border."""
    margin = 14.0 * f
    for _ in range(20):  # find tissue, not a lumen, for the centre
        cy, cx = rng.uniform(margin, size - margin, 2)
        if lumen[int(cy), int(cx)] < 0.3:
            break
    k = int(rng.integers(5, 9))
    spread = (3.2 if malignant else 2.8) * f
    ys = cy + rng.normal(0, spread, k)
    xs = cx + rng.normal(0, spread, k)
    if malignant:
        nuc = random_nuclei(rng, k, (ys, xs), 4.2, 0.25, 0.6, 0.2, 1.55, f)
    else:
        nuc = random_nuclei(rng, k, (ys, xs), 2.2, 0.06, 0.1, 0.02, 1.2, f)
    return nuc, (float(cy), float(cx))


def lesion_tissue(rng: np.random.Generator, label: int, size: int, f: float) -> Tissue:
    """The layers of a patch: normal tissue, plus a lesion (label :data:`LESION`) or, a third of the time, a mimic."""
    eosin, lumen = stroma(rng, size, f)
    area = (size / (f * _CANONICAL)) ** 2
    t = rng.uniform(0.0, NORMAL_ATYPIA)
    n = int(rng.poisson((10.0 + 38.0 * t) * area))
    cy, cx = rng.uniform(-2, size + 2, n), rng.uniform(-2, size + 2, n)
    keep = lumen[np.clip(cy, 0, size - 1).astype(int), np.clip(cx, 0, size - 1).astype(int)] < 0.5
    parts = [
        random_nuclei(rng, int(keep.sum()), (cy[keep], cx[keep]), 2.4 + 2.0 * t, 0.06, 0.2, 0.04, 0.8, f),
        spindles(rng, int(rng.poisson(4.0 * area)), size, f, float(rng.uniform(0, np.pi))),
    ]
    if label == LESION:
        parts.append(_cluster(rng, size, f, lumen, malignant=True)[0])
    elif rng.random() < MIMIC_PROBABILITY:
        parts.append(_cluster(rng, size, f, lumen, malignant=False)[0])
    return stained_cells(rng, Nuclei.concat(parts), eosin, size, f)


def render(rng: np.random.Generator, label: int, site: HistoSite, size: int) -> np.ndarray:
    """One (size, size, 3) uint8 patch: label :data:`LESION` holds a lesion, the other is normal."""
    f = size / _CANONICAL * site.scale
    layers = lesion_tissue(rng, label, size, f)
    rgb = stain(rng, layers.haem, layers.eosin, site)
    return finish(rgb, rng, site.blur * size / _CANONICAL, site.noise)


SPEC = SynthSpec(
    kind="lesion",
    classes=CLASSES,
    positive_class="lesion",
    sites=SITES,
    render=render,
    description="H&E-like normal tissue; lesion = one small cluster of large atypical nuclei (local evidence, "
    "a third of normal patches hold a benign lymphocyte cluster); sites as in histo",
)
