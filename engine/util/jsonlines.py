"""An append-only JSON-lines file in which the last record of a key wins: the one keyed store.

The journal's rows (``engine.run.journal``) and a profile's review marks and overlays
(``app.core.reviews``) are such files: a record is appended and flushed as soon as it is made
(fsync'ed when it must survive a crash at once, or at the journal's next save), a line cut short
by a crash is skipped when the file is read, and the reader rewrites the file atomically with one
line per kept key when it holds more. Reading opens the file as a regular file that never blocks
(a FIFO in a tampered folder cannot hang it).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import nesting_depth
from engine.util.files import open_append, open_regular

ENCODING, ERRORS = "utf-8", "surrogateescape"
MAX_LINE_CHARS = 1 << 20  # a record is a few kB (a row, a mark, an overlay)
MAX_LINE_DEPTH = 32  # a record nests a few levels; a line of 200 000 "[" must not reach json.loads


def _bounded(line: str) -> bool:
    """A line a record may be: not longer than :data:`MAX_LINE_CHARS`, not nested deeper than
    :data:`MAX_LINE_DEPTH` (``json.loads`` recurses once per level: a deep line raised
    RecursionError and stopped whoever read the file). Lines that are not are skipped, as a line
    cut short by a crash is."""
    if len(line) > MAX_LINE_CHARS:
        return False
    if line.count("[") + line.count("{") <= MAX_LINE_DEPTH:  # cannot be deeper: no full count needed
        return True
    return nesting_depth(line.encode(ENCODING, errors=ERRORS)) <= MAX_LINE_DEPTH


class KeyedJsonLines:
    """One keyed JSON-lines file.

    Args:
        path: the file (created with its folder on the first append).
        key: the field of each record that holds its key.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        self._fh: IO[str] | None = None

    def read(self) -> tuple[dict[str, dict[str, Any]], int]:
        """The last record of each key, in the order of each key's last line, and the file's line count.

        Lines that are not JSON objects with the key field (a line cut short by a crash), and
        lines too long or too deeply nested to be a record (:func:`_bounded`), are skipped. A
        missing file reads as empty.

        Raises:
            UnsafeFileError: the path is not a regular file (:func:`engine.util.files.open_regular`).
            OSError: it cannot be read.
        """
        self.close()
        if not os.path.lexists(self.path):
            return {}, 0
        fh, _ = open_regular(self.path)
        with fh:
            lines = fh.read().decode(ENCODING, errors=ERRORS).splitlines()
        found: dict[str, dict[str, Any]] = {}
        for line in lines:
            if not _bounded(line):
                continue
            try:
                record = json.loads(line)
                key = str(record[self.key])
            except (ValueError, TypeError, KeyError):
                continue
            found.pop(key, None)
            found[key] = record
        return found, len(lines)

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
