"""Report files replaced as one set, or not at all (Qt-free).

An export writes several files into one folder (``predictions.csv``, ``run_config.json``,
``report.pdf``, and ``reviews.csv`` or ``tiles.geojson`` when they apply). Each is *staged* first
(``.<name>.export.tmp``, written and fsync'ed: a full disk fails here, before anything is
replaced), the PDF is checked to be complete, and only then is the set *committed*: a marker
(``.f2tta-export.json``) records the files about to be renamed into place and the report files
of an earlier export that this one does not replace (removed, so no old ``tiles.geojson`` stays
beside a folder's new reports); the renames follow and the marker goes.

A process killed before the marker leaves the old set whole (and staged files, removed by the
next export); killed after it, the marker says how to finish, and :func:`recover` (run by every
export before it writes) completes the new set. Destinations must be regular files or absent
(:func:`app._engine.check_output`): a FIFO named ``report.pdf`` is refused, not replaced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from app._engine import JsonFileError, atomic_write_bytes, check_output, read_json_file

logger = logging.getLogger(__name__)

MARKER = ".f2tta-export.json"
MARKER_FORMAT = "f2tta-export/1"
# Staged reports, and the marker's own temp file (engine.util.atomic) when a kill cut its write short.
_STAGED = re.compile(r"^\..+\.export\.tmp$|^\." + re.escape(MARKER) + r"\..+\.tmp$")


class BrokenReportError(OSError):
    """A report came out incomplete (no PDF reader would open it); nothing was replaced."""


def check_pdf(data: bytes) -> None:
    """Refuse a PDF that is not complete: its header, its end marker, and a cross-reference where
    ``startxref`` says (a PDF cut short by a full disk, 53 kB without an end marker, was announced
    as written before).

    Raises:
        BrokenReportError: naming what is missing.
    """
    if not data.startswith(b"%PDF-"):
        raise BrokenReportError("the PDF written is not a PDF (no %PDF- header)")
    end = re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data[-2048:])
    if end is None:
        raise BrokenReportError(f"the PDF written is incomplete ({len(data)} bytes, no end marker)")
    offset = int(end.group(1))
    if not (
        data[offset : offset + 4] == b"xref" or re.match(rb"\d+\s+\d+\s+obj", data[offset : offset + 40])
    ):
        raise BrokenReportError("the PDF written is damaged (its cross-reference table is not where it says)")


def staged_path(directory: Path, name: str) -> Path:
    return directory / f".{name}.export.tmp"


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not possible everywhere (Windows)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def prepare(directory: Path, names: Iterable[str]) -> None:
    """Make ``directory`` ready for an export: finish or clear an interrupted one, check every destination.

    Raises:
        OSError: the folder cannot be made, or a destination is not a regular file
            (:class:`~app._engine.NotRegularOutputError`).
    """
    names = list(names)
    if directory.exists() or directory.is_symlink():
        check_output(directory / MARKER)
        recover(directory, names)
    for name in names:
        check_output(directory / name)
    directory.mkdir(parents=True, exist_ok=True)


def recover(directory: Path, names: Iterable[str]) -> None:
    """Complete an export cut short after its marker was written; remove staged files left before it.

    Args:
        directory: the export folder.
        names: the report files an export may write; a marker naming anything else (it is a file
            in the user's folder, read back) is not followed for that name.
    """
    allowed = set(names)
    marker = directory / MARKER
    try:
        plan = read_json_file(marker, what="the export's marker", max_bytes=1 << 20, max_depth=8)
    except FileNotFoundError:
        plan = None
    except (OSError, JsonFileError):  # a damaged or crafted marker is not followed (it is removed)
        plan = {}
    if plan is not None:
        replace = plan.get("replace", []) if isinstance(plan, dict) else []
        remove = plan.get("remove", []) if isinstance(plan, dict) else []
        for name in (n for n in replace if n in allowed):
            staged = staged_path(directory, name)
            if staged.is_file():
                os.replace(staged, directory / name)
        for name in (n for n in remove if n in allowed):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
        _fsync_dir(directory)
        marker.unlink()
        logger.info("%s: completed the export that was cut short", directory)
    discard(directory)


def stage(directory: Path, name: str, data: bytes) -> None:
    """Write ``data`` as ``name``'s staged file, durably (a full disk fails here).

    Raises:
        OSError: it cannot be written (the staged file is removed).
    """
    path = staged_path(directory, name)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise


def commit(directory: Path, names: Sequence[str], every_kind: Iterable[str]) -> list[Path]:
    """Rename the staged ``names`` into place as one set; remove the other report kinds of an earlier export.

    Args:
        directory: the export folder.
        names: the files staged by this export, in the order to report them.
        every_kind: the files of this project's own earlier reports in ``directory``: those this
            export does not write are removed (nothing else this export did not write is deleted;
            :mod:`app.reports.ownership`).

    Returns:
        The paths written.
    """
    stale = [n for n in every_kind if n not in names and (directory / n).is_file()]
    plan = {"format": MARKER_FORMAT, "replace": list(names), "remove": stale}
    atomic_write_bytes(directory / MARKER, (json.dumps(plan, indent=2) + "\n").encode())
    for name in names:
        os.replace(staged_path(directory, name), directory / name)
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    _fsync_dir(directory)
    (directory / MARKER).unlink()
    _fsync_dir(directory)
    return [directory / n for n in names]


def discard(directory: Path) -> None:
    """Remove staged files (of a failed export, or left by a killed one)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if _STAGED.match(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
