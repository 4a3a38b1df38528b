"""Opening files that may be hostile: regular files only, never blocking, sizes bounded.

``open(path)`` on a FIFO blocks until a writer appears, and reading ``/dev/zero`` never ends;
a symlink can point anywhere. Every reader of user files (images, states, model cards, slides)
goes through :func:`open_regular`, which checks the kind of file before and after opening it
with ``O_NONBLOCK`` and so returns at once, whatever the path names.

Outputs are only ever regular files: a path that names a FIFO, a device (``--out /dev/full``),
a socket or a folder is refused by :func:`check_output` before anything is opened or created,
whoever writes it (:func:`engine.util.atomic.atomic_write_bytes` would otherwise replace the device
node by a regular file, and appending to a FIFO blocks); :func:`open_append` opens a file to
append to without blocking and checks its kind again once it is open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, BinaryIO

# Errors of access that may go away by themselves (a file being copied, a share that hiccups);
# others (a symlink loop, a name too long, a path through a file) stay until someone acts.
_PERMANENT_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EINVAL})


class UnsafeFileError(Exception):
    """A file that is not opened; ``reason`` says why (without the path)."""

    def __init__(self, reason: str, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


def describe_kind(mode: int) -> str | None:
    """What a non-regular file is, in words, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def access_error(exc: OSError) -> UnsafeFileError:
    """An :class:`UnsafeFileError` for a failed stat/open, transient where retrying may help."""
    if isinstance(exc, FileNotFoundError):
        return UnsafeFileError("file not found (moved or deleted since it was listed?)", transient=True)
    if isinstance(exc, PermissionError):
        return UnsafeFileError("permission denied", transient=True)
    return UnsafeFileError(
        f"cannot access file ({exc.strerror or exc})", transient=exc.errno not in _PERMANENT_ERRNOS
    )


def open_regular(path: str | Path) -> tuple[BinaryIO, os.stat_result]:
    """Open a regular file for binary reading without ever blocking.

    Returns:
        The open file (the caller closes it) and its ``fstat``.

    Raises:
        UnsafeFileError: missing, unreadable, or not a regular file (FIFO, device, folder, socket).
    """
    try:
        before = os.stat(path)
    except OSError as exc:
        raise access_error(exc) from exc
    kind = describe_kind(before.st_mode)
    if kind is not None:
        raise UnsafeFileError(f"not a regular file: it is {kind}")
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    )
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise access_error(exc) from exc
    try:
        st = os.fstat(fd)
        kind = describe_kind(st.st_mode)
        if kind is not None:  # replaced between the stat and the open
            raise UnsafeFileError(f"not a regular file: it is {kind}")
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


class NotRegularOutputError(OSError):
    """An output path that names something other than a regular file; nothing was written.

    An :class:`OSError`, so every writer's "cannot be written" path reports it as it is.
    """

    def __init__(self, path: str | Path, kind: str) -> None:
        super().__init__(
            f"{path} is {kind}, not a regular file: outputs are only written to regular files "
            "(nothing was changed); choose a file name"
        )
        self.path = Path(path)
        self.kind = kind


def check_output(path: str | Path) -> None:
    """Refuse an output path that exists and is not a regular file (symlinks followed).

    A missing file (or a dangling symlink, which a rename replaces) is fine: it will be created.

    Raises:
        NotRegularOutputError: ``path`` is a FIFO, a device, a socket or a folder.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError:
        return  # a path through a file or an unreadable folder: the write itself reports it
    kind = describe_kind(st.st_mode)
    if kind is not None:
        raise NotRegularOutputError(path, kind)


def check_outputs(paths: Iterable[str | Path]) -> None:
    """:func:`check_output` for every file a command will write, before it starts any work.

    Raises:
        NotRegularOutputError: naming the first path that is not a regular file.
    """
    for path in paths:
        check_output(path)


def open_append(
    path: str | Path, encoding: str = "utf-8", errors: str = "strict", newline: str | None = None
) -> IO[str]:
    """Open (or create) a regular text file for appending, without ever blocking.

    Raises:
        NotRegularOutputError: ``path`` is not a regular file (checked before and after opening).
        OSError: it cannot be opened.
    """
    check_output(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    try:
        kind = describe_kind(os.fstat(fd).st_mode)
        if kind is not None:  # replaced between the check and the open
            raise NotRegularOutputError(path, kind)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, "a", newline=newline, encoding=encoding, errors=errors)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` bytes.

    Raises:
        UnsafeFileError: see :func:`open_regular`, or the file is larger than ``max_bytes``.
    """
    fh, st = open_regular(path)
    with fh:
        if st.st_size > max_bytes:
            raise UnsafeFileError(f"{what} of {st.st_size} bytes exceeds the limit of {max_bytes} bytes")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while being read
        raise UnsafeFileError(f"{what} exceeds the limit of {max_bytes} bytes")
    return data


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether ``path``, with every symlink resolved, lies in ``root`` (also resolved) or is it."""
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)
