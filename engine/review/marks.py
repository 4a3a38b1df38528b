"""Review marks kept with a project: one JSON-lines file per site, bound to that site.

A reviewer confirms an image's decision or corrects it to another class. The mark is kept beside
the dataset's label, never in its place, and it is what the site's certificates are built from
(:mod:`engine.review.ladder`). The file lives in the project's review folder,
``review/<source hash>.marks.jsonl``, one record per line, appended and fsync'ed as each mark is
made (a reviewer's work must survive a crash); the last record of an image wins, and a record
whose label is null clears the image's mark. Besides marks the file holds the moments the site's
comparisons were started (``start`` records: how many images they cover; a site the method
split in parts has one record per part, the first part's being the site's own), from which the
certificates are rebuilt whenever the file is read: certificates are derived, never trusted.

Every record names the site it belongs to (the hash of its source's identity): a file copied
from another folder, or a record from another folder, is refused with a message and never used.
Times are read as times (``datetime.fromisoformat`` with its offset), so marks written under
different UTC offsets (a change of daylight-saving time, a second reviewer's zone) keep their
order. A mark naming a class the model does not have is refused when it is made, and when read.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.io.sources import source_hash
from engine.util.files import UnsafeFileError
from engine.util.jsonlines import KeyedJsonLines

logger = logging.getLogger(__name__)

SUFFIX = "marks.jsonl"
START_KEY = "\u0000start"  # the key of the ``start`` record (never an item's key: keys are paths or "x,y")
PART_MARK = "@"  # START_KEY + "@" + group: the starts of one part of a split site
MAX_REVIEWER = 200  # characters of a reviewer's name kept


class MarkError(ValueError):
    """A mark cannot be taken (another site's, an unknown class, a bad time); the message says why."""


def marks_path(folder: Path, source_id: str) -> Path:
    """``<folder>/<hash of source_id>.marks.jsonl``."""
    return folder / f"{source_hash(source_id)}.{SUFFIX}"


def parse_time(text: str) -> datetime:
    """An ISO time with its UTC offset, as an aware datetime (a time without offset is taken as UTC).

    Raises:
        MarkError: ``text`` is not an ISO time.
    """
    try:
        when = datetime.fromisoformat(str(text).strip())
    except ValueError as exc:
        raise MarkError(f"{text!r} is not a time (ISO 8601, e.g. 2026-11-27T09:30:00+01:00)") from exc
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def now() -> str:
    """The time now, with the local UTC offset, to the second."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True)
class ReviewMark:
    """A reviewer's verdict on one image.

    Attributes:
        key: the item's key within its site.
        label: the class the reviewer says is right.
        prediction: the decision shown when it was reviewed.
        at: ISO time of the review, with its UTC offset.
        reviewer: who made it ("" for marks made before reviewers were recorded).
    """

    key: str
    label: int
    prediction: int
    at: str
    reviewer: str = ""

    @property
    def confirmed(self) -> bool:
        return self.label == self.prediction

    @property
    def when(self) -> datetime:
        return parse_time(self.at)


def check_mark(mark: ReviewMark, classes: int) -> None:
    """Refuse a mark that names a class the model does not have, or whose time is not a time.

    Raises:
        MarkError: the message says what is wrong.
    """
    for what, value in (("class", mark.label), ("decision", mark.prediction)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < classes:
            raise MarkError(f"{mark.key}: the {what} {value!r} is not one of the model's {classes} classes")
    parse_time(mark.at)


class MarkStore:
    """The marks of one site in a project's review folder (see the module docstring).

    Args:
        folder: the project's review folder.
        source_id: the site's source identity (as in the journal).
        classes: the model's number of classes.
    """

    def __init__(self, folder: Path, source_id: str, classes: int) -> None:
        self.folder, self.source_id, self.classes = folder, source_id, classes
        self.site = source_hash(source_id)
        self._file = KeyedJsonLines(marks_path(folder, source_id), key="k")
        self.part_starts: dict[int, list[int]] = {}  # by group, read by :meth:`load` (split sites)

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> tuple[dict[str, ReviewMark], list[int], list[str]]:
        """``(marks by key in the order they were made, comparison starts, notes)``.

        Records of another site, of unknown classes or with unreadable times are dropped, each
        named in a note (for the log and the window); a file that cannot be read at all reads as
        empty with a note (the review goes on without it).
        """
        notes: list[str] = []
        self.part_starts = {}
        try:
            records, lines = self._file.read()
        except (OSError, UnsafeFileError) as exc:
            return {}, [], [f"the review marks {self.path} cannot be read ({exc}); the review starts empty"]
        marks: list[ReviewMark] = []
        starts: list[int] = []
        foreign = 0
        for key, record in records.items():
            if record.get("site") != self.site:
                foreign += 1
                continue
            if key == START_KEY:
                starts = _starts(record.get("starts"), notes)
                continue
            if key.startswith(START_KEY + PART_MARK) and isinstance(record.get("group"), int):
                self.part_starts[int(record["group"])] = _starts(record.get("starts"), notes)
                continue
            if record.get("label") is None:
                continue
            try:
                mark = ReviewMark(
                    key,
                    _whole(record["label"]),
                    _whole(record["prediction"]),
                    str(record["at"]),
                    str(record.get("by") or "")[:MAX_REVIEWER],
                )
                check_mark(mark, self.classes)
            except (KeyError, TypeError, ValueError) as exc:
                notes.append(f"a review mark of {key!r} was dropped ({exc})")
                continue
            marks.append(mark)
        if foreign:
            notes.append(
                f"{foreign} record(s) in {self.path.name} belong to another folder and were not used "
                "(marks are bound to the folder or slide they were made on)"
            )
        marks.sort(key=lambda m: m.when)  # as times, whatever their UTC offsets
        if len(records) < lines:
            self._compact(records)
        return {m.key: m for m in marks}, starts, notes

    def _compact(self, records: dict[str, dict[str, Any]]) -> None:
        keep = [
            r
            for r in records.values()
            if r.get("site") == self.site and (r.get("label") is not None or r.get("k") == START_KEY)
        ]
        try:
            self._file.rewrite(keep)
        except OSError as exc:
            logger.warning("%s cannot be compacted: %s", self.path, exc)

    def put(self, mark: ReviewMark) -> None:
        """Record ``mark`` durably.

        Raises:
            MarkError: the mark names an unknown class or has no valid time (nothing written).
            OSError: it cannot be written.
        """
        check_mark(mark, self.classes)
        record: dict[str, Any] = {
            "k": mark.key,
            "site": self.site,
            "label": mark.label,
            "prediction": mark.prediction,
            "at": mark.at,
        }
        if mark.reviewer:
            record["by"] = mark.reviewer[:MAX_REVIEWER]
        self._file.append(record, durable=True)

    def clear(self, key: str) -> None:
        """Forget the mark of ``key``.

        Raises:
            OSError: it cannot be written.
        """
        self._file.append({"k": key, "site": self.site, "label": None}, durable=True)

    def put_starts(self, starts: list[int], group: int | None = None) -> None:
        """Record when the site's comparisons started (how many images each covers); ``group``: of the
        part of a split site decided in that unit (None: the site's first or only part).

        Raises:
            OSError: it cannot be written.
        """
        record: dict[str, Any] = {"k": START_KEY, "site": self.site, "starts": list(starts)}
        if group is not None:
            record.update(k=f"{START_KEY}{PART_MARK}{group}", group=group)
        self._file.append(record, durable=True)

    def close(self) -> None:
        self._file.close()


def _whole(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not a whole number")
    return value


def _starts(value: object, notes: list[str]) -> list[int]:
    """The recorded starts: whole numbers >= 1 that never decrease (else none, with a note)."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        notes.append("the record of the comparisons' starts was not readable; they start again")
        return []
    if any(v < 1 for v in value) or any(b < a for a, b in itertools.pairwise(value)):
        notes.append("the record of the comparisons' starts was out of order; they start again")
        return []
    return [int(v) for v in value]
