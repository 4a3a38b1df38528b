"""``f2tta run``'s CSV files, kept in step with the journal and never written over by mistake.

``--out preds.csv`` gets one row per processed image (:data:`engine.run.rows.CSV_COLUMNS`, the same
columns as the app's export), appended as they are made; ``preds.skipped.csv`` one row per image
that could not be read (``will_retry`` 1 for a transient failure, which the next run tries again).
Both are views of the journal: on every start they are rewritten from its rows (atomically), so
rows made after the last saved state disappear with it and every image is in the CSV once.

An existing ``--out`` is only rewritten when the journal says it wrote that file for this input
and the file still reads back as it was written (a byte-order mark or a spreadsheet's re-quoting
is fine; renamed columns or edited rows are not). Anything else is refused before a byte changes.

Every other file the run writes beside ``--out`` (:func:`run_files`: ``.skipped.csv``,
``.config.json`` and, with ``--reviews``, ``.certified.csv`` and ``.certificates.json``) is owned
the same way, by one check before any work: each must be a regular file or missing, and one that
holds data must be recorded in the journal as written for this input (:func:`check_companions`).
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from engine.io.sources import same_place_other_slide
from engine.run.journal import Journal
from engine.run.rows import (
    CSV_COLUMNS,
    CSV_ERRORS,
    LEGACY_CSV_HEADERS,
    OutputError,
    PredictionRow,
    csv_cells,
    csv_text,
    escape_cell,
    read_csv_records,
    unescape_cell,
)
from engine.util.atomic import atomic_write_bytes
from engine.util.files import NotRegularOutputError, check_output, open_append

SKIP_COLUMNS = ("item", "reason", "will_retry")


def skipped_path(out_csv: Path) -> Path:
    """``preds.csv`` -> ``preds.skipped.csv``."""
    return out_csv.with_name(out_csv.stem + ".skipped" + out_csv.suffix)


def _whole(text: str) -> int | None:
    """An index cell as a number, also as a spreadsheet may rewrite it (``"12.0"``)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def has_content(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def geojson_path(out_csv: Path) -> Path:
    """``preds.csv`` -> ``preds.geojson``: a slide's tiles for QuPath (:mod:`engine.run.geojson`)."""
    return out_csv.with_suffix(".geojson")


def config_path(out_csv: Path) -> Path:
    """``preds.csv`` -> ``preds.config.json``: the run's configuration, beside its predictions."""
    return out_csv.with_suffix(".config.json")


def certified_paths(out_csv: Path) -> tuple[Path, Path]:
    """``preds.csv`` -> ``preds.certified.csv`` and ``preds.certificates.json`` (``--reviews``)."""
    stem = out_csv.with_suffix("")
    return Path(f"{stem}.certified.csv"), Path(f"{stem}.certificates.json")


def run_files(out_csv: Path, reviews: bool = False, slide: bool = False) -> tuple[Path, ...]:
    """Every file ``f2tta run --out out_csv`` writes, the predictions first.

    Args:
        reviews: the run writes review certificates (its certified decisions and certificates too).
        slide: the input is a slide (its tiles as GeoJSON too).
    """
    files: tuple[Path, ...] = (out_csv, skipped_path(out_csv), config_path(out_csv))
    files += certified_paths(out_csv) if reviews else ()
    return files + ((geojson_path(out_csv),) if slide else ())


def check_out_before_journal(files: Sequence[Path], state_dir: Path) -> None:
    """Refuse at once when an output is not a regular file, or when one holds data but
    ``state_dir`` holds no journal that could have written it.

    Called before the journal directory is created, so a mistyped ``--state`` or an output
    naming a device (``/dev/full``) or a FIFO changes nothing.

    Args:
        files: every file the run writes (:func:`run_files`).

    Raises:
        OutputError: a file would be overwritten, or is not a regular file.
    """
    for path in files:
        try:
            check_output(path)
        except NotRegularOutputError as exc:
            raise OutputError(str(exc)) from exc
    if not (state_dir / "journal.json").exists():
        for path in files:
            if has_content(path):
                raise OutputError(foreign_message(path, state_dir))


def foreign_message(path: Path, state_dir: Path) -> str:
    return (
        f"{path} exists and was not written with the state {state_dir} (a mistyped --state, or "
        "another person's file?); nothing was changed. Pass the --state it was written with, choose "
        "another --out, or move the file away to start afresh"
    )


def check_companions(journal: Journal, source_id: str, out_csv: Path, companions: Sequence[Path]) -> None:
    """Refuse a file beside ``out_csv`` that holds data this journal did not write for ``source_id``.

    A journal from before companions were recorded owns only ``out_csv``: when it owns that for
    this input and records none of its companions, the companions are taken as its own.

    Raises:
        OutputError: naming the first such file; nothing was changed.
    """
    recorded = [journal.output_owner(p) for p in run_files(out_csv, reviews=True, slide=True)[1:]]
    legacy = journal.output_owner(out_csv) == source_id and not any(recorded)
    for path in companions:
        owner = journal.output_owner(path)
        if not has_content(path) or owner == source_id or (owner is None and legacy):
            continue
        if owner is None:
            raise OutputError(foreign_message(path, journal.directory))
        raise OutputError(other_input_message(path, owner, source_id))


def other_input_message(path: Path, owner: str, source_id: str) -> str:
    """Why ``path``, which this journal wrote for the input ``owner``, is not written for ``source_id``."""
    if same_place_other_slide(owner, source_id):
        return (
            f"{path} holds the outputs of the slide that was at this path when the state processed it; "
            "the file there now is another slide (replaced), a new input whose tiles are never mixed "
            "with the earlier one's. Nothing was changed: choose another --out (and --state) for it, or "
            "put the earlier slide back to continue it"
        )
    return f"{path} holds the outputs of another input ({owner}); nothing was changed. Choose another --out for this input"


class CsvOutputs:
    """The predictions and skipped-images CSVs of one source of a journal.

    Args:
        out_csv: the predictions CSV (``--out``).
        journal: the open journal (its state already restored).
        source_id: the input whose rows the CSV holds.
        rows: the journal's rows of that source (:meth:`Journal.rows`).
        companions: the other files the run writes (:func:`run_files` after the first), checked
            and recorded as this input's with ``out_csv``.

    Raises:
        OutputError: ``out_csv`` or a companion belongs to something else, or ``out_csv`` was
            changed; nothing is written.
        OSError: the files cannot be written.
    """

    def __init__(
        self,
        out_csv: Path,
        journal: Journal,
        source_id: str,
        rows: list[PredictionRow],
        companions: Sequence[Path] = (),
    ) -> None:
        self.path = out_csv
        self.skip_path = skipped_path(out_csv)
        if has_content(out_csv):
            self._check_ours(journal, source_id, rows)
        check_companions(journal, source_id, out_csv, companions)
        for path in (out_csv, *companions):
            journal.claim_output(path, source_id)
        record = journal.source(source_id)
        text = csv_text(CSV_COLUMNS, (csv_cells(r) for r in rows))
        atomic_write_bytes(out_csv, text.encode("utf-8", errors=CSV_ERRORS))
        skips = csv_text(SKIP_COLUMNS, ([escape_cell(k), escape_cell(r), "0"] for k, r in record.skipped))
        atomic_write_bytes(self.skip_path, skips.encode("utf-8", errors=CSV_ERRORS))
        self._rows = self._open(out_csv)
        self._skips = self._open(self.skip_path)

    def _check_ours(self, journal: Journal, source_id: str, rows: list[PredictionRow]) -> None:
        owner = journal.output_owner(self.path)
        if owner is None:
            raise OutputError(foreign_message(self.path, journal.directory))
        if owner != source_id:
            raise OutputError(other_input_message(self.path, owner, source_id))
        # The file may lag behind the journal (the app continued it) or run ahead of the saved state
        # (rows made after the last save): what it holds must agree with the journal's rows.
        records = read_csv_records(self.path, CSV_COLUMNS, legacy=LEGACY_CSV_HEADERS, limit=len(rows))
        written = [(_whole(r["index"]), unescape_cell(r["item"])) for r in records[: len(rows)]]
        expected = [(r.index, r.name) for r in rows[: len(written)]]
        if written != expected:
            raise OutputError(
                f"{self.path}: its rows are not the ones the state {journal.directory} saved (the file was "
                "edited or replaced); nothing was changed. Move it away and run again to write it afresh"
            )

    @staticmethod
    def _open(path: Path) -> IO[str]:
        return open_append(path, encoding="utf-8", errors=CSV_ERRORS, newline="")

    def rewrite(self, rows: list[PredictionRow]) -> None:
        """Write the CSV afresh from the journal's ``rows`` (atomically): the maps made behind the
        decisions reach it (their rows were appended while the maps were pending)."""
        text = csv_text(CSV_COLUMNS, (csv_cells(r) for r in rows))
        self._rows.close()
        atomic_write_bytes(self.path, text.encode("utf-8", errors=CSV_ERRORS))
        self._rows = self._open(self.path)

    def add_row(self, row: PredictionRow) -> None:
        csv.writer(self._rows, lineterminator="\n").writerow(csv_cells(row))
        self._rows.flush()

    def add_skip(self, name: str, reason: str, will_retry: bool) -> None:
        cells = [escape_cell(name), escape_cell(reason), str(int(will_retry))]
        csv.writer(self._skips, lineterminator="\n").writerow(cells)
        self._skips.flush()

    def sync(self) -> None:
        for fh in (self._rows, self._skips):
            fh.flush()
            os.fsync(fh.fileno())

    def close(self) -> None:
        for fh in (self._rows, self._skips):
            with contextlib.suppress(OSError):
                fh.close()
