"""What the tests of every later site set check (``test_synth_sites3.py``, ``test_synth_sites4.py``).

Nothing here runs a model: a set is checked by its site names, its site1, determinism, both classes
at every site, and one measurable property per target site that two samples of site1 do not show.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import numpy as np

from engine.data import generate_arrays, site_names
from engine.data._site_sets import KIND_SITE_SETS

#: (target images, site1 images) -> whether the target shows its site's property.
Check = Callable[[np.ndarray, np.ndarray], bool]


def lum(x: np.ndarray) -> np.ndarray:
    """Per-pixel luminance (the mean of R, G, B) of a batch (n, h, w, 3)."""
    return np.asarray(x.astype(np.float64).mean(3))


def lower(target: np.ndarray, source: np.ndarray) -> bool:
    """The target's mean is more than 3 pooled standard deviations below the source's."""
    pooled = np.sqrt((target.var(ddof=1) + source.var(ddof=1)) / 2) + 1e-9
    return bool((source.mean() - target.mean()) / pooled > 3.0)


def higher(target: np.ndarray, source: np.ndarray) -> bool:
    """The target's mean is more than 3 pooled standard deviations above the source's."""
    return lower(source, target)


def set_bytes(kind: str, sites: str) -> str:
    """sha256 of three 48 px images (and their labels) of every site of a set, seed 11: what pins a set."""
    h = hashlib.sha256()
    for site in site_names(kind, sites):
        images, labels = generate_arrays(kind, site, 3, size=48, seed=11, sites=sites)
        h.update(images.tobytes())
        h.update(labels.tobytes())
    return h.hexdigest()


def keeps_site1_and_adds_new_sites(kind: str, sites: str, targets: list[str]) -> None:
    """site1 is the first set's, image for image; the target sites are new names with new anatomy."""
    names = site_names(kind, sites)
    assert names[0] == "site1" and len(names) == 5 and sorted(targets) == names[1:]
    others = [s for s in KIND_SITE_SETS[kind] if s != sites]
    for other in others:
        assert not set(names[1:]) & set(site_names(kind, other)), "new sites get new names"
    a, la = generate_arrays(kind, "site1", 5, size=40, seed=4)
    b, lb = generate_arrays(kind, "site1", 5, size=40, seed=4, sites=sites)
    assert np.array_equal(a, b) and np.array_equal(la, lb), "site1 is the first set's site1"
    # The target sites draw other anatomy (and labels) than every other set's site of the same position.
    _, mine = generate_arrays(kind, 1, 40, size=24, seed=4, sites=sites)
    for other in others:
        _, theirs = generate_arrays(kind, 1, 40, size=24, seed=4, sites=other)
        assert not np.array_equal(mine, theirs), other


def deterministic_with_both_classes(kind: str, sites: str) -> None:
    """Every site: the same images for a seed, others for another seed, both classes, not a flat field."""
    for site in site_names(kind, sites):
        a, la = generate_arrays(kind, site, 6, size=40, seed=7, sites=sites)
        b, lb = generate_arrays(kind, site, 6, size=40, seed=7, sites=sites)
        c, _ = generate_arrays(kind, site, 6, size=40, seed=8, sites=sites)
        assert a.shape == (6, 40, 40, 3) and a.dtype == np.uint8
        assert np.array_equal(a, b) and np.array_equal(la, lb)
        assert not np.array_equal(a, c)
        assert sorted(set(la.tolist())) == [0, 1], site
        spread = a.reshape(6, -1).max(1).astype(int) - a.reshape(6, -1).min(1)
        assert (spread > 60).all(), (site, spread)  # an image, not a flat field


def shows_mechanisms(kind: str, sites: str, checks: Mapping[str, Check]) -> None:
    """Each target site shows its property against site1; a second sample of site1 does not."""
    source = generate_arrays(kind, "site1", 12, size=96, seed=0, sites=sites)[0]
    again = generate_arrays(kind, "site1", 12, size=96, seed=1, sites=sites)[0]
    for site, check in checks.items():
        target = generate_arrays(kind, site, 12, size=96, seed=0, sites=sites)[0]
        assert check(target, source), site
        # The property is the site's, not any site's: site1 against itself does not show it.
        assert not check(again, source), f"{site}'s property separates two samples of site1"
