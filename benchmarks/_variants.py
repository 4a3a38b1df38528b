"""Environment variants for the thread benchmarks (``--variants``): each child process runs under one.

A variant is ``default`` or ``NAME=VALUE`` (``OMP_WAIT_POLICY=PASSIVE``, ``OMP_NUM_THREADS=1``).
Every variable that any variant names is removed from the children's environment first, so
``default`` means what the engine does when the user sets none of them: the children import the
engine before torch, as ``f2tta run`` and the app do, so ``engine/_omp.py`` picks the wait
policy. ``GOMP_SPINCOUNT=300000`` is libgomp's own default (spin, then sleep), which the engine
leaves alone once that variable is set.
"""

from __future__ import annotations

import os


def parse_variants(text: str) -> list[str]:
    """``"default,OMP_WAIT_POLICY=PASSIVE"`` -> the variants; none given: ``["default"]``."""
    variants = [v.strip() for v in text.split(",") if v.strip()] or ["default"]
    for v in variants:
        if v != "default" and not v.partition("=")[0].isidentifier():
            raise SystemExit(f"--variants: {v!r} is neither 'default' nor NAME=VALUE")
    return variants


def variant_env(variant: str, variants: list[str]) -> dict[str, str]:
    """The environment of a child measured under ``variant``."""
    named = {v.partition("=")[0] for v in variants if v != "default"}
    env = {k: v for k, v in os.environ.items() if k not in named}
    if variant != "default":
        name, _, value = variant.partition("=")
        env[name] = value
    return env
