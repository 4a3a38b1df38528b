"""Whose reports a folder holds, before an export writes into it (Qt-free).

An export replaces the report files of its folder as one set (:mod:`app.reports.export`). A folder
that holds the reports of another project or another folder or slide -- or report files of
unknown origin -- is not replaced without a question naming whose they are (issue 27): the
export dialog once opened in the previous project's folder and an export there replaced its
reports and deleted its ``tiles.geojson``. Whose they are is read from the ``run_config.json``
beside them (bounded: the file is the user's).

A project is known by its identity (``project.id`` in ``run_config.json``, made once and kept in
its ``profile.json``), not by its name: two homes exporting a project of the same name (both the
default project) into one folder replaced each other's reports without a question (issue 42,
item 10). Reports written before projects had an identity are owned by name, as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app._engine import JsonFileError, read_json_file, shown
from app.reports.files import CONFIG_NAME, REPORT_KINDS

MAX_CONFIG_BYTES = 32 << 20  # a run_config.json of a card with 10 000 classes stays under this
MAX_CONFIG_DEPTH = 64


@dataclass(frozen=True)
class FolderReports:
    """The report files a folder holds and, where its ``run_config.json`` says, whose they are.

    Attributes:
        files: the report files present (``predictions.csv``, ``report.pdf``, …).
        project: the project that wrote them (None: not known).
        source: the folder or slide they report on (None: not known).
        created: when they were written (None: not known).
        written: the files the export that wrote them wrote (its ``report_files``; empty: not known).
        project_id: the identity of the project that wrote them (None: written before projects
            had one, or not known).
    """

    files: tuple[str, ...]
    project: str | None = None
    source: str | None = None
    created: str | None = None
    written: tuple[str, ...] = ()
    project_id: str | None = None

    def owned_by(self, project: str, source: str, project_id: str | None = None) -> bool:
        """They are the reports of ``source`` by the project ``project_id`` (by the name ``project``
        for reports that record no identity)."""
        if self.source != source:
            return False
        if self.project_id is not None:
            return self.project_id == project_id
        return self.project == project

    def whose(self) -> str:
        """``project 'Site A' (folder /data/a, written 2025-01-02 10:11)`` or ``unknown origin``."""
        if self.project is None and self.source is None:
            return "unknown origin (no readable run_config.json)"
        text = f"project '{self.project}'" if self.project else "an unknown project"
        if self.project_id:
            text += f" [{shown(self.project_id[:12])}]"  # a namesake of another home is told apart
        details = [shown(self.source)] if self.source else []
        if self.created:
            details.append(f"written {self.created.replace('T', ' ')[:16]}")
        return f"{text} ({', '.join(details)})" if details else text


def reports_in(directory: Path) -> FolderReports | None:
    """The reports ``directory`` holds (None: no report file is there, or no such folder)."""
    try:
        files = tuple(name for name in REPORT_KINDS if (directory / name).is_file())
    except OSError:
        return None
    if not files:
        return None
    try:
        config = read_json_file(
            directory / CONFIG_NAME,
            what="run_config.json",
            max_bytes=MAX_CONFIG_BYTES,
            max_depth=MAX_CONFIG_DEPTH,
        )
    except (OSError, JsonFileError):
        return FolderReports(files)
    if not isinstance(config, dict):
        return FolderReports(files)
    project = config.get("project", config.get("profile"))
    name = project.get("name") if isinstance(project, dict) else None
    project_id = project.get("id") if isinstance(project, dict) else None
    source = config.get("source")
    path = source.get("path") if isinstance(source, dict) else None
    created = config.get("created")
    written = config.get("report_files")
    return FolderReports(
        files,
        name if isinstance(name, str) else None,
        path if isinstance(path, str) else None,
        created if isinstance(created, str) else None,
        tuple(n for n in written if n in REPORT_KINDS) if isinstance(written, list) else (),
        project_id if isinstance(project_id, str) else None,
    )


def replace_question(directory: Path, found: FolderReports, writes: tuple[str, ...]) -> str:
    """The question asked before ``found`` (not this export's own) are replaced by ``writes``."""
    kept = [name for name in found.files if name not in writes]
    text = (
        f"{shown(directory)} holds the reports of {found.whose()}: {', '.join(found.files)}.\n\n"
        f"Replace {', '.join(n for n in writes if n in found.files) or 'them'} with this export's?"
    )
    if kept:
        text += f" {', '.join(kept)} of the earlier reports stay{'s' if len(kept) == 1 else ''} as they are."
    return text
