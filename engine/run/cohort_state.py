"""A cohort's state folder and its summary: one ``f2tta run`` state per site, the record of its inputs.

::

    STATE/cohort.json          the cohort's inputs, in the order they were first given: per site its
                               name, path, kind, label, reviews file, the slide's content
                               fingerprint (engine.io.content) and its last result
    STATE/sites/<site>/        the site's state: an ordinary f2tta run state (journal, rows, lock)
    STATE/lock                 held by the process that runs the cohort (one at a time)
    OUT/<site>/predictions.csv the site's CSV and its companions (.skipped.csv, .config.json,
                               .geojson of a slide, .certified.csv and .certificates.json)
    OUT/cohort-summary.csv     one row per site of the cohort (and .json, with the totals)

The record is written atomically before any site starts and again as sites finish; a site is
always named as first recorded: a path given again under another site name, or a site name
given to another path, is refused before anything runs, so two runs never mix two inputs in one
site's state. A cohort grows when new inputs are given with the same ``--state``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import StateError
from engine.io.cohort import MAX_SITES, CohortInput
from engine.io.content import changed_since, file_fingerprint
from engine.run.cohort_site import SiteResult
from engine.run.lock import LOCK_FILE, DirectoryLock
from engine.run.outputs import foreign_message, has_content
from engine.run.rows import escape_cell
from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import JsonFileError, SchemaError, read_json_file, require_list, require_object
from engine.util.closing import Closing
from engine.util.files import NotRegularOutputError, UnsafeFileError, check_output

COHORT_FILE = "cohort.json"
SITES_DIR = "sites"
COHORT_FORMAT = 1
COHORT_KIND = "f2tta cohort"
#: Largest cohort.json read: MAX_SITES sites with their results (about 1 kB each).
MAX_COHORT_BYTES = 1 << 28
SUMMARY_CSV, SUMMARY_JSON = "cohort-summary.csv", "cohort-summary.json"
PREDICTIONS = "predictions.csv"
#: What a single run's state or an app project holds; a cohort is never put in one.
_OTHER_STATES = ("journal.json", "state.safetensors", "profile.json")
SUMMARY_COLUMNS = (
    "site",
    "path",
    "kind",
    "label",
    "status",
    "exit_code",
    "images",
    "processed",
    "processed_now",
    "skipped",
    "to_retry",
    "decisions",
    "decided_by",
    "adapting",
    "review",
    "message",
    "seconds",
    "predictions",
    "state",
)
#: What the review certificates of a cohort's sites promise (docs/review-certificates.md).
ERROR_CONTROL = (
    "review certificates control errors per site (per folder or slide, per part where the method split "
    "it): the certificates of one site are wrong together with probability at most 5 %; nothing is "
    "corrected across sites, so a cohort of many sites can hold a wrong one"
)


@dataclass
class SiteRecord:
    """A site as the cohort recorded it."""

    site: str
    path: str
    kind: str
    label: str = ""
    reviews: str = ""
    content: str = ""  # a slide file's content fingerprint when first recorded (engine.io.content)
    result: SiteResult | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            k: getattr(self, k) for k in ("site", "path", "kind", "label", "reviews", "content")
        }
        data["result"] = self.result.to_json() if self.result is not None else None
        return data


def site_out(out: Path, site: str) -> Path:
    """The predictions CSV of ``site`` under the cohort's ``--out`` folder."""
    return out / site / PREDICTIONS


def is_cohort_state(directory: Path) -> bool:
    """Whether ``directory`` holds a cohort's record."""
    return os.path.lexists(directory / COHORT_FILE)


def read_record(directory: Path) -> tuple[dict[str, SiteRecord], str]:
    """The sites of the cohort record in ``directory`` (by case-folded name, in the recorded order)
    and its ``--out`` folder; none when there is no record. Reads without taking the lock, so the app
    can show a cohort another process is running (the record is written atomically).

    Raises:
        StateError: the record cannot be read, or is not a cohort record of this format.
    """
    path = Path(directory) / COHORT_FILE
    try:
        data = read_json_file(path, what="the cohort's record", max_bytes=MAX_COHORT_BYTES, max_depth=8)
    except FileNotFoundError:
        return {}, ""
    except (JsonFileError, OSError) as exc:
        raise StateError(f"{exc}; it was not changed") from exc
    try:
        obj = require_object(data, COHORT_FILE)
        if obj.get("kind") != COHORT_KIND or obj.get("format") != COHORT_FORMAT:
            raise SchemaError(f"{COHORT_FILE}: not a cohort record of format {COHORT_FORMAT}")
        sites: dict[str, SiteRecord] = {}
        for i, item in enumerate(require_list(obj.get("sites"), "sites", MAX_SITES)):
            where = f"sites[{i}]"
            entry = require_object(item, where)
            texts = {k: entry.get(k, "") for k in ("site", "path", "kind", "label", "reviews", "content")}
            if not all(isinstance(v, str) and len(v) <= 8192 for v in texts.values()):
                raise SchemaError(f"{where}: a field that is not a short text")
            result = entry.get("result")
            record = SiteRecord(
                **texts,
                result=None if result is None else SiteResult.from_json(result, f"{where}.result"),
            )
            sites[record.site.casefold()] = record
        out = obj.get("out", "")
        return sites, out if isinstance(out, str) else ""
    except SchemaError as exc:
        raise StateError(f"{path}: cannot be used ({exc}); it was not changed") from exc


