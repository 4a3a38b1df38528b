"""An exclusive, advisory lock on a directory, released by the OS when its holder dies.

The lock is a file ``lock`` in the directory, held with ``flock`` (POSIX) or ``msvcrt.locking``
(Windows) for as long as the :class:`DirectoryLock` is open. Its content says who holds it
(process id, host, command, since when), so a second process can tell the user whom it waits for.
A SIGKILL'ed holder leaves the file behind but not the lock: the next process takes it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from engine.errors import StateError
from engine.util.closing import Closing
from engine.util.files import check_output

LOCK_FILE = "lock"


class LockedError(StateError):
    """Another process holds the directory; the message names it."""


def _try_lock(fh: IO[str]) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def describe_holder(data: dict[str, Any]) -> str:
    """``process 123 on host (f2tta run ..., since 2026-01-01 10:00)`` from the lock file's content."""
    pid, host = data.get("pid", "?"), data.get("host", "?")
    what = str(data.get("command", ""))[:120]
    since = str(data.get("since", "")).replace("T", " ")[:16]
    return f"process {pid} on {host}" + (f" ({what}, since {since})" if what else "")


class DirectoryLock(Closing):
    """Holds ``directory/lock`` exclusively until :meth:`close` (or the end of a ``with`` block).

    Args:
        directory: an existing directory.
        command: what the holder is doing, for the message another process shows.

    Raises:
        LockedError: another process (or another open lock in this one) holds it.
        OSError: the lock file cannot be created.
    """

    def __init__(self, directory: Path, command: str) -> None:
        self.path = directory / LOCK_FILE
        check_output(self.path)  # a FIFO named lock would block the open
        fh = open(self.path, "a+", encoding="utf-8")
        fh.seek(0)  # msvcrt locks the byte at the current position: the same one for every process
        if not _try_lock(fh):
            fh.seek(0)
            try:
                holder = json.loads(fh.read() or "{}")
            except ValueError:
                holder = {}
            fh.close()
            who = describe_holder(holder) if isinstance(holder, dict) else "another process"
            raise LockedError(f"{directory} is in use by {who}; wait until it ends, or use another directory")
        self._fh: IO[str] | None = fh
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "since": datetime.now(UTC).astimezone().isoformat(timespec="seconds"),
        }
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(info) + "\n")
        fh.flush()

    def close(self) -> None:
        """Give the lock up (the file stays; its content no longer matters)."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()  # closing the descriptor releases flock and msvcrt locks
            self._fh = None
