"""The journal's record of each source: the items processed (decided) in arrival order, how many
of them have their uncertainty map and their prompted decision, and the items skipped for good.

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
    #: How many of ``processed``, from the first, have had their prompt step (I-DiPT's prompted
    #: decision, made when asked for; None: all of them, or the method has none).
    prompted: int | None = None
    #: (key, reason) of processed items whose image could not be read again for their prompt step.
    prompt_skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Written before the prompt step had a count of its own, with maps pending: their map step was
    #: to make the prompted decisions too (:meth:`from_legacy_maps`). Not saved.
    legacy_maps: bool = False

    def from_legacy_maps(self) -> None:
        """A method with a prompt step takes the record over: the items whose map is pending wait
        for their prompted decision as well (the map step made both when the record was written)."""
        if self.legacy_maps:
            self.prompted, self.legacy_maps = self.mapped, False

    def done(self) -> set[str]:
        return set(self.processed) | {k for k, _ in self.skipped}

    @property
    def maps_done(self) -> int:
        """Processed items whose map step is behind them (made, or skipped as unreadable)."""
        return len(self.processed) if self.mapped is None else self.mapped

    def pending_maps(self) -> list[str]:
        """The keys of processed items still waiting for their map, in arrival order."""
        return self.processed[self.maps_done :]

    @property
    def prompts_done(self) -> int:
        """Processed items whose prompt step is behind them (made, or skipped as unreadable)."""
        return len(self.processed) if self.prompted is None else self.prompted

    def pending_prompts(self) -> list[str]:
        """The keys of processed items still waiting for their prompt step, in arrival order."""
        return self.processed[self.prompts_done :]

    def add_processed(self, key: str, mapped: bool, prompted: bool = True) -> None:
        """Count a decided item; ``mapped``: its map came with the decision (maps inline);
        ``prompted``: so did its prompted decision (or the method has none)."""
        if not mapped and self.mapped is None:
            self.mapped = len(self.processed)
        if not prompted and self.prompted is None:
            self.prompted = len(self.processed)
        self.processed.append(key)

    def add_mapped(self, key: str, unreadable: str | None = None) -> None:
        """Count the map step of the next pending item, ``key`` (``unreadable``: why it had none)."""
        mapped = self._after(self.maps_done, key, "map")
        if unreadable is not None:
            self.map_skipped.append((key, unreadable))
        self.mapped = mapped

    def add_prompted(self, key: str, unreadable: str | None = None) -> None:
        """Count the prompt step of the next item waiting for it, ``key`` (``unreadable``: why it
        had none)."""
        prompted = self._after(self.prompts_done, key, "prompt step")
        if unreadable is not None:
            self.prompt_skipped.append((key, unreadable))
        self.prompted = prompted

    def _after(self, done: int, key: str, step: str) -> int | None:
        """The count of a step once ``key``, the next processed item waiting for it (``done`` have
        had it), has had it; None when every processed item then has. Without slicing the pending
        keys: a slide's 20 000 maps would copy them 20 000 times."""
        if done >= len(self.processed) or self.processed[done] != key:
            raise ValueError(f"{key!r} is not the next item waiting for its {step}")
        return None if done + 1 == len(self.processed) else done + 1


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
    record.mapped = _count(rec, "mapped", len(record.processed))
    record.map_skipped = [(str(k), str(r)) for k, r in rec.get("map_skipped", [])]
    record.prompted = _count(rec, "prompted", len(record.processed))
    record.legacy_maps = record.mapped is not None and "prompted" not in rec
    record.prompt_skipped = [(str(k), str(r)) for k, r in rec.get("prompt_skipped", [])]
    return record


def _count(rec: Any, name: str, processed: int) -> int | None:
    """A recorded count of the first processed items (None: absent, or all of them)."""
    value = rec.get(name)
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= processed:
        raise ValueError(f"{name} {value!r} is not a count of the processed items")
    return None if value == processed else value


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
        if rec.prompted is not None or rec.mapped is not None:  # with maps pending: never a legacy record
            entry["prompted"] = rec.prompts_done
        if rec.prompt_skipped:
            entry["prompt_skipped"] = [list(s) for s in rec.prompt_skipped]
        sources[sid] = entry
    return {"format": JOURNAL_FORMAT, "sources": sources}
