"""Qt wiring by naming convention, shared by the controller and the scripted mode."""

from __future__ import annotations

import re

from PySide6.QtCore import QObject, Signal


def connect_by_name(source: QObject, target: object, prefix: str) -> None:
    """Connect each signal ``fooBar`` of ``source`` to ``target._on_<prefix>_foo_bar`` where it exists."""
    for name in dir(type(source)):
        if isinstance(getattr(type(source), name, None), Signal):
            slot = getattr(target, f"_on_{prefix}_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(), None)
            if slot is not None:
                getattr(source, name).connect(slot)
