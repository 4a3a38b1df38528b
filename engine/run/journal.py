"""One resume format for every consumer of the stream loop: rows first, state second, cut back on load.

A journal is a directory; ``f2tta run --state DIR`` uses one, and so does every site profile of
the desktop app (``<profile>/state``), so a state written by either opens in the other::

    state.safetensors (+ .backup), state.json   the engine's state (:mod:`engine.run.state`); its
                                                ``extra`` is the journal record: per source, the
                                                processed item keys in arrival order and the
                                                items skipped for good, with the reason
    rows/<source hash>.jsonl                    one :class:`~engine.run.rows.PredictionRow` per line
    journal.json                                the format, and the output files it owns
    lock                                        held while a process uses the journal

Crash consistency: each row is appended (and flushed to the OS) as soon as it is made. A save
first fsyncs the rows files and the outputs (:class:`JournalOutput`), then writes the state
atomically; so the rows always cover what the state lists. On opening, rows whose key the state
does not list were written after the last save: they are dropped (and the files compacted), and
their images are processed again, with the state as it was after the last saved image. Nothing is
lost and nothing is counted twice.

Opening a journal takes its lock (a second process is refused, told who holds it), checks that
the directory is writable, and removes temporary files left by a killed writer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from engine.errors import StateError
from engine.io.arrival import ORDERS
from engine.io.sources import FolderSource, open_folder, source_hash
from engine.run.lock import DirectoryLock
from engine.run.record import JOURNAL_FORMAT, SourceRecord, parse_record, record_extra
from engine.run.rows import MAP_PENDING, PredictionRow, without_map, without_prompted
from engine.run.session import Session
from engine.run.state import STATE_FILE
from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import loads_bounded
from engine.util.files import UnsafeFileError, read_regular
from engine.util.jsonlines import KeyedJsonLines

logger = logging.getLogger(__name__)

JOURNAL_FILE = "journal.json"
ROWS_DIR = "rows"
_TEMP_FILE = re.compile(r"^\..+\.tmp$")  # what engine.util.atomic leaves when it is killed mid-write
_SPACE_MARGIN = 2  # free space wanted: this many states
_MAX_META_BYTES = 1 << 24  # journal.json: the format and the outputs it owns
# A fresh state grows as the method fills its banks and memories: the default method's state on
# the demo model went from 1.63 to 5.65 MB in 21 images, then by 0.3 kB an image (x 3.5).
STATE_GROWTH = 4


class JournalOutput(Protocol):
    """A file the journal keeps in step with its rows (``f2tta run --out``)."""

    def sync(self) -> None:
        """Make everything written so far durable (called before the state is saved)."""


class Journal:
    """An open journal directory (created when missing); holds its lock until :meth:`close`.

    Args:
        directory: the journal directory.
        command: what this process is doing, shown to a second process that finds it locked.

    Raises:
        StateError: the directory cannot be created or written, or another process uses it
            (:class:`~engine.run.lock.LockedError`, naming that process); the message says which.
    """

    def __init__(self, directory: str | Path, command: str = "f2tta") -> None:
        self.directory = Path(directory)
        _check_writable(self.directory)
        self._lock = DirectoryLock(self.directory, command)
        self.record: dict[str, SourceRecord] = {}
        self.outputs: list[JournalOutput] = []
        self._files: dict[str, KeyedJsonLines] = {}
        try:
            self._remove_orphans()
            self._meta = self._read_meta()
        except BaseException:
            self._lock.close()
            raise

    # -- opening ---------------------------------------------------------------------------------
    def _remove_orphans(self) -> None:
        """Temporary files of writers killed mid-write; only ours could be writing here (the lock)."""
        for folder in (self.directory, self.directory / ROWS_DIR):
            with contextlib.suppress(OSError):
                for entry in folder.iterdir():
                    if _TEMP_FILE.match(entry.name) and entry.is_file():
                        logger.info("removing %s, left by an interrupted save", entry)
                        entry.unlink()

    def _read_meta(self) -> dict[str, Any]:
        path = self.directory / JOURNAL_FILE
        if not os.path.lexists(path):
            return {"format": JOURNAL_FORMAT, "outputs": {}}
        try:
            data = loads_bounded(
                read_regular(path, _MAX_META_BYTES, "journal description"),
                max_bytes=_MAX_META_BYTES,
                max_depth=8,
            )
        except UnsafeFileError as exc:
            raise StateError(f"{path}: cannot be read ({exc.reason})") from exc
        except ValueError as exc:
            raise StateError(f"{path}: cannot be read ({exc})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("outputs", {}), dict):
            raise StateError(f"{self.directory / JOURNAL_FILE}: not a journal description")
        data.setdefault("outputs", {})
        return data

    @property
    def has_state(self) -> bool:
        return (self.directory / STATE_FILE).exists()

    def restore(self, session: Session, keep_saved_settings: bool = False) -> bool:
        """Load the saved state into ``session`` and read the record; False when there is none.

        Raises:
            StateError: the state is damaged, foreign, or was saved with other settings
                (:class:`~engine.run.step.SettingsMismatchError`); ``session`` is unchanged.
        """
        if not self.has_state:
            self.record = {}
            return False
        extra = session.load(self.directory, keep_saved_settings=keep_saved_settings)
        self.record = parse_record(extra, str(self.directory))
        return True

    def check_space(self, session: Session) -> None:
        """Refuse to start when the disk cannot take two more copies of the state it will grow to.

        The state is expected to grow to :data:`STATE_GROWTH` times its size before any image, or
        to stay at its saved size when that is larger; every save checks again with the exact size
        (:func:`engine.run.state.write_state`).

        Raises:
            StateError: too little free space (the message gives both figures).
        """
        size = STATE_GROWTH * sum(
            t.numel() * t.element_size() for t in session.method.state_tensors().values()
        )
        with contextlib.suppress(OSError):
            size = max(size, (self.directory / STATE_FILE).stat().st_size)
        need = _SPACE_MARGIN * size + 2**20
        free = shutil.disk_usage(self.directory).free
        if free < need:
            raise StateError(
                f"{self.directory}: {free / 2**20:.1f} MiB free, the state needs {need / 2**20:.1f} MiB "
                "(two copies while it is replaced); free some space or choose another directory"
            )

    # -- per source ------------------------------------------------------------------------------
    def source(self, source_id: str) -> SourceRecord:
        return self.record.setdefault(source_id, SourceRecord())

    def arrival(self, source_id: str) -> tuple[str, int] | None:
        """The arrival order and seed a source was last run in (None: never, or not recorded)."""
        record = self.record.get(source_id)
        return None if record is None else record.arrival

    def note_arrival(self, source_id: str, order: str, seed: int) -> None:
        """Record the arrival order a source runs in (saved with the next state)."""
        if order not in ORDERS:
            raise ValueError(f"unknown arrival order {order!r}")
        self.source(source_id).arrival = (order, int(seed))

    def rows_file(self, source_id: str) -> Path:
        return self.directory / ROWS_DIR / f"{source_hash(source_id)}.jsonl"

    def rows(self, source_id: str) -> list[PredictionRow]:
        """The rows of the processed items of a source (last copy of each), in arrival order.

        Lines that are not kept (rows written after the last save, older copies, a line cut short
        by a crash) are dropped from the file, so it holds one line per processed item.
        """
        store = self._rows_store(source_id)
        path = store.path
        keys = set(self.source(source_id).processed)
        try:
            records, lines = store.read()  # a FIFO or /dev/zero in a tampered journal never blocks it
        except UnsafeFileError as exc:
            raise StateError(f"{path}: cannot be read ({exc.reason})") from exc
        except OSError as exc:
            raise StateError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        found: dict[str, PredictionRow] = {}
        pending = set(self.source(source_id).pending_maps())
        unprompted = set(self.source(source_id).pending_prompts())
        refused = ""  # why the first row that was not read back was refused
        for key, record in records.items():
            if key not in keys:
                continue
            try:
                found[key] = PredictionRow.from_json(record)
            except (ValueError, TypeError, KeyError) as exc:
                refused = refused or str(exc)
                continue
            row = found[key]
            if key in pending and row.map_status != MAP_PENDING:  # a map made after the last save
                found[key] = without_map(row, prompt_step=key in unprompted)
                lines += 1  # the file is rewritten with the row as the state has it
            elif key in unprompted and row.prompted_status != MAP_PENDING:  # a prompt step since
                found[key] = without_prompted(row)
                lines += 1
            elif key not in unprompted and row.prompted_status == MAP_PENDING:  # a file changed by hand:
                found[key] = dataclasses.replace(row, prompted_status="")  # none will come to wait for
                lines += 1
        missing = len(keys) - len(found)
        if missing:
            raise StateError(
                f"{path}: {missing} processed image(s) have no row; the journal was changed by hand "
                "or its rows file was removed" + (f" (a row was refused: {refused})" if refused else "")
            )
        kept = sorted(found.values(), key=lambda r: r.index)
        if len(kept) < lines:
            store.rewrite(r.to_json() for r in kept)
        return kept

    def add_row(self, source_id: str, row: PredictionRow) -> None:
        """Append ``row`` (durable at the next :meth:`save`); the item counts once the state is saved.
        A row whose map is pending waits for :meth:`add_map`."""
        self._rows_store(source_id).append(row.to_json())
        self.source(source_id).add_processed(
            row.key, mapped=row.map_status != MAP_PENDING, prompted=row.prompted_status != MAP_PENDING
        )

    def add_map(self, source_id: str, row: PredictionRow, unreadable: str | None = None) -> None:
        """Append the row of the next item waiting for its map, now with its map (``unreadable``:
        why its image gave none, the row then says :data:`MAP_UNREADABLE`); the last copy of a row
        is the one read back."""
        self.source(source_id).add_mapped(row.key, unreadable)
        self._rows_store(source_id).append(row.to_json())

    def add_prompted(self, source_id: str, row: PredictionRow, unreadable: str | None = None) -> None:
        """Append the row of the next item waiting for its prompt step, now with its prompted
        decision (``unreadable``: why its image gave none); the last copy of a row is the one read back."""
        self.source(source_id).add_prompted(row.key, unreadable)
        self._rows_store(source_id).append(row.to_json())

    def add_skip(self, source_id: str, key: str, reason: str) -> None:
        """Record that an item cannot be read, for good (it is not offered again)."""
        self.source(source_id).skipped.append((key, reason))

    # -- outputs ---------------------------------------------------------------------------------
    def output_owner(self, path: Path) -> str | None:
        """The source whose rows ``path`` holds, if this journal wrote it; else None."""
        owner = self._meta["outputs"].get(str(path.resolve()))
        return None if owner is None else str(owner)

    def claim_output(self, path: Path, source_id: str) -> None:
        """Record that ``path`` holds this journal's rows of ``source_id`` (before it is written)."""
        outputs = self._meta["outputs"]
        if outputs.get(str(path.resolve())) != source_id:
            outputs[str(path.resolve())] = source_id
            self._write_meta()

    def _write_meta(self) -> None:
        text = json.dumps(self._meta, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(self.directory / JOURNAL_FILE, text.encode("utf-8", errors="surrogateescape"))

    # -- saving ----------------------------------------------------------------------------------
    def to_extra(self) -> dict[str, Any]:
        return record_extra(self.record)

    def save(self, session: Session) -> None:
        """Rows and outputs to disk first, then the state (atomically, the previous one kept).

        Raises:
            OSError, StateError: something cannot be written; the previous state is untouched.
        """
        for store in self._files.values():
            store.sync()
        for output in self.outputs:
            output.sync()
        if not (self.directory / JOURNAL_FILE).exists():
            self._write_meta()
        session.save(self.directory, extra=self.to_extra())

    def clear(self) -> None:
        """Forget the state, the rows and the record (back to the source model)."""
        self._close_files()
        shutil.rmtree(self.directory / ROWS_DIR, ignore_errors=True)
        for name in (STATE_FILE, STATE_FILE + ".backup", "state.json"):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
        self.record = {}

    def _rows_store(self, source_id: str) -> KeyedJsonLines:
        store = self._files.get(source_id)
        if store is None:
            # Rows grow with the source's images (a slide: up to MAX_TILES): streamed, not bounded.
            store = KeyedJsonLines(self.rows_file(source_id), key="key", max_bytes=None)
            self._files[source_id] = store
        return store

    def _close_files(self) -> None:
        for store in self._files.values():
            store.close()
        self._files.clear()

    def close(self) -> None:
        """Close the rows files and release the lock (unsaved rows are dropped at the next open)."""
        self._close_files()
        self._lock.close()


def _check_writable(directory: Path) -> None:
    """Create ``directory`` and prove a file can be written there, before any work is done."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise StateError(f"{directory}: exists and is not a directory") from exc
    except OSError as exc:
        raise StateError(f"{directory}: cannot be created ({exc.strerror or exc})") from exc
    if not directory.is_dir():
        raise StateError(f"{directory}: exists and is not a directory")
    try:
        with tempfile.TemporaryFile(dir=directory) as fh:
            fh.write(b"f2tta")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise StateError(f"{directory}: cannot be written ({exc.strerror or exc})") from exc


def in_recorded_order(
    folder: FolderSource,
    journal: Journal,
    classes: Sequence[str],
    manifest: Path | None = None,
    seed: int | None = None,
) -> FolderSource:
    """``folder`` in the arrival order ``journal`` says it was begun in, so a folder continued
    later keeps its positions and the stream the method saw stays one stream (``f2tta run``
    without ``--order``, the app on reopening a folder). ``seed`` replaces the recorded seed.
    ``folder`` itself when nothing is recorded or its order is already that one."""
    recorded = journal.arrival(folder.source_id)
    if recorded is None:
        return folder
    order, recorded_seed = recorded
    seed = recorded_seed if seed is None else seed
    if (order, seed) == (folder.order, folder.seed):
        return folder
    logger.info(
        "%s continues in the arrival order it was begun in (%s, seed %d)", folder.root.name, order, seed
    )
    return open_folder(folder.root, classes, order, manifest, seed=seed)
