"""Fewer glibc malloc arenas for the long-running app.

glibc gives each thread that allocates concurrently its own arena (up to 8 per core). The app
allocates from the GUI thread, the engine's worker thread and the image read-ahead threads; freed
memory stays spread over their arenas, and a long run's resident size creeps up although what
the app keeps grows slowly (``docs/reliability.md``). ``mallopt(M_ARENA_MAX, n)`` caps the
number of arenas; it affects arenas created afterwards, so it is called first thing at start-up.
A no-op where the C library is not glibc (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's mallopt parameter number
DEFAULT_ARENAS = 2
ENV = "F2TTA_MALLOC_ARENAS"  # 0 turns the cap off; a number sets it


def limit_malloc_arenas(arenas: int | None = None) -> int:
    """Cap glibc's malloc arenas; returns the cap set, or 0 when nothing was done.

    ``arenas`` defaults to ``$F2TTA_MALLOC_ARENAS`` or :data:`DEFAULT_ARENAS`; 0 leaves glibc's
    default. ``MALLOC_ARENA_MAX`` in the environment (glibc's own setting) is respected as is.
    """
    if arenas is None:
        text = os.environ.get(ENV, "")
        arenas = int(text) if text.strip().isdigit() else DEFAULT_ARENAS
    if arenas <= 0 or "MALLOC_ARENA_MAX" in os.environ or platform.libc_ver()[0] != "glibc":
        return 0
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = int(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(arenas)))
    except (OSError, AttributeError) as exc:
        logger.debug("mallopt unavailable: %s", exc)
        return 0
    return arenas if ok == 1 else 0
