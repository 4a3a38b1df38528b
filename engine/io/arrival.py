"""Arrival orders of a folder's images, and the check that an order sorts the stream by class.

A folder is listed by file name, modification time or manifest
(:func:`engine.io.sources.open_folder`). Class sub-folders then arrive class by class (all of
``normal/``, then all of ``tumor/``): running figures show the class make-up instead of the
adaptation, and a method adapts to one class at a time. ``interleaved`` is a seeded shuffle of
the name order: the same files and seed give the same order on every machine, so ``f2tta run``
continues an app profile in the order the app began it (the journal records each source's
order and seed, :class:`engine.run.journal.SourceRecord`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

#: Every arrival order of a folder; the first three are listings, the last a seeded shuffle.
ORDERS: tuple[str, ...] = ("name", "mtime", "manifest", "interleaved")
#: Fewer labelled images than this say nothing about the order.
SORTED_MIN_IMAGES = 8


class _Item(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def position(self) -> int: ...


ItemT = TypeVar("ItemT", bound=_Item)


def listing_order(order: str) -> str:
    """The listing an order starts from (``interleaved`` shuffles the name order)."""
    return "name" if order == "interleaved" else order


def interleave(items: Sequence[ItemT], seed: int) -> tuple[ItemT, ...]:
    """``items`` in a seeded random order, positions renumbered from 0.

    The shuffle starts from the items sorted by key, so the same files and seed give the same
    order on every machine; rows are journalled by key, so a resumed run is not confused by it.
    """
    ordered = sorted(items, key=lambda it: it.key)
    random.Random(seed).shuffle(ordered)
    return tuple(dataclasses.replace(it, position=i) for i, it in enumerate(ordered))  # type: ignore[type-var]


def class_runs(truths: Sequence[int]) -> list[tuple[int, int]]:
    """``(class, length)`` of each run of equal consecutive labels."""
    runs: list[tuple[int, int]] = []
    for t in truths:
        if runs and runs[-1][0] == t:
            runs[-1] = (t, runs[-1][1] + 1)
        else:
            runs.append((t, 1))
    return runs


def class_sorted_warning(truths: Sequence[int | None], classes: Sequence[str]) -> str | None:
    """A warning when the labelled images arrive in a few long blocks of one class (None: mixed).

    Args:
        truths: each image's class index in arrival order (None: not labelled).
        classes: the model's class names.
    """
    known = [t for t in truths if t is not None]
    distinct = set(known)
    if len(distinct) < 2 or len(known) < SORTED_MIN_IMAGES:
        return None
    runs = class_runs(known)
    if len(runs) > 2 * len(distinct):
        return None
    shown = " → ".join(f"{classes[c] if 0 <= c < len(classes) else c} ×{n}" for c, n in runs[:6])
    return (
        f"The images arrive sorted by class ({shown}): running figures will show the class make-up, "
        "not the adaptation, and the model adapts to one class at a time. Use the interleaved "
        "arrival order (the app's Arrival order ▸ Interleaved, f2tta run --order interleaved) to mix them."
    )
