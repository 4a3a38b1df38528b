"""The journal's record of each source: the items processed (decided) in arrival order, how many
of them have their uncertainty map, and the items skipped for good.

It is saved as the ``extra`` of the engine's state (:mod:`engine.run.state`), so the record and the
method's state are always written together: the operating point as it was after the last decided
item and I-DiPT's prompts as they were after the last mapped one (``docs/method.md``, "Decisions
first, maps behind").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import StateError
from engine.io.arrival import ORDERS

JOURNAL_FORMAT = "f2tta/journal-1"
LEGACY_PROFILE_FORMAT = "f2tta-studio/profile-1"  # app profiles before the journal: same record


@dataclass
class SourceRecord:
    """What the journal knows of one source."""

    processed: list[str] = field(default_factory=list)  # item keys, arrival order
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (key, reason), never retried
    #: The arrival order and its seed the source was begun in (None: not recorded, an older state).
    arrival: tuple[str, int] | None = None
    #: How many of ``processed``, from the first, have had their map step (None: all of them; maps
    #: are made in arrival order, so the rest are pending).
    mapped: int | None = None
    #: (key, reason) of processed items whose image could not be read again for their map.
    map_skipped: list[tuple[str, str]] = field(default_factory=list)

    def done(self) -> set[str]:
        return set(self.processed) | {k for k, _ in self.skipped}

    @property
    def maps_done(self) -> int:
        """Processed items whose map step is behind them (made, or skipped as unreadable)."""
        return len(self.processed) if self.mapped is None else self.mapped

    def pending_maps(self) -> list[str]:
        """The keys of processed items still waiting for their map, in arrival order."""
        return self.processed[self.maps_done :]

    def add_processed(self, key: str, mapped: bool) -> None:
        """Count a decided item; ``mapped``: its map came with the decision (maps inline)."""
        if not mapped and self.mapped is None:
            self.mapped = len(self.processed)
        self.processed.append(key)

    def add_mapped(self, key: str, unreadable: str | None = None) -> None:
        """Count the map step of the next pending item, ``key`` (``unreadable``: why it had none)."""
        pending = self.pending_maps()
        if not pending or pending[0] != key:
            raise ValueError(f"{key!r} is not the next item waiting for its map")
        if unreadable is not None:
            self.map_skipped.append((key, unreadable))
        self.mapped = None if self.maps_done + 1 == len(self.processed) else self.maps_done + 1


def parse_record(extra: Any, origin: str) -> dict[str, SourceRecord]:
    """The per-source record from a state's ``extra``.

    Raises:
        StateError: the record is malformed or was written by the old ``f2tta run`` format.
    """
    if not extra:
        return {}
    if not isinstance(extra, dict):
        raise StateError(f"{origin}: the journal record is not a JSON object")
    fmt = extra.get("format")
    try:
        if fmt == JOURNAL_FORMAT:
            return {str(sid): _source(rec) for sid, rec in extra.get("sources", {}).items()}
        if fmt == LEGACY_PROFILE_FORMAT:
            return {
                str(sid): SourceRecord([str(k) for k in keys]) for sid, keys in extra["processed"].items()
            }
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise StateError(f"{origin}: the journal record is malformed ({type(exc).__name__}: {exc})") from exc
    if "processed" in extra and "root" in extra:
        raise StateError(
            f"{origin}: written by an earlier version of f2tta run, whose predictions CSV had other "
            "columns; start afresh with a new --state directory and a new --out file"
        )
    raise StateError(f"{origin}: unknown journal format {fmt!r}")


def _source(rec: Any) -> SourceRecord:
    record = SourceRecord(
        [str(k) for k in rec.get("processed", [])],
        [(str(k), str(r)) for k, r in rec.get("skipped", [])],
        _arrival(rec.get("arrival")),
    )
    mapped = rec.get("mapped")
    if mapped is not None:
        if type(mapped) is not int or not 0 <= mapped <= len(record.processed):
            raise ValueError(f"mapped {mapped!r} is not a count of the processed items")
        record.mapped = None if mapped == len(record.processed) else mapped
    record.map_skipped = [(str(k), str(r)) for k, r in rec.get("map_skipped", [])]
    return record


def _arrival(value: Any) -> tuple[str, int] | None:
    """A recorded ``{"order": ..., "seed": ...}`` (None when absent); anything else is refused."""
    if value is None:
        return None
    order, seed = value["order"], value["seed"]
    if order not in ORDERS or type(seed) is not int:
        raise ValueError(f"arrival {value!r} is not an order of {', '.join(ORDERS)} with an integer seed")
    return str(order), seed


def record_extra(record: dict[str, SourceRecord]) -> dict[str, Any]:
    """The record as the state's ``extra`` (inverse of :func:`parse_record`)."""
    sources: dict[str, Any] = {}
    for sid, rec in record.items():
        if not (rec.processed or rec.skipped):
            continue
        entry: dict[str, Any] = {"processed": rec.processed, "skipped": [list(s) for s in rec.skipped]}
        if rec.arrival is not None:
            entry["arrival"] = {"order": rec.arrival[0], "seed": rec.arrival[1]}
        if rec.mapped is not None:
            entry["mapped"] = rec.mapped
        if rec.map_skipped:
            entry["map_skipped"] = [list(s) for s in rec.map_skipped]
        sources[sid] = entry
    return {"format": JOURNAL_FORMAT, "sources": sources}
