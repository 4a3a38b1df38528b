"""The stream loop's map phase: the decided items read again, in arrival order, for their map step.

:func:`map_phase` runs inside :meth:`engine.run.stream.StreamRun.outcomes` once the decisions are
recorded (maps behind) or before them (earlier pending maps, maps inline). The items go through
the same bounded reader as the decisions (a few batches read ahead, never the whole slide kept
decoded) and the same batches: ``batch`` readable items a step, so the maps are the ones the
inline step gives. Each map is appended to the journal as the item's row with its map (the last
copy of a row is the one read back) and yields :class:`~engine.run.outcomes.Mapped`; an item that
cannot be read again keeps its decision and yields :class:`~engine.run.outcomes.MapSkipped`, its
row saying ``unreadable``; so does a picture whose file changed since its decision (the content
fingerprint recorded with the decision, :func:`same_picture`): a map is never made from another
picture than the one decided. A failure of the map step ends the run as a failed decision step does
(the map is made again by the next run); saves, pauses and stops fall between batches.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import numpy as np

from engine.errors import ImageReadError
from engine.io.content import same_content
from engine.io.sources import StreamItem
from engine.run.journal import Journal
from engine.run.maps import map_batch, with_map
from engine.run.outcomes import Failed, Mapped, MapSkipped, Outcome, RunSummary, Saved
from engine.run.reading import Decoded, read_ahead, skip_for
from engine.run.rows import MAP_PENDING, MAP_UNREADABLE, PredictionRow
from engine.run.session import Session

logger = logging.getLogger(__name__)


T = TypeVar("T")


class StreamRun(Protocol):
    """What the map phase uses of :class:`engine.run.stream.StreamRun`."""

    session: Session
    journal: Journal | None
    source_id: str
    summary: RunSummary
    readers: int
    read_ahead: int
    map_queue: deque[tuple[StreamItem, PredictionRow]]
    missing: set[str]

    def read(self, item: StreamItem) -> Decoded: ...
    def gather(self, decoded: Iterator[tuple[StreamItem, Decoded]]) -> list[tuple[StreamItem, Decoded]]: ...
    def batched(
        self,
        call: Callable[[list[np.ndarray], list[str | None]], list[T]],
        pixels: list[np.ndarray],
        sites: list[str | None],
    ) -> tuple[list[T], Exception | None]: ...
    def record(self, item: StreamItem, write: Callable[..., None], *args: Any) -> Saved | None: ...
    def fail(self, item: StreamItem, failure: Exception) -> Failed: ...
    def ended_by_request(self) -> bool: ...
    def between_batches(self) -> Iterator[Outcome]: ...


class GoneError(LookupError):
    """A decided item that is no longer in its source (a file removed since it was decided)."""


def map_phase(run: StreamRun) -> Iterator[Outcome]:
    """The map step of every item in ``run.map_queue``, in order (see the module notes)."""
    queue = run.map_queue
    if not queue or run.ended_by_request():
        return
    rows = {item.key: row for item, row in queue}
    items = [item for item, _ in queue]

    def read(item: StreamItem) -> Decoded:
        return GoneError("no longer in the source") if item.key in run.missing else run.read(item)

    decoded = read_ahead(items, read, run.readers, run.read_ahead)
    try:
        while not run.ended_by_request():
            chunk = [(item, same_picture(item, d, rows[item.key])) for item, d in run.gather(decoded)]
            if not chunk:
                break
            pixels = [d[1] for _, d in chunk if not isinstance(d, Exception)]
            readable = [i for i, (_, d) in enumerate(chunk) if not isinstance(d, Exception)]
            maps, failure = run.batched(lambda p, _: map_batch(run.session, p), pixels, [None] * len(pixels))
            cut = len(chunk) if failure is None else readable[len(maps)]
            results = iter(maps)
            for item, d in chunk[:cut]:
                queue.popleft()
                row = rows.pop(item.key)
                if isinstance(d, Exception):
                    reason = skip_for(item, d).reason
                    skipped = _unreadable(row)
                    error = run.record(item, _add, run, skipped, reason)
                    if error is not None:
                        yield error
                        return
                    logger.warning("%s: no uncertainty map (%s); its decision is kept", item.name, reason)
                    run.summary.maps_skipped += 1
                    yield MapSkipped(item, skipped, reason)
                    continue
                result = next(results)
                mapped = with_map(row, result)
                error = run.record(item, _add, run, mapped, None)
                if error is not None:
                    yield error
                    return
                run.summary.mapped += 1
                yield Mapped(item, mapped, result, d[0])
            if failure is not None:
                yield run.fail(chunk[cut][0], failure)
                return
            yield from run.between_batches()
    finally:
        decoded.close()


def same_picture(item: StreamItem, decoded: Decoded, row: PredictionRow) -> Decoded:
    """``decoded``, or why it cannot have the map of ``row``: the file was replaced or changed since
    its decision (their content fingerprints differ), so a map made now would be of another picture
    than the one decided."""
    if isinstance(decoded, Exception) or not row.content or not decoded.content:
        return decoded
    if same_content(row.content, decoded.content):
        return decoded
    reason = (
        "the file changed since its decision (replaced or rewritten): its decision is of the picture as it "
        "was then, and no map is made from the new one"
    )
    return ImageReadError(f"{item.name}: {reason}", reason=reason)


def _unreadable(row: PredictionRow) -> PredictionRow:
    return replace(row, map_status=MAP_UNREADABLE)


def _add(run: StreamRun, row: PredictionRow, unreadable: str | None) -> None:
    if run.journal is not None:
        run.journal.add_map(run.source_id, row, unreadable)


def queue_pending_maps(run: StreamRun, journal: Journal, items: Sequence[StreamItem]) -> None:
    """Queue the decided items an earlier run left without their map, with their rows."""
    keys = journal.source(run.source_id).pending_maps()
    if not keys:
        return
    by_key = {item.key: item for item in items}
    rows = {row.key: row for row in journal.rows(run.source_id) if row.map_status == MAP_PENDING}
    for key in keys:
        row = rows[key]
        item = by_key.get(key)
        if item is None:  # no longer in the source: its map step finds nothing to read
            run.missing.add(key)
            item = StreamItem(row.position, key, row.name)
        run.map_queue.append((item, row))
