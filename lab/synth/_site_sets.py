"""Which generator draws a kind under a site set (``f2tta synth KIND --sites v1|v2|v3|v4|v5|v6``).

Every site set of a kind keeps the first set's site1 (the source site) image for image; the later
sets add four target sites imaged through mechanisms no earlier set used:

* ``v1`` — every kind's first sites (``_histo.py``, ``_fundus.py``, ``_lesion.py``, ``_oct.py``);
* ``v2`` — histo, lesion and fundus (``_histo_v2.py``, ``_fundus_v2.py``) and oct (``_oct_v2.py``);
* ``v3`` — histo, lesion and fundus (``_histo_v3.py``, ``_fundus_v3.py``) and oct (``_oct_v3.py``);
* ``v4`` — histo, lesion and fundus (``_histo_v4.py``, ``_fundus_v4.py``) and oct (``_oct_v4.py``);
* ``v5`` — histo, lesion and fundus (``_histo_v5.py``, ``_fundus_v5.py``) and oct (``_oct_v5.py``);
* ``v6`` — histo, lesion and fundus (``_histo_v6.py``, ``_fundus_v6.py``).

The modules are imported lazily: generating one kind does not load the others.
"""

from __future__ import annotations

import importlib

from lab.synth._drawing import SynthSpec
from lab.synth._synth_marker import SynthError

KINDS = ("histo", "fundus", "lesion", "oct")
SITE_SETS = ("v1", "v2", "v3", "v4", "v5", "v6")  # ``f2tta synth --sites``
#: The site sets each kind has.
KIND_SITE_SETS: dict[str, tuple[str, ...]] = {
    "histo": ("v1", "v2", "v3", "v4", "v5", "v6"),
    "lesion": ("v1", "v2", "v3", "v4", "v5", "v6"),
    "fundus": ("v1", "v2", "v3", "v4", "v5", "v6"),
    "oct": ("v1", "v2", "v3", "v4", "v5"),
}
#: (kind, site set) -> the module under ``lab.synth`` that draws it: its ``SPEC``, or for the later
#: histology sets (one module for histo and lesion) its ``SPECS[kind]``.
_MODULES: dict[tuple[str, str], str] = {
    ("histo", "v1"): "_histo",
    ("fundus", "v1"): "_fundus",
    ("lesion", "v1"): "_lesion",
    ("oct", "v1"): "_oct",
    **{("oct", v): f"_oct_{v}" for v in ("v2", "v3", "v4", "v5")},
    **{("fundus", v): f"_fundus_{v}" for v in ("v2", "v3", "v4", "v5", "v6")},
    **{(k, v): f"_histo_{v}" for k in ("histo", "lesion") for v in ("v2", "v3", "v4", "v5", "v6")},
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
    module = importlib.import_module(f"lab.synth.{_MODULES[(kind, sites)]}")
    spec: SynthSpec = module.SPECS[kind] if hasattr(module, "SPECS") else module.SPEC
    return spec
