"""The lab's ``f2tta`` sub-commands, which ``f2tta`` adds to its own (``engine.cli.LAB_COMMANDS``).

Each lives in its own module with ``add_arguments(parser)`` and ``main(args) -> int``, as the
engine's do; this table is all ``f2tta --help`` imports of the lab.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "synth": ("lab.cli.synth", "generate multi-site synthetic histology or fundus data"),
    "bench": ("lab.cli.bench", "run the F²TTA benchmark over methods and seeds"),
    "bench-suite": ("lab.cli.bench_suite", "run a committed evaluation suite from cached source passes"),
}
