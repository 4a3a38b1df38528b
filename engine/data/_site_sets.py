"""Which generator draws a kind under a site set (``f2tta synth KIND --sites v1|v2|v3``).

Every site set of a kind keeps the first set's site1 (the source site) image for image; the later
sets add four target sites imaged through mechanisms no earlier set used:

* ``v1`` — every kind's first sites (``_histo.py``, ``_fundus.py``, ``_lesion.py``, ``_oct.py``);
* ``v2`` — histo, lesion and fundus (``_histo_v2.py``, ``_fundus_v2.py``) and oct (``_oct_v2.py``);
* ``v3`` — histo, lesion and fundus (``_histo_v3.py``, ``_fundus_v3.py``).

The modules are imported lazily: generating one kind does not load the others.
"""

from __future__ import annotations

from engine.data._drawing import SynthSpec
from engine.data._synth_marker import SynthError

KINDS = ("histo", "fundus", "lesion", "oct")
SITE_SETS = ("v1", "v2", "v3")  # ``f2tta synth --sites``
#: The site sets each kind has.
KIND_SITE_SETS: dict[str, tuple[str, ...]] = {
    "histo": ("v1", "v2", "v3"),
    "lesion": ("v1", "v2", "v3"),
    "fundus": ("v1", "v2", "v3"),
    "oct": ("v1", "v2"),
}


def get_spec(kind: str, sites: str = "v1") -> SynthSpec:
    """The generator of one kind with one of its site sets.

    Raises:
        SynthError: an unknown kind, or a site set the kind does not have.
    """
    if sites not in SITE_SETS:
        raise SynthError(f"unknown site set {sites!r}; choose one of {', '.join(SITE_SETS)}")
    if kind not in KINDS:
        raise SynthError(f"unknown kind of synthetic data {kind!r}; choose one of {', '.join(KINDS)}")
    if sites not in KIND_SITE_SETS[kind]:
        have = ", ".join(KIND_SITE_SETS[kind])
        raise SynthError(f"{kind} has no site set {sites}; its site sets are {have}")
    if sites == "v1":
        return _first(kind)
    if sites == "v2":
        return _second(kind)
    return _third(kind)


def _first(kind: str) -> SynthSpec:
    if kind == "histo":
        from engine.data._histo import SPEC as histo

        return histo
    if kind == "fundus":
        from engine.data._fundus import SPEC as fundus

        return fundus
    if kind == "lesion":
        from engine.data._lesion import SPEC as lesion

        return lesion
    from engine.data._oct import SPEC as oct_scans

    return oct_scans


def _second(kind: str) -> SynthSpec:
    if kind in ("histo", "lesion"):
        from engine.data import _histo_v2

        return _histo_v2.HISTO if kind == "histo" else _histo_v2.LESION
    if kind == "fundus":
        from engine.data._fundus_v2 import SPEC as fundus_v2

        return fundus_v2
    from engine.data._oct_v2 import SPEC as oct_v2

    return oct_v2


def _third(kind: str) -> SynthSpec:
    if kind in ("histo", "lesion"):
        from engine.data import _histo_v3

        return _histo_v3.HISTO if kind == "histo" else _histo_v3.LESION
    from engine.data._fundus_v3 import SPEC as fundus_v3

    return fundus_v3
