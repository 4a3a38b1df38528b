"""Inputs identified by their content as well as their path: a file replaced at the same path is
another input.

A slide replaced at the same path was continued as the same source (28 tiles of one slide and 84
of another in one CSV), and a picture replaced between its decision and its map got the map of
the new picture (issue 42, items 6 and 12). A *content* fingerprint is cheap: the file's size, its
modification time and a hash of its first and last MiB (the whole of most pictures), plus what
the caller adds (a slide's properties and smallest level, as OpenSlide's ``quickhash-1``).

Two fingerprints describe the same content when their sizes and hashes agree; the modification
time only lets :func:`changed_since` skip the hash when nothing was touched (a file copied again
with the same bytes is the same input). Within one run, :func:`identity` (device, inode, size,
modification and change times) tells that the file at a path is no longer the one opened.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from PIL import Image

from engine.errors import ImageReadError
from engine.io.images import decode_opened, open_checked
from engine.util.files import UnsafeFileError, open_regular

#: Bytes hashed from each end of a file (the whole file when it is at most twice this).
CONTENT_BYTES = 1 << 20

Identity = tuple[int, int, int, int, int]


def fingerprint_fd(fd: int, st: os.stat_result, extra: Iterable[bytes] = ()) -> str:
    """The content fingerprint of the open file ``fd`` whose ``fstat`` is ``st`` (``extra``: more
    bytes that belong to its identity), as ``size:mtime_ns:hash``. Reads with ``pread``, so the
    file's position is left where it was."""
    digest = hashlib.blake2b(digest_size=16)
    size = st.st_size
    digest.update(os.pread(fd, min(size, CONTENT_BYTES), 0))
    if size > CONTENT_BYTES:
        tail = max(CONTENT_BYTES, size - CONTENT_BYTES)
        digest.update(os.pread(fd, size - tail, tail))
    for part in extra:
        digest.update(part)
    return f"{size}:{st.st_mtime_ns}:{digest.hexdigest()}"


def file_fingerprint(path: str | Path, extra: Iterable[bytes] = ()) -> str:
    """The content fingerprint of the regular file at ``path`` (see :func:`fingerprint_fd`).

    Raises:
        UnsafeFileError: the file cannot be opened, or is not a regular file.
    """
    fh, st = open_regular(path)
    with fh:
        return fingerprint_fd(fh.fileno(), st, extra)


def content_part(fingerprint: str) -> str:
    """``size:hash`` of a fingerprint: what must agree for two files to be the same input."""
    size, _, rest = fingerprint.partition(":")
    return f"{size}:{rest.partition(':')[2]}"


def same_content(a: str, b: str) -> bool:
    """Whether two fingerprints describe the same content (modification times aside)."""
    return content_part(a) == content_part(b)


def changed_since(recorded: str, path: str | Path) -> bool:
    """Whether the file at ``path`` no longer has the content ``recorded`` describes (gone or
    unreadable counts as changed). The hash is read again only when the size or modification
    time differs."""
    size, _, rest = recorded.partition(":")
    mtime = rest.partition(":")[0]
    try:
        st = os.stat(path)
    except OSError:
        return True
    if str(st.st_size) != size:
        return True
    if str(st.st_mtime_ns) == mtime:
        return False
    try:
        return not same_content(recorded, file_fingerprint(path))
    except UnsafeFileError:
        return True


def identity(st: os.stat_result) -> Identity:
    """What changes when the file at a path is replaced or rewritten: device, inode, size,
    modification and change times (the change time cannot be set back by anyone)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_image_content(path: str | Path) -> tuple[Image.Image, str]:
    """:func:`engine.io.images.read_image` and the content fingerprint of the file it read, both
    from the one file opened, so the fingerprint recorded with a decision is the picture's that was
    decided.

    Raises:
        ImageReadError: as ``read_image``; also (transient) when the file was rewritten while it
            was read.
    """
    path = Path(path)
    fh, st, fmt, img = open_checked(path)
    with fh:
        content = fingerprint_fd(fh.fileno(), st)
        image = decode_opened(path, fh, st, fmt, img)
        now = os.fstat(fh.fileno())
    if (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        reason = "the file changed while it was read (still being copied?)"
        raise ImageReadError(f"{path}: {reason}", reason=reason, transient=True)
    return image, content