class CohortState(Closing):
    """A cohort's state folder (created when missing), locked until :meth:`close`.

    Raises:
        StateError: the folder is a single run's state or an app project, holds other files,
            cannot be created, is used by another process (naming it), or its record cannot be read.
    """

    def __init__(self, directory: Path, command: str) -> None:
        self.directory = Path(directory)
        found = [name for name in _OTHER_STATES if os.path.lexists(self.directory / name)]
        if found:
            raise StateError(
                f"{self.directory} is the state of a single f2tta run or an app project (it holds {found[0]}); "
                "a cohort needs a --state folder of its own (a new or empty one)"
            )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            others = sorted(
                e.name
                for e in self.directory.iterdir()
                if e.name not in (COHORT_FILE, SITES_DIR, LOCK_FILE) and not e.name.startswith(".")
            )
        except OSError as exc:
            raise StateError(f"{self.directory}: cannot be used as a cohort's state ({exc})") from exc
        if others and not is_cohort_state(self.directory):
            raise StateError(
                f"{self.directory} holds other files ({', '.join(others[:3])}) and no {COHORT_FILE}: give a "
                "new or empty folder as the cohort's --state"
            )
        self._lock = DirectoryLock(self.directory, command)  # LockedError names the holder
        try:
            self.sites, self.out = self._read()
        except BaseException:
            self._lock.close()
            raise

    def _read(self) -> tuple[dict[str, SiteRecord], str]:
        return read_record(self.directory)

    def take(self, inputs: Sequence[CohortInput]) -> list[str]:
        """Record ``inputs`` (new sites are added, known ones must be named as recorded); the notes
        to print (a slide replaced since it was recorded).

        Raises:
            StateError: an input names a recorded site with another path, or a recorded path
                under another site name (nothing is changed).
        """
        by_path = {os.path.realpath(r.path): r for r in self.sites.values()}
        notes: list[str] = []
        added: list[SiteRecord] = []
        for item in inputs:
            real = os.path.realpath(item.path)
            known = self.sites.get(item.site.casefold())
            if known is not None and os.path.realpath(known.path) != real:
                raise StateError(
                    f"{item.origin}: site {known.site!r} of the cohort {self.directory} is {known.path}, not "
                    f"{item.path}; give this input another site name, or use another --state"
                )
            other = by_path.get(real)
            if other is not None and other.site.casefold() != item.site.casefold():
                raise StateError(
                    f"{item.origin}: {item.path} is site {other.site!r} of the cohort {self.directory}; name it "
                    f"{other.site!r} (a manifest's site column) or use another --state"
                )
            if known is None:
                added.append(SiteRecord(item.site, str(item.path), item.kind))
                known = added[-1]
            elif known.content and item.kind == "slide" and changed_since(known.content, item.path):
                notes.append(
                    f"{known.site}: the slide {item.path} changed since the cohort recorded it (replaced or "
                    "rewritten); its state treats the file there as a new input"
                )
                known.content = ""
            known.label, known.reviews = item.label, str(item.reviews or "")
        if len(self.sites) + len(added) > MAX_SITES:
            raise StateError(f"the cohort would hold more than {MAX_SITES:,} sites; use another --state")
        for record in added:
            self.sites[record.site.casefold()] = record
        for record in self.sites.values():
            if record.kind == "slide" and not record.content:
                try:
                    record.content = file_fingerprint(record.path)
                except UnsafeFileError:
                    pass  # unreadable now: the site's run says why
        return notes

    def site_state(self, site: str) -> Path:
        return self.directory / SITES_DIR / site

    def save(self, out: Path) -> None:
        """Write the record atomically (``out``: the cohort's --out folder, whose summary it owns)."""
        self.out = str(out.resolve())
        data = {
            "format": COHORT_FORMAT,
            "kind": COHORT_KIND,
            "out": self.out,
            "sites": [r.to_json() for r in self.sites.values()],
        }
        atomic_write_bytes(self.directory / COHORT_FILE, (json.dumps(data, indent=1) + "\n").encode())

    def close(self) -> None:
        self._lock.close()


def check_summary(out: Path, state: CohortState) -> None:
    """Refuse, before anything changes, a summary in ``out`` this cohort did not write.

    Raises:
        StateError: a summary file is not a regular file, or another cohort (or none) wrote it.
    """
    for path in (out / SUMMARY_CSV, out / SUMMARY_JSON):
        try:
            check_output(path)
        except NotRegularOutputError as exc:
            raise StateError(str(exc)) from exc
        if has_content(path) and state.out != str(out.resolve()):
            raise StateError(foreign_message(path, state.directory))


def write_summary(out: Path, state: CohortState) -> tuple[Path, Path]:
    """``OUT/cohort-summary.csv`` and ``.json``: every recorded site, with its last result."""
    rows: list[dict[str, Any]] = []
    for record in state.sites.values():
        result = record.result or SiteResult(record.site)
        row: dict[str, Any] = {
            "site": record.site,
            "path": record.path,
            "kind": record.kind,
            "label": record.label,
        }
        row.update(result.to_json())
        row["exit_code"] = row.pop("code")
        row["predictions"] = str(site_out(out, record.site).relative_to(out))
        row["state"] = str(state.site_state(record.site))
        rows.append(row)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    for row in rows:
        cells = dict(row, decisions="; ".join(f"{k} {v}" for k, v in row["decisions"].items()))
        writer.writerow([escape_cell(str(cells[c])) for c in SUMMARY_COLUMNS])
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    totals = {
        "sites": len(rows),
        "by_status": statuses,
        **{k: sum(int(r[k]) for r in rows) for k in ("images", "processed", "skipped", "to_retry")},
    }
    document = {
        "cohort": str(state.directory),
        "error_control": ERROR_CONTROL,
        "totals": totals,
        "sites": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / SUMMARY_CSV, out / SUMMARY_JSON)
    atomic_write_bytes(paths[0], buf.getvalue().encode())
    atomic_write_bytes(paths[1], (json.dumps(document, indent=1) + "\n").encode())
    return paths
