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
from engine.util.files import open_append, open_regular

ENCODING, ERRORS = "utf-8", "surrogateescape"


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

        Lines that are not JSON objects with the key field (a line cut short by a crash) are
        skipped. A missing file reads as empty.

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
