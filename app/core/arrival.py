"""The arrival orders as the app names them; the orders and the class-sorted check are the engine's.

``engine.io.arrival`` holds the orders (``interleaved`` included) and the check that an order
sorts the stream by class, so ``f2tta run`` continues an app project in the app's order.
"""

from __future__ import annotations

from collections.abc import Sequence

from app._engine import FolderSource, check_class_sorted

# Orders the app offers (the engine's ORDERS), as the menus and the settings dialog name them.
ORDER_LABELS: dict[str, str] = {
    "name": "File name",
    "mtime": "Modification time",
    "manifest": "Manifest",
    "interleaved": "Interleaved (seeded shuffle)",
}


def class_sorted_warning(source: FolderSource, classes: Sequence[str]) -> str | None:
    """The engine's class-sorted warning for a folder's items in arrival order (None: mixed)."""
    return check_class_sorted([it.ground_truth for it in source.items], classes)
