"""What every later histology site set shares: site1 from the first set, the tissue of each kind.

A later set (``_histo_v2.py``, ``_histo_v3.py``, ``_histo_v4.py``) supplies only how its target
sites draw an image from a patch's optical-density layers; :func:`specs` pairs that with the histo
and the lesion tissue and with the first set's site1, which is drawn exactly as the first set draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.synth import _histo, _lesion
from lab.synth._drawing import SynthSpec
from lab.synth._histo import _CANONICAL, HistoSite, Stained, Tissue, dye, stains

TissueFn = Callable[[np.random.Generator, int, int, float], Tissue]
#: (rng, the patch's layers, a target site, size) -> the stored uint8 image.
DrawFn = Callable[[np.random.Generator, Tissue, Any, int], np.ndarray]
FirstFn = Callable[[np.random.Generator, int, HistoSite, int], np.ndarray]
#: (rng, the patch's layers, a target site, size) -> the section's optical density (float32, H x W x 3).
DensityFn = Callable[[np.random.Generator, Tissue, Any, int], np.ndarray]
#: (rng, optical density, a target site, size) -> the stored uint8 image.
ImageFn = Callable[[np.random.Generator, np.ndarray, Any, int], np.ndarray]
Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class StainedSite:
    """What a site of the fourth, fifth and sixth set begins with: its name, its two stains and its
    light (each set's site adds how it prepares, images and stores a section)."""

    name: str
    h_vector: Vec3  # nuclear stain's optical density per R, G, B (normalised)
    h_strength: float
    e_vector: Vec3  # the counterstain on cytoplasm and stroma
    e_strength: float
    light: Vec3  # light through empty glass after white balance, 0-1 per channel


def histo_tissue(rng: np.random.Generator, label: int, size: int, f: float) -> Tissue:
    """The histo kind's tissue of class ``label`` at ``f`` image px per canonical px."""
    return _histo.tissue(rng, _histo.atypia(rng, label), size, f)


def stained_then_imaged(optical_density: DensityFn, image: ImageFn) -> DrawFn:
    """A set's draw in two steps: the section's optical density as the site prepares and stains it,
    then the stored image of it under the site's light and camera."""

    def draw(rng: np.random.Generator, layers: Tissue, site: Any, size: int) -> np.ndarray:
        return image(rng, optical_density(rng, layers, site, size), site, size)

    return draw


def collagen_stained(
    rng: np.random.Generator,
    layers: Tissue,
    site: Stained,
    collagen_dye: Vec3,
    strength: float,
    displaces: float,
) -> np.ndarray:
    """The section's optical density (H, W, 3) under the site's two :func:`~lab.synth._histo.stains`
    and a third dye, ``collagen_dye`` at ``strength``, on the collagen: where it stains (strength
    above 0) it takes ``displaces`` of the collagen's share from the counterstain. The third dye's
    jitter is drawn after the two stains'."""
    hv, ev = stains(rng, site)
    od = layers.haem[..., None] * hv
    counter = layers.eosin
    if strength > 0:
        collagen = layers.stroma * (1.0 - layers.cover)
        counter = np.clip(layers.eosin - displaces * collagen, 0.0, None)
        od = od + collagen[..., None] * dye(rng, collagen_dye, strength, site.stain_jitter)
    stained: np.ndarray = od + counter[..., None] * ev
    return stained


def renderer(
    tissue: TissueFn, first: FirstFn, draw: DrawFn
) -> Callable[[np.random.Generator, int, Any, int], np.ndarray]:
    """A kind's renderer: site1 as the first set draws it, a target site's tissue through ``draw``."""

    def render(rng: np.random.Generator, label: int, site: Any, size: int) -> np.ndarray:
        if isinstance(site, HistoSite):  # site1 of the first set
            return first(rng, label, site, size)
        layers = tissue(rng, label, size, size / _CANONICAL * site.scale)
        return draw(rng, layers, site, size)

    return render


def specs(sites: Sequence[Any], draw: DrawFn, description: str, site_set: str) -> dict[str, SynthSpec]:
    """The histo and the lesion spec of a later set (by kind): site1 and ``sites``, drawn with ``draw``."""
    histo = SynthSpec(
        kind="histo",
        classes=_histo.SPEC.classes,
        positive_class=_histo.SPEC.positive_class,
        sites=(_histo.SITES[0], *sites),
        render=renderer(histo_tissue, _histo.render, draw),
        description=_histo.SPEC.description + description,
        site_set=site_set,
    )
    lesion = SynthSpec(
        kind="lesion",
        classes=_lesion.SPEC.classes,
        positive_class=_lesion.SPEC.positive_class,
        sites=(_histo.SITES[0], *sites),
        render=renderer(_lesion.lesion_tissue, _lesion.render, draw),
        description=_lesion.SPEC.description + description,
        site_set=site_set,
    )
    return {"histo": histo, "lesion": lesion}
