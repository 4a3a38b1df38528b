"""Labels and manifest tables read as a stream, matched to the files of a folder in bounded memory.

A ``labels.csv`` or manifest is untrusted text: read whole, a 189 MB ``labels.csv`` cost 4.1 GB.
:func:`table_rows` reads it line by line (each line at most :data:`MAX_LINE` characters, the file
opened as a regular file that never blocks), and :class:`FileIndex` keeps only what matches the
listed files, so memory follows the folder, not the table. Names are decoded as the file system
gives them (``surrogateescape``), so a Latin-1 name in a table matches the file of that name.

A bare file name (no folder) is used only when it names one file of the folder; a name that
matches several is refused with the candidates, so a label never lands on the wrong image.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path

from engine.errors import SourceError
from engine.util.files import UnsafeFileError, open_regular

# Longest line of a labels or manifest table, in characters (a path and a label need a few hundred).
MAX_LINE = 1 << 16
PATH_COLUMNS = ("file", "filename", "path", "image", "name", "relpath")
LABEL_COLUMNS = ("label", "class", "ground_truth", "gt", "target", "y", "diagnosis")
_SHOWN = 5  # candidates or values named in a message


def find_column(header: Sequence[str], candidates: Sequence[str]) -> int | None:
    """Index of the first of ``candidates`` among ``header``'s names (any case), or None."""
    lowered = [h.strip().lower() for h in header]
    for name in candidates:
        if name in lowered:
            return lowered.index(name)
    return None


def _lines(fh: io.TextIOBase, path: Path, where: list[int]) -> Iterator[str]:
    """The lines of ``fh`` that hold data (not blank, not ``#`` comments); ``where[0]`` is the line number."""
    number = 0
    while True:
        line = fh.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        where[0] = number
        if len(line) > MAX_LINE:
            raise SourceError(f"{path}: line {number} is longer than {MAX_LINE} characters; not a table")
        if line.strip() and not line.lstrip().startswith("#"):
            yield line


def table_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, cells)`` of every data row of a CSV/TSV file, the header row first.

    The delimiter is a tab when the first data line holds one, else a comma.

    Raises:
        SourceError: the file cannot be opened as a regular file, or a line or field is too long.
    """
    try:
        raw, _ = open_regular(path)
    except UnsafeFileError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.reason})") from exc
    where = [0]
    with io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        lines = _lines(fh, path, where)
        first = next(lines, None)
        if first is None:
            return
        delimiter = "\t" if "\t" in first else ","
        try:
            for cells in csv.reader(_chain(first, lines), delimiter=delimiter):
                yield where[0], cells
        except csv.Error as exc:
            raise SourceError(f"{path}: line {where[0]} cannot be read as a table ({exc})") from exc


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


class FileIndex:
    """The files of a folder by path relative to it and by bare name, for matching table entries."""

    def __init__(self, rels: Sequence[str]) -> None:
        self.rels = set(rels)
        self.by_name: dict[str, list[str]] = {}
        for rel in rels:
            self.by_name.setdefault(rel.rsplit("/", 1)[-1], []).append(rel)

    def match(self, entry: str, origin: str) -> str | None:
        """The file an entry of a table names: its relative path, or its bare name when unique.

        Raises:
            SourceError: a bare name that names several files (the message lists them).
        """
        entry = entry.strip().replace("\\", "/").removeprefix("./")
        if entry in self.rels:
            return entry
        if "/" in entry:
            return None
        found = self.by_name.get(entry, [])
        if len(found) > 1:
            shown = ", ".join(found[:_SHOWN]) + (
                f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
            )
            raise SourceError(
                f"{origin}: {entry!r} names {len(found)} files ({shown}); write the path relative to the "
                "folder so the label goes to the right image"
            )
        return found[0] if found else None


def parse_label(value: str, classes: Sequence[str]) -> int | None:
    """A class index from a class name (any case) or an index; None when it is neither."""
    text = value.strip()
    folded = [c.casefold() for c in classes]
    if text.casefold() in folded:
        return folded.index(text.casefold())
    try:
        index = int(float(text))
    except (ValueError, OverflowError):
        return None
    return index if 0 <= index < len(classes) and str(index) == text.split(".")[0] else None


def read_labels(
    path: Path, index: FileIndex, classes: Sequence[str], origin: str
) -> tuple[dict[str, int], list[str]]:
    """The labels a table gives the folder's files: ``{relative path: class index}`` and notes.

    Args:
        path: the table (a labels CSV, or a manifest with a label column).
        index: the folder's files.
        classes: the model's classes (a label is a class name in any case, or an index).
        origin: the table's name in messages.

    Raises:
        SourceError: the table cannot be read, a bare name names several files, or two rows give
            one file different classes.
    """
    rows = table_rows(path)
    header_row = next(rows, None)
    if header_row is None:
        return {}, []
    header = [h.strip() for h in header_row[1]]
    path_col, label_col = find_column(header, PATH_COLUMNS), find_column(header, LABEL_COLUMNS)
    if path_col is None or label_col is None:
        return {}, []
    labels: dict[str, int] = {}
    first_line: dict[str, int] = {}
    unknown: set[str] = set()
    unknown_count = 0
    for line, cells in rows:
        if len(cells) <= max(path_col, label_col):
            continue
        rel = index.match(cells[path_col], f"{origin} line {line}")
        if rel is None:
            continue  # a file that is not in the folder: its label is not needed
        label = parse_label(cells[label_col], classes)
        if label is None:
            unknown_count += 1
            if len(unknown) < _SHOWN:
                unknown.add(cells[label_col].strip()[:100])
            continue
        if labels.get(rel, label) != label:
            raise SourceError(
                f"{origin} lines {first_line[rel]} and {line} give {rel} two different classes "
                f"({classes[labels[rel]]} and {classes[label]}); keep one"
            )
        labels[rel] = label
        first_line.setdefault(rel, line)
    notes = []
    if unknown_count:
        shown = ", ".join(sorted(unknown))
        notes.append(f"{origin}: {unknown_count} label value(s) are not model classes ({shown}); ignored")
    return labels, notes


def read_order(path: Path, index: FileIndex, origin: str) -> tuple[list[str], int]:
    """The folder's files in a manifest's order (each once) and how many entries named no file.

    A table without a path column is a plain list of files, one a line.

    Raises:
        SourceError: the manifest cannot be read, or a bare name names several files.
    """
    rows = table_rows(path)
    first = next(rows, None)
    if first is None:
        return [], 0
    col = find_column(first[1], PATH_COLUMNS)
    if col is None:  # no header: the first line is a file too
        col, rows = 0, _chain_rows(first, rows)
    ordered: list[str] = []
    seen: set[str] = set()
    missing = 0
    for line, cells in rows:
        if len(cells) <= col or not cells[col].strip():
            continue
        rel = index.match(cells[col], f"{origin} line {line}")
        if rel is None:
            missing += 1
        elif rel not in seen:
            seen.add(rel)
            ordered.append(rel)
    return ordered, missing


def _chain_rows(
    first: tuple[int, list[str]], rest: Iterator[tuple[int, list[str]]]
) -> Iterator[tuple[int, list[str]]]:
    yield first
    yield from rest
