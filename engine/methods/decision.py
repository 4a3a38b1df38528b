"""Where a method's reported decision came from (I-DiPT+'s decision paths, ``docs/method.md``).

A frozen value of Python scalars, so it crosses threads with the step's result
(:class:`engine.run.step.StepResult`) into rows, reports and the benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DecisionRecord:
    """Where a reported decision came from: I-DiPT+'s operating point (``docs/method.md``).

    Attributes:
        path: ``source-like`` (the image looks like the source domain: the source threshold),
            ``accepted`` (its site group's operating point decided it), ``not-accepted`` (the
            group has no accepted operating point: the source model's decision) or
            ``awaiting-review`` (it has one, held back until reviews certify it: the source model's).
        group: the site group the image was judged in (-1: none).
        threshold: the threshold on the source margin ``l_1 - l_0`` it was decided by (0: the
            source model's own).
        reason: why this path (``too few images``, the guard that failed, ``accepted``, ...).
        group_images: images the group's last fit used (0: not fitted).
        separation: the last fit's component separation, in tied deviations (nan: none).
        share: its smallest component share (nan: none).
        disagreement: the share of the group its margin threshold split differently from the
            mixture (nan: none).
        low, high: the bootstrap interval of its threshold (nan: none).
        site: the site the image was decided for, as the caller named it ("" when none was).
        margin: the source margin ``l_1 - l_0`` of the image (nan: not a two-class decision).
        candidates: ``(name, threshold)`` of the unit's stronger candidates when the image was
            decided (``engine.methods.idipt_plus._candidates``; nan where one has no value yet).
            They are never reported until a review certifies them (``docs/review-certificates.md``).
        prompted: the class I-DiPT's prompted model gave the image (-1: not computed).
    """

    path: str
    group: int = -1
    threshold: float = 0.0
    reason: str = ""
    group_images: int = 0
    separation: float = math.nan
    share: float = math.nan
    disagreement: float = math.nan
    low: float = math.nan
    high: float = math.nan
    site: str = ""
    margin: float = math.nan
    candidates: tuple[tuple[str, float], ...] = ()
    prompted: int = -1
