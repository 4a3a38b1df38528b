"""A guard against a reference-count bug of PySide6 on CPython < 3.12: static singletons run out.

With PySide6 6.12 on CPython 3.11, ``SignalInstance.emit()`` and ``disconnect()`` return a bool,
and every call that returns nothing (``setText``, ``setToolTip``, ``processEvents``, a model's
``data()`` with nothing to say, ...) returns ``None``, without a new reference: each such call
made from Python takes one reference from ``True``, ``False`` or ``None``. A fresh interpreter
holds a few tens of thousands of each; the app makes such calls for every image, every flush
and every log line, so a long session (a 400-class card, 2 400 labelled images) reaches zero and
CPython aborts with "Fatal Python error: none_dealloc" (or ``bool_dealloc``), often at exit.

:func:`protect_singletons` measures which of CPython's static singletons lose references through
a probe of such calls (:func:`lost_references`) and, when any does, gives each singleton the probe
saw losing, and the named constants ``None``, ``True``, ``False``, ``Ellipsis`` and
``NotImplemented``, a reserve of references no session can use up (2**40, about 35 000 years at
a million calls a second). These objects are statically allocated and never freed, so the
reserve changes nothing else; CPython 3.12 made them immortal for the same reason, and there
the guard does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import sys
from collections.abc import Callable

logger = logging.getLogger(__name__)

RESERVE = 1 << 40
PROBES = 32
_protected: set[int] = set()


def singletons() -> dict[str, object]:
    """CPython 3.11's statically allocated singletons a binding can hand back, by name.

    The named constants, the empty tuple, string and bytes, the small integers (-5 to 256) and the
    one-character Latin-1 strings: values a call may return without creating an object.
    """
    found: dict[str, object] = {
        "None": None,
        "True": True,
        "False": False,
        "Ellipsis": Ellipsis,
        "NotImplemented": NotImplemented,
        "()": (),
        "''": "",
        "b''": b"",
    }
    found.update({f"int {i}": i for i in range(-5, 257)})
    found.update({f"chr {c}": chr(c) for c in range(256)})
    return found


NAMED = ("None", "True", "False", "Ellipsis", "NotImplemented")


def _probe_calls() -> list[Callable[[], object]]:
    """Calls from Python into PySide6 of the kinds the app makes all the time."""
    from PySide6.QtCore import QCoreApplication, QObject, Signal

    class _Probe(QObject):
        fired = Signal()
        carried = Signal(object)

    probe = _Probe()

    def slot(value: object) -> None:
        pass

    def connect_and_disconnect() -> None:
        probe.carried.connect(slot)
        probe.carried.disconnect(slot)

    return [
        probe.fired.emit,  # returns a bool
        lambda: probe.carried.emit(0),
        connect_and_disconnect,
        lambda: probe.setObjectName("probe"),  # returns nothing
        lambda: probe.property("absent"),  # an invalid QVariant: None
        QCoreApplication.processEvents,
    ]


def lost_references() -> dict[str, int]:
    """References each singleton lost through :data:`PROBES` rounds of PySide6 calls (those that lost)."""
    watched = singletons()
    calls = _probe_calls()
    before = {name: sys.getrefcount(obj) for name, obj in watched.items()}
    for _ in range(PROBES):
        for call in calls:
            call()
    after = {name: sys.getrefcount(obj) for name, obj in watched.items()}
    # Python code keeps its own references balanced; a loss of half the rounds or more is the bug.
    return {name: before[name] - after[name] for name in watched if before[name] - after[name] >= PROBES // 2}


def _add_references(value: object, count: int) -> bool:
    """Add ``count`` references to ``value`` (its ``ob_refcnt``, the first field of the object).

    Checked against ``sys.getrefcount``: the field must be the object's count. The ctypes view is
    made before the first count and the collector is paused while counting (making the view, or a
    collection between the two counts, moves ``None``'s count on its own: the check then failed
    now and then under load and ``None`` went unprotected); a count moved by another thread is
    retried.
    """
    cell = ctypes.c_ssize_t.from_address(id(value))
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(5):
            before = sys.getrefcount(value)
            cell.value += count
            if sys.getrefcount(value) - before == count:
                return True
            cell.value -= count  # not (yet) the layout expected: leave the object as it was
    finally:
        if collecting:
            gc.enable()
    return False


def protect_singletons() -> tuple[str, ...]:
    """Give the singletons PySide6 takes references from a reserve of references (idempotent).

    Returns the names of the singletons that hold a reserve now (empty: not needed here, or not
    possible).
    """
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return ()  # immortal singletons (3.12+), or no reference counts to protect
    watched = singletons()
    if not _protected:
        try:
            lost = lost_references()
        except Exception as exc:  # the check must never stop the app from starting
            logger.debug("the PySide6 reference check failed: %s", exc)
            return ()
        if not lost:
            return ()
        for name in dict.fromkeys([*NAMED, *lost]):
            if _add_references(watched[name], RESERVE):
                _protected.add(id(watched[name]))
        logger.debug("PySide6 takes references from %s: a reserve was added", ", ".join(lost))
    return tuple(name for name, obj in watched.items() if id(obj) in _protected)
