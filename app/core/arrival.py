"""Arrival order of a folder's images, and the warning when that order sorts the stream by class.

The engine lists a folder by file name, modification time or manifest. Class sub-folders then
arrive class by class (all of ``normal/``, then all of ``tumor/``): the running plots show the
class make-up instead of the adaptation, and the method adapts to one class at a time. The app
adds a seeded interleaving (a shuffle that is the same for the same files and seed) and warns
when the order it uses is sorted by class.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from app._engine import FolderSource

# Orders the app offers: the engine's three and the seeded interleaving.
ORDER_LABELS: dict[str, str] = {
    "name": "File name",
    "mtime": "Modification time",
    "manifest": "Manifest",
    "interleaved": "Interleaved (seeded shuffle)",
}
ENGINE_ORDERS = ("name", "mtime", "manifest")
SORTED_MIN_IMAGES = 8  # fewer labelled images than this say nothing about the order


def engine_order(order: str) -> str:
    """The engine's listing order behind an app order (interleaving starts from file names)."""
    return order if order in ENGINE_ORDERS else "name"


def interleave(source: FolderSource, seed: int) -> FolderSource:
    """``source`` with its items in a seeded random order, positions renumbered.

    The shuffle starts from the items sorted by key, so the same files and seed give the same
    order on every machine; rows are journalled by key, so a resumed run is not confused by it.
    """
    items = sorted(source.items, key=lambda it: it.key)
    random.Random(seed).shuffle(items)
    renumbered = tuple(dataclasses.replace(it, position=i) for i, it in enumerate(items))
    return dataclasses.replace(source, items=renumbered, order="interleaved")


def class_runs(truths: Sequence[int]) -> list[tuple[int, int]]:
    """``(class, length)`` of each run of equal consecutive labels."""
    runs: list[tuple[int, int]] = []
    for t in truths:
        if runs and runs[-1][0] == t:
            runs[-1] = (t, runs[-1][1] + 1)
        else:
            runs.append((t, 1))
    return runs


def class_sorted_warning(source: FolderSource, classes: Sequence[str]) -> str | None:
    """A warning when the labelled images arrive in a few long blocks of one class (None: mixed)."""
    truths = [it.ground_truth for it in source.items if it.ground_truth is not None]
    distinct = set(truths)
    if len(distinct) < 2 or len(truths) < SORTED_MIN_IMAGES:
        return None
    runs = class_runs(truths)
    if len(runs) > 2 * len(distinct):
        return None
    shown = " → ".join(f"{classes[c] if 0 <= c < len(classes) else c} ×{n}" for c, n in runs[:6])
    return (
        f"The images arrive sorted by class ({shown}): the running plots will show the class make-up, "
        "not the adaptation, and the model adapts to one class at a time. Choose Arrival order ▸ "
        "Interleaved to mix them."
    )
