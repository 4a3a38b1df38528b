"""OpenMP's wait policy, chosen before torch loads libgomp (imported first by :mod:`engine`).

libgomp, torch's OpenMP runtime on Linux, lets a thread that waits at a barrier spin for a while
before it sleeps. On idle CPUs that is the fastest choice; on CPUs that other processes already
keep busy, the spinning thread takes the CPU from the very thread it waits for, and a small model
runs 10-40 times slower (``docs/reliability.md``, "OpenMP wait policy"). libgomp reads its
settings once, when it is loaded, so the choice is made here, before anything imports torch:
when the user set neither ``OMP_WAIT_POLICY`` nor ``GOMP_SPINCOUNT`` and the load average is
already at least the number of usable CPUs, ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep at once).
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping

#: The variables by which a user chooses the wait policy; when either is set, nothing is changed.
USER_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def choose_wait_policy(
    environ: MutableMapping[str, str] | None = None,
    load: Callable[[], float] | None = None,
    cpus: Callable[[], int] = usable_cpus,
) -> str | None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` when the CPUs are already busy.

    Args:
        environ: the environment to read and change (default ``os.environ``).
        load: the 1-minute load average (default ``os.getloadavg()[0]``).
        cpus: the number of usable CPUs.

    Returns:
        The policy set, or None when the user chose one, the load is unknown or below the CPUs.
    """
    env = os.environ if environ is None else environ
    if any(name in env for name in USER_SETTINGS):
        return None
    try:
        busy = (load() if load is not None else os.getloadavg()[0]) >= cpus()
    except (OSError, AttributeError):  # no load average on this system (Windows)
        return None
    if not busy:
        return None
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return "PASSIVE"


#: What :func:`choose_wait_policy` did when the engine was first imported (None: nothing);
#: ``docs/reliability.md`` points users to it.
CHOSEN = choose_wait_policy()
