"""Generated multi-site data (``f2tta synth``): :mod:`lab.synth.generate` and the kind modules."""

from __future__ import annotations

from lab.synth._synth_marker import SynthError
from lab.synth.generate import KINDS, SITE_SETS, SynthResult, generate_arrays, site_names, write_synth

__all__ = [
    "KINDS",
    "SITE_SETS",
    "SynthError",
    "SynthResult",
    "generate_arrays",
    "site_names",
    "write_synth",
]
