"""Atomic file replacement: temp file + fsync + rename, keeping the previous copy as a backup."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from engine.util.files import check_output

BACKUP_SUFFIX = ".backup"


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _fsync_dir(directory: Path) -> None:
    # Directory fsync makes the rename itself durable; not available on every platform (Windows).
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes, keep_backup: bool = False) -> None:
    """Replace ``path`` with ``data`` so that readers see either the old or the new file, never a mix.

    Args:
        path: destination file.
        data: the complete new content.
        keep_backup: hard-link (or copy) the current file to ``path + '.backup'`` first, so the
            previous good copy survives even if the new one later turns out to be bad.

    Raises:
        NotRegularOutputError: ``path`` names a FIFO, a device, a socket or a folder (checked
            before anything is created: the rename would replace it by a regular file).
        OSError: the directory is read-only, full, ...; the existing file is left untouched.
    """
    path = Path(path)
    check_output(path)
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        # mkstemp creates 0600 files; keep the mode of the file we replace, else the usual 0644.
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            mode = 0o644
        with contextlib.suppress(OSError, AttributeError):  # no fchmod on Windows
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if keep_backup and path.exists():
            _replace_backup(path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)


def _replace_backup(path: Path) -> None:
    """Make ``path.backup`` a copy of ``path`` atomically (the current file stays in place)."""
    backup = backup_path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{backup.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()
        try:
            os.link(path, tmp)
        except OSError:  # file systems without hard links
            tmp.write_bytes(path.read_bytes())
        os.replace(tmp, backup)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
