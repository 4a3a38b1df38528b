"""A guard against a reference-count bug of PySide6 on CPython < 3.12: ``True``/``False`` run out.

With PySide6 6.12 on CPython 3.11, ``SignalInstance.emit()`` returns ``True`` and
``SignalInstance.disconnect()`` returns a bool without a new reference, so every call made from
Python takes one reference from the bool singleton. A fresh interpreter holds a few tens of
thousands; the app emits signals for every batch of results, every flush and every log line, and
the test suite connects and disconnects thousands of times, so after hours of work (or a test
session) the count reaches zero and CPython aborts with "Fatal Python error: bool_dealloc:
deallocating True or False", often at exit.

:func:`protect_bools` checks whether the installed PySide6 has the bug (it emits a probe signal
and watches ``sys.getrefcount(True)``) and, when it does, gives both singletons a reserve of
references no session can use up (2**40, about 35 000 years at a million calls a second). Both
are static objects that CPython never frees, so the reserve changes nothing else; CPython 3.12
made them immortal for the same reason, and there the guard does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import sys

logger = logging.getLogger(__name__)

RESERVE = 1 << 40
PROBES = 32
_protected = False


def emit_takes_a_reference() -> bool:
    """Whether emitting a signal from Python takes a reference from ``True`` (the PySide6 bug)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        fired = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(PROBES):
        probe.fired.emit()
    lost = before - sys.getrefcount(True)
    probe.deleteLater()
    return lost >= PROBES // 2


def _add_references(value: bool, count: int) -> bool:
    """Add ``count`` references to ``value`` (its ``ob_refcnt``, the first field of the object)."""
    before = sys.getrefcount(value)
    cell = ctypes.c_ssize_t.from_address(id(value))
    cell.value += count
    if sys.getrefcount(value) - before == count:
        return True
    cell.value -= count  # not the layout expected: leave the object as it was
    return False


def protect_bools() -> bool:
    """Give ``True`` and ``False`` a reserve of references when PySide6 takes them (idempotent).

    Returns whether the reserve is in place (False: not needed here, or not possible).
    """
    global _protected
    if _protected:
        return True
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False  # immortal bools (3.12+), or no reference counts to protect
    try:
        needed = emit_takes_a_reference()
    except Exception as exc:  # the check must never stop the app from starting
        logger.debug("the PySide6 reference check failed: %s", exc)
        return False
    if not needed:
        return False
    _protected = _add_references(True, RESERVE) and _add_references(False, RESERVE)
    if _protected:
        logger.debug("PySide6 takes references from True/False: a reserve was added")
    return _protected
