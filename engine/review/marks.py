"""Review marks kept with a project: one JSON-lines file per site, bound to that site.

A reviewer confirms an image's decision or corrects it to another class. The mark is kept beside
the dataset's label, never in its place, and it is what the site's certificates are built from
(:mod:`engine.review.ladder`). The file lives in the project's review folder,
``review/<source hash>.marks.jsonl``, one record per line, appended and fsync'ed as each mark is
made (a reviewer's work must survive a crash); the last record of an image wins, and a record
whose label is null clears the image's mark. Besides marks the file holds one **block record**
per block any comparison of the site froze (:class:`BlockRecord`: which comparison, its
candidate and frozen threshold, the images it covers, and hashes of those images' keys and of
the disagreements it sampled), appended once and never rewritten, from which the certificates
are rebuilt whenever the file is read: certificates are derived, never trusted, and a block
whose images or disagreements no longer match is set aside with a note, not used. Files written
before blocks existed hold ``start`` records (how many images each comparison covered, one list
per part); they are read as first blocks that could not be bound to their images.

Reading never rewrites the file: records of another folder, records that cannot be read and
marks taken back stay where they are (set aside, each named in a note), so nothing a reader does
not use is ever lost.

Every record names the site it belongs to (the hash of its source's identity): a file copied
from another folder, or a record from another folder, is refused with a message and never used.
Times are read as times (``datetime.fromisoformat`` with its offset), so marks written under
different UTC offsets (a change of daylight-saving time, a second reviewer's zone) keep their
order. A mark naming a class the model does not have is refused when it is made, and when read.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.io.sources import source_hash
from engine.util.files import UnsafeFileError
from engine.util.jsonlines import KeyedJsonLines

SUFFIX = "marks.jsonl"
START_KEY = "\u0000start"  # the key of the ``start`` record (never an item's key: keys are paths or "x,y")
PART_MARK = "@"  # START_KEY + "@" + group: the starts of one part of a split site (files before blocks)
BLOCK_KEY = "\u0000block"  # BLOCK_KEY + "@" + part + "#" + comparison + "." + block: one block record
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


@dataclass(frozen=True)
class BlockRecord:
    """One block a comparison of the site froze, as the marks file keeps it (module docstring).

    Attributes:
        part: the unit the part it belongs to was decided in (None: the site's first or only part).
        comparison: the comparison's index (its level; None: a start written before blocks existed).
        number: the block's number in its comparison (0: the comparison's start).
        candidate: the candidate it tests (None: a start written before blocks existed).
        threshold: the candidate's frozen threshold (None: not a threshold candidate, or not known).
        start, end: the images it was frozen on (positions in the part's arrival order).
        disagreements: how many of them the two rules decide differently (None: not known).
        items: sha256 of the keys of those images (None: not known).
        changes: sha256 of the disagreements' positions (None: not known).
        level: the error its comparison is tested at, when a level was passed on to it (None:
            the comparison's own, ``LadderRule.level``; every record before levels were kept).
    """

    part: int | None
    comparison: int | None
    number: int
    candidate: str | None
    threshold: float | None
    start: int
    end: int
    disagreements: int | None = None
    items: str | None = None
    changes: str | None = None
    level: float | None = None

    @property
    def bound(self) -> bool:
        """Whether it names what it covers (a record written since blocks exist)."""
        return self.items is not None and self.changes is not None and self.comparison is not None

    @property
    def key(self) -> str:
        return (
            f"{BLOCK_KEY}{PART_MARK}{'' if self.part is None else self.part}#{self.comparison}.{self.number}"
        )

    def to_json(self) -> dict[str, Any]:
        threshold = self.threshold if self.threshold is not None and math.isfinite(self.threshold) else None
        return {
            "part": self.part,
            "comparison": self.comparison,
            "number": self.number,
            "candidate": self.candidate,
            "threshold": threshold,
            "start": self.start,
            "end": self.end,
            "disagreements": self.disagreements,
            "items": self.items,
            "changes": self.changes,
            **({} if self.level is None else {"level": self.level}),
        }


def _block(value: object) -> BlockRecord:
    """A block record read back (raises TypeError or ValueError when it is not one)."""
    if not isinstance(value, dict):
        raise TypeError("not a block record")

    def whole(name: str, low: int = 0, optional: bool = False) -> int | None:
        v = value.get(name)
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} {v!r} is not a whole number >= {low}")
        return v

    def text(name: str) -> str:
        v = value.get(name)
        if not isinstance(v, str) or not 0 < len(v) <= 200:
            raise ValueError(f"{name} {v!r} is not a name")
        return v

    threshold = value.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
        raise ValueError(f"threshold {threshold!r} is not a number")
    level = value.get("level")
    if level is not None and (
        isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < float(level) < 1.0
    ):
        raise ValueError(f"level {level!r} is not an error between 0 and 1")
    record = BlockRecord(
        part=whole("part", optional=True),
        comparison=whole("comparison", low=1),
        number=int(whole("number") or 0),
        candidate=text("candidate"),
        threshold=None if threshold is None else float(threshold),
        start=int(whole("start") or 0),
        end=int(whole("end", low=1) or 0),
        disagreements=whole("disagreements", low=0),
        items=text("items"),
        changes=text("changes"),
        level=None if level is None else float(level),
    )
    if record.end <= record.start or (record.number == 0 and record.start != 0):
        raise ValueError(f"images {record.start} to {record.end} are not a block")
    return record


@dataclass(frozen=True)
class Loaded:
    """What :meth:`MarkStore.load` read: the marks, the block records (in the order they were
    made) and a note for everything set aside."""

    marks: dict[str, ReviewMark]
    blocks: list[BlockRecord]
    notes: list[str]


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

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> Loaded:
        """The marks (by key, in the order they were made, as times), the block records and notes.

        Records of another site, of unknown classes, with unreadable times or blocks that are
        not blocks are not used, each named in a note (for the log and the window); they stay in
        the file. A file that cannot be read at all reads as empty with a note (the review goes
        on without it).
        """
        notes: list[str] = []
        try:
            records, _ = self._file.read()
        except (OSError, UnsafeFileError) as exc:
            return Loaded(
                {}, [], [f"the review marks {self.path} cannot be read ({exc}); the review starts empty"]
            )
        marks: list[ReviewMark] = []
        blocks: list[BlockRecord] = []
        legacy: list[BlockRecord] = []
        foreign = 0
        for key, record in records.items():
            if record.get("site") != self.site:
                foreign += 1
                continue
            if key.startswith(BLOCK_KEY):
                try:
                    blocks.append(_block(record.get("block")))
                except (TypeError, ValueError) as exc:
                    notes.append(f"a record of a comparison's block was set aside ({exc})")
                continue
            if key == START_KEY or (
                key.startswith(START_KEY + PART_MARK) and isinstance(record.get("group"), int)
            ):
                group = None if key == START_KEY else int(record["group"])
                legacy += [
                    BlockRecord(group, None, 0, None, None, 0, n)
                    for n in _starts(record.get("starts"), notes)
                ]
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
                "(marks are bound to the folder or slide they were made on; the file keeps them)"
            )
        marks.sort(key=lambda m: m.when)  # as times, whatever their UTC offsets
        if legacy:
            notes.append(
                f"{len(legacy)} comparison start(s) were written by an earlier version: they are used, "
                "but cannot be checked against the images they covered"
            )
        return Loaded({m.key: m for m in marks}, legacy + blocks, notes)

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

    def put_block(self, block: BlockRecord) -> None:
        """Record a block a comparison froze, durably, before anything is shown from it.

        Raises:
            OSError: it cannot be written.
        """
        self._file.append({"k": block.key, "site": self.site, "block": block.to_json()}, durable=True)

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
