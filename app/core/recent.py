"""The folders and slides opened in a project, most recent first (Qt-free).

Kept in ``<project>/inputs.json``, a small JSON list written atomically by the engine worker (the one
writer of a project's folder) when a source opens and when the state is saved; read strictly: a
file that is too large or not JSON gives an empty list, an entry of the wrong shape is left out,
each with a line in the log, and nothing here raises for a damaged file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app._engine import JsonFileError, SlideSource, Source, atomic_write_bytes, read_json_file
from app.core.projects import now_iso
from app.core.settings import RESOURCES

logger = logging.getLogger(__name__)

INPUTS_FILE = "inputs.json"
MAX_INPUTS = 30  # the list keeps this many, most recent first
MAX_BYTES = 256 * 1024
MAX_DEPTH = 8  # {"inputs": [{...}]}
KINDS = ("folder", "slide")


@dataclass(frozen=True)
class Input:
    """A folder or slide opened in a project.

    Attributes:
        path: where it is.
        kind: "folder" or "slide".
        opened: when it was last opened (ISO 8601, local time).
        images: images of it processed so far (None while not known).
        reports: the folder its reports were last written into (None: never).
        reported: when (ISO 8601, local time).
    """

    path: str
    kind: str
    opened: str
    images: int | None = None
    reports: str | None = None
    reported: str | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name or self.path

    def exists(self) -> bool:
        path = Path(self.path)
        return path.is_dir() if self.kind == "folder" else path.is_file()


def _entry(raw: Any) -> Input | None:
    if not isinstance(raw, dict):
        return None
    path, kind, opened, images = raw.get("path"), raw.get("kind"), raw.get("opened"), raw.get("images")
    if not (isinstance(path, str) and path and len(path) <= 4096 and kind in KINDS):
        return None
    if not isinstance(opened, str) or len(opened) > 64:
        return None
    if images is not None and (type(images) is not int or images < 0):
        return None
    reports, reported = raw.get("reports"), raw.get("reported")
    if reports is not None and not (isinstance(reports, str) and 0 < len(reports) <= 4096):
        return None
    if reported is not None and not (isinstance(reported, str) and len(reported) <= 64):
        return None
    return Input(path, str(kind), opened, images, reports, reported)


def read_inputs(project: Path) -> tuple[Input, ...]:
    """The inputs recorded in ``project`` (empty when there are none or the file is damaged)."""
    path = project / INPUTS_FILE
    try:
        what = f"inputs.json of project {project.name!r}"
        data = read_json_file(path, what=what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH)
    except FileNotFoundError:
        return ()
    except (JsonFileError, OSError) as exc:
        logger.warning("ignoring the unreadable list of inputs: %s", exc)
        return ()
    raw = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        logger.warning("ignoring the list of inputs %s: no 'inputs' list", path)
        return ()
    entries = [_entry(item) for item in raw[:MAX_INPUTS]]
    if None in entries:
        logger.warning("%s: %d entries of the wrong shape left out", path, entries.count(None))
    kept = [e for e in entries if e is not None]
    return tuple(sorted(kept, key=lambda e: e.opened, reverse=True))


def _write(project: Path, inputs: list[Input]) -> tuple[Input, ...]:
    kept = tuple(inputs[:MAX_INPUTS])
    data = {"inputs": [asdict(e) for e in kept]}
    atomic_write_bytes(project / INPUTS_FILE, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
    return kept


def note_opened(project: Path, path: Path, kind: str, when: str | None = None) -> tuple[Input, ...]:
    """``path`` was opened in ``project``: first in the list (its image count kept).

    Raises:
        OSError: the list cannot be written.
    """
    inputs = list(read_inputs(project))
    earlier = next((e for e in inputs if e.path == str(path)), None)
    rest = [e for e in inputs if e.path != str(path)]
    entry = Input(str(path), kind, when or now_iso())
    if earlier is not None:  # its image count and reports stay
        entry = replace(earlier, kind=kind, opened=entry.opened)
    return _write(project, [entry, *rest])


def note_images(project: Path, path: Path, images: int) -> tuple[Input, ...]:
    """``images`` of ``path`` are processed (saved); nothing is written when the count is the same.

    Raises:
        OSError: the list cannot be written.
    """
    inputs = list(read_inputs(project))
    index = next((k for k, e in enumerate(inputs) if e.path == str(path)), None)
    if index is None or inputs[index].images == images:
        return tuple(inputs)
    inputs[index] = replace(inputs[index], images=images)
    return _write(project, inputs)


def note_reports(project: Path, path: Path, directory: Path, when: str | None = None) -> tuple[Input, ...]:
    """The reports of ``path`` (an input of ``project``) were written into ``directory``.

    Raises:
        OSError: the list cannot be written.
    """
    inputs = list(read_inputs(project))
    index = next((k for k, e in enumerate(inputs) if e.path == str(path)), None)
    if index is None:
        return tuple(inputs)
    inputs[index] = replace(inputs[index], reports=str(directory), reported=when or now_iso())
    return _write(project, inputs)


@dataclass(frozen=True)
class InputLine:
    """An input as the welcome page and File ▸ Open recent show it.

    Attributes:
        path: where it is.
        kind: "folder" or "slide".
        text: its name, kind, images processed and when it was last opened.
        missing: the folder or slide is not there any more (shown, not offered).
        images: images of it processed so far (None while not known).
        reports: the folder its reports were last written into, when it is still there.
    """

    path: str
    kind: str
    text: str
    missing: bool
    images: int | None = None
    reports: str | None = None


def shown_inputs(inputs: tuple[Input, ...]) -> list[InputLine]:
    """The lines for ``inputs``, most recent first."""
    lines = []
    for entry in inputs:
        missing = not entry.exists()
        text = f"{entry.name} ({entry.kind})"
        if entry.images:
            text += f" · {entry.images} image{'s' if entry.images != 1 else ''} processed"
        else:  # opened, never run: said, not left to be read as part of the project's work
            text += " · nothing processed"
        text += f" · opened {entry.opened.replace('T', ' ')[:16]}"
        reports = entry.reports if entry.reports is not None and Path(entry.reports).is_dir() else None
        if reports is not None and entry.reported:
            text += f" · reports {entry.reported.replace('T', ' ')[:16]}"
        if missing:
            text += " · missing"
        lines.append(InputLine(entry.path, entry.kind, text, missing, entry.images, reports))
    return lines


def export_folder(lines: list[InputLine], source: Source | None) -> str:
    """Where the export dialog starts: the folder the open source's reports were last written
    into, else this project's latest reports, else beside the open folder or slide -- never a
    folder remembered from another project (its reports were replaced from there, issue 27), nor
    the installation's own folder a demo set lies in (issue 38): the user's home instead."""
    opened = None if source is None else str(source.path if isinstance(source, SlideSource) else source.root)
    for line in lines:
        if line.path == opened and line.reports is not None:
            return line.reports
    latest = next((line.reports for line in lines if line.reports is not None), None)
    if latest is not None:
        return latest
    if opened is None:
        return ""
    beside = Path(opened).parent
    return str(Path.home()) if beside.resolve().is_relative_to(RESOURCES.resolve()) else str(beside)
