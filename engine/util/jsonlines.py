"""An append-only JSON-lines file in which the last record of a key wins: the one keyed store.

The journal's rows (``engine.run.journal``) and a profile's review marks and overlays
(``app.core.reviews``) are such files: a record is appended and flushed as soon as it is made
(fsync'ed when it must survive a crash at once, or at the journal's next save), a line cut short
by a crash is skipped when the file is read, and the reader rewrites the file atomically with one
line per kept key when it holds more. Reading opens the file as a regular file that never blocks
(a FIFO in a tampered folder cannot hang it).

The file is read as a stream, a line at a time: memory holds the records kept, never the file
(60 MB of junk in a marks or rows file cost 1.4 GB read whole, and minutes measuring the nesting
of each junk line). A line too long is skipped without being held, a line that is not JSON fails
in the C parser before any nesting is measured, and the lines skipped are counted and said in
one warning naming the file. A file larger than the store's ``max_bytes`` is refused before it
is read (:data:`MAX_FILE_BYTES` unless the owner says otherwise: a project's marks are a few
hundred bytes a review), with a message saying so; the file is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from engine.util.atomic import atomic_write_bytes
from engine.util.files import UnsafeFileError, open_append, open_regular

ENCODING, ERRORS = "utf-8", "surrogateescape"
MAX_LINE_CHARS = 1 << 20  # a record is a few kB (a row, a mark, an overlay)
MAX_LINE_DEPTH = 32  # a record nests a few levels; a line of 200 000 "[" must not reach json.loads
#: Largest file a store reads unless its owner gives another bound: 16 MiB is some 100 000 review
#: marks of ~150 bytes. None: no bound (the journal's rows and the overlays grow with the images
#: of a source, a few hundred bytes to a few kB each, and are read off the GUI thread).
MAX_FILE_BYTES = 16 << 20
_SKIP_CHUNK = 1 << 16  # the rest of a line too long is read past in pieces of this size

logger = logging.getLogger(__name__)


def _lines(fh: BinaryIO) -> Iterator[bytes | None]:
    """The lines of ``fh`` one at a time, None for a line longer than :data:`MAX_LINE_CHARS` bytes
    (read past in pieces, never held)."""
    while line := fh.readline(MAX_LINE_CHARS + 1):
        if len(line) <= MAX_LINE_CHARS or line.endswith(b"\n"):
            yield line
            continue
        while (rest := fh.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
            pass
        yield None


def _parsed(line: bytes) -> dict[str, Any] | None:
    """The JSON object of a line, or None when it is not one a record may be: not JSON, not an
    object, or nested deeper than :data:`MAX_LINE_DEPTH` (a line of 200 000 "[" made ``json.loads``
    recurse until it raised RecursionError, which stopped whoever read the file: it is caught, and
    junk fails in the C parser before any nesting is measured)."""
    if not line.lstrip().startswith(b"{"):  # what is not an object is not parsed at all
        return None
    text = line.decode(ENCODING, errors=ERRORS)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if text.count("[") + text.count("{") > MAX_LINE_DEPTH and _depth(value) > MAX_LINE_DEPTH:
        return None
    return value


def _depth(value: Any) -> int:
    """The nesting of arrays and objects in a parsed JSON value (as its text has it), counted up to
    one level past :data:`MAX_LINE_DEPTH`."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_LINE_DEPTH:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


class KeyedJsonLines:
    """One keyed JSON-lines file.

    Args:
        path: the file (created with its folder on the first append).
        key: the field of each record that holds its key.
    """

    def __init__(self, path: Path, key: str, max_bytes: int | None = MAX_FILE_BYTES) -> None:
        self.path = path
        self.key = key
        self.max_bytes = max_bytes
        #: Lines of the last :meth:`read` that were not records (said in a warning).
        self.skipped = 0
        self._fh: IO[str] | None = None

    def read(self) -> tuple[dict[str, dict[str, Any]], int]:
        """The last record of each key, in the order of each key's last line, and the file's line count.

        Lines that are not JSON objects with the key field (a line cut short by a crash), and
        lines too long or too deeply nested to be a record (:func:`_bounded`), are skipped; more
        than a last line cut short is said in a warning naming the file. A missing file reads as
        empty.

        Raises:
            UnsafeFileError: the path is not a regular file (:func:`engine.util.files.open_regular`),
                or it is larger than :attr:`max_bytes` (not read).
            OSError: it cannot be read.
        """
        self.close()
        self.skipped = 0
        if not os.path.lexists(self.path):
            return {}, 0
        fh, st = open_regular(self.path)
        found: dict[str, dict[str, Any]] = {}
        count = 0
        torn = False  # the last line skipped had no line end (a crash cut it short)
        with fh:
            if self.max_bytes is not None and st.st_size > self.max_bytes:
                raise UnsafeFileError(
                    f"{st.st_size / 2**20:.0f} MiB, larger than such a file grows ({self.max_bytes / 2**20:.0f} "
                    "MiB at most); it was not read (damaged, or not written by f2tta?) and is left as it is"
                )
            for line in _lines(fh):
                count += 1
                record = None if line is None else _parsed(line)
                if record is None or self.key not in record:
                    self.skipped += 1
                    torn = line is not None and not line.endswith(b"\n")
                    continue
                torn = False
                key = str(record[self.key])
                found.pop(key, None)
                found[key] = record
        if self.skipped > int(torn):
            logger.warning(
                "%s: %d of its %d lines are not records (damaged, or not written by f2tta); they were "
                "not used",
                self.path,
                self.skipped,
                count,
            )
        return found, count

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the file atomically with ``records``, one line each.

        Raises:
            OSError: it cannot be written (the old file is untouched).
        """
        self.close()
        text = "".join(json.dumps(r) + "\n" for r in records)
        atomic_write_bytes(self.path, text.encode(ENCODING, errors=ERRORS))

    def append(self, record: dict[str, Any], durable: bool = False) -> None:
        """Append one record, flushed (``durable``: also fsync'ed).

        Raises:
            OSError: it cannot be written (``NotRegularOutputError`` when the path is not a regular file).
        """
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open_append(self.path, encoding=ENCODING, errors=ERRORS)
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        if durable:
            os.fsync(self._fh.fileno())

    def sync(self) -> None:
        """Make every record appended so far durable.

        Raises:
            OSError: it cannot be.
        """
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None
