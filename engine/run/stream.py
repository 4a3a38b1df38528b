"""The one per-image loop: read, step, record, skip or fail, save — for the CLI, the app and the benchmark.

:class:`StreamRun` walks the items of a source that its journal has not seen yet and yields one
typed outcome per item: :class:`Predicted`, :class:`Skipped` or :class:`Failed`, plus
:class:`Saved` after each save and :class:`Paused` when a pause was asked for. ``f2tta run``
(:mod:`engine.run.runner`) iterates it to the end, the app's worker pulls one outcome per turn of
its event loop (a generator worker, as napari's ``thread_worker``), and the benchmark's jobs
iterate it without a journal.

The failure policy, the same for all of them:

* an item whose content cannot be read (corrupt, unsupported, too large) is skipped for good:
  the journal records it with the reason and it is not offered again;
* a transient read failure (the file vanished, permission denied, an I/O error, a file still
  being written) is skipped for this run only and tried again by the next;
* a failure of the model step (out of memory, a device error, a bug) is not the image's fault:
  the run ends with :class:`Failed`, the image is not recorded and the next run retries it;
* a state that cannot be saved ends the run as well (nothing more is done that could be lost).

The state is saved every ``save_every`` predictions and when the run ends for any reason.

**Batches.** With ``batch`` B > 1 the loop gathers B readable items and steps them in one call
(:meth:`Session.step_batch`); their outcomes, skips between them included, still come in arrival
order, each row appended before its outcome, and the state is only saved between batches, so a
kill anywhere loses nothing and repeats nothing (the journal's argument holds per row). A stop or
a pause takes effect after the current batch. A batch that runs out of memory while its step can
still be undone (the first steps at a batch size, whose state is kept aside in host memory) is
tried again at half the size, with a log line; the smaller size is kept for the rest of the run.

**Reading ahead.** Items are read and brought to the model's input size (:meth:`Session.prepare`)
on ``readers`` threads, ``read_ahead`` items ahead of the model (:func:`engine.run.reading.read_ahead`).

**Maps behind** (``maps="behind"``, methods that decide from the source pass): every pending item
is decided first (rows appended at decision speed, their map pending), then the decided items are
read again for their map step: through the same bounded reader as the decisions (a few batches read
ahead, never the whole slide kept decoded) and in the same batches, so the maps are the ones the
inline step gives. Each map is appended to the journal as the item's row with its map (the last
copy of a row is the one read back) and yields :class:`Mapped`; an item that cannot be read again
keeps its decision and yields :class:`MapSkipped`, its row saying ``unreadable``; so does a picture
whose file changed since its decision (the content fingerprint recorded with the decision,
:func:`same_picture`): a map is never made from another picture than the one decided. A failure of
the map step ends the run as a failed decision step does (the map is made again by the next run).
Maps an earlier run left pending are made before the decisions (inline) or after them (behind).

**The prompted decisions on demand** (``prompted``; a method with a prompt step, I-DiPT+'s
prompted candidate): with the maps behind, I-DiPT's prompt tuning is a step of its own behind the
maps, through the same reader and batches, yielding :class:`Prompted`; it runs in this run
(``"behind"``) or once :meth:`StreamRun.request_prompted` asks for it (``"on-demand"``: the review
reached that candidate). Left pending, the journal keeps them for a later run; inline, those an
earlier run left are made before any decision (``docs/method.md``, "The prompted decision on demand").
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import torch

from engine.errors import F2TTAError
from engine.io.sources import StreamItem
from engine.run.ahead import DecisionsAhead, chunks, looks_ahead
from engine.run.batch import is_out_of_memory
from engine.run.journal import Journal
from engine.run.maps import MapResult, map_batch, prompt_batch, with_map, with_prompted
from engine.run.outcomes import (
    Failed,
    Mapped,
    MapSkipped,
    Outcome,
    Paused,
    Predicted,
    Prompted,
    RunSummary,
    Saved,
    step_message,
)
from engine.run.reading import (
    Decoded,
    GoneError,
    Picture,
    Read,
    Reader,
    Skipped,
    TileReader,
    decode,
    read_ahead,
    read_item,
    same_picture,
    skip_for,
    tile_reader,
)
from engine.run.rows import MAP_UNREADABLE, PredictionRow, make_row, without_map
from engine.run.session import Session
from engine.run.step import StepResult

logger = logging.getLogger(__name__)

__all__ = [
    "MAPS",
    "Failed",
    "MapSkipped",
    "Mapped",
    "Outcome",
    "Paused",
    "Picture",
    "Predicted",
    "Prompted",
    "Reader",
    "RunSummary",
    "Saved",
    "Skipped",
    "StreamRun",
    "read_item",
    "skip_for",
    "tile_reader",
]

#: Steps at a batch size whose state is kept aside, so running out of memory can be undone.
_TRIAL_STEPS = 2
#: Where the uncertainty maps are made: with each decision, or behind all of them.
MAPS = ("behind", "inline")
#: When I-DiPT's prompted decisions are made, with the maps behind the decisions: behind the maps
#: in the same run, or only once asked for (:meth:`StreamRun.request_prompted`).
PROMPTED = ("behind", "on-demand")
T = TypeVar("T")


class StreamRun:
    """One run over the items of a source not yet in its journal.

    Args:
        session: the adapting session (its state restored from the journal already).
        items: the source's items in arrival order.
        reader: decodes an item (:func:`read_item`, a slide's :class:`TileReader`, the benchmark's);
            a :class:`TileReader` is closed when the run ends.
        source_id: the source's identity in the journal.
        journal: where rows and state go; None runs without saving (the benchmark).
        save_every: save after this many predictions (0: only at the end); saves fall between batches.
        positive_class: the class whose probability each row keeps.
        read_ahead: items decoded ahead of the model (0: each is read when the model needs it);
            None: three batches' worth, at least 4.
        readers: threads that read ahead (None: half the CPU cores, 1 to 8).
        batch: images per model step, at most the method's ``max_batch`` (1: the method's own
            per-image step).
        keep_images: :attr:`Predicted.image` is the picture as read (for previews); False: the
            model's pixels, so that memory stays small whatever the files' size; a number: the
            picture reduced to that longest side (what a preview needs) while it is read ahead.
        on_row: called with each new row before the outcome is yielded (CSV outputs).
        on_skip: called with each skip before the outcome is yielded.
        arrival: the arrival order and seed of ``items`` (a folder's ``order`` and ``seed``),
            recorded in the journal so a later run continues in the same order.
        maps: ``"behind"``: decisions first, the maps behind them (methods that decide from the
            source pass; the others step inline whatever this says); ``"inline"``: each image's
            decision and map in one step.
        prompted: with the maps behind, for a method with a prompt step (I-DiPT+'s prompted
            candidate): ``"behind"``: the prompt step behind the maps, in this run; ``"on-demand"``:
            only once :meth:`request_prompted` asks for it (the review reaching that candidate).
            Inline, the step makes it with the decision whatever this says.
    """

    def __init__(
        self,
        session: Session,
        items: Sequence[StreamItem],
        reader: Reader = read_item,
        *,
        source_id: str = "",
        journal: Journal | None = None,
        save_every: int = 50,
        positive_class: int | None = None,
        read_ahead: int | None = None,
        readers: int | None = None,
        batch: int = 1,
        keep_images: bool | int = True,
        on_row: Callable[[PredictionRow], None] | None = None,
        on_skip: Callable[[Skipped], None] | None = None,
        arrival: tuple[str, int] | None = None,
        maps: str = "inline",
        prompted: str = "behind",
    ) -> None:
        if maps not in MAPS:
            raise ValueError(f"maps must be one of {', '.join(MAPS)}, not {maps!r}")
        if prompted not in PROMPTED:
            raise ValueError(f"prompted must be one of {', '.join(PROMPTED)}, not {prompted!r}")
        self.session = session
        self.reader = reader
        self.source_id = source_id
        self.journal = journal
        self.save_every = save_every
        self.positive_class = session.card.positive_class if positive_class is None else positive_class
        limit = session.max_batch
        self.batch = max(1, batch if limit is None else min(batch, limit))
        self.read_ahead = max(4, 3 * self.batch) if read_ahead is None else read_ahead
        self.readers = max(1, min(8, (os.cpu_count() or 2) // 2)) if readers is None else readers
        self.keep_images = keep_images
        self.on_row, self.on_skip = on_row, on_skip
        done = journal.source(source_id).done() if journal is not None else set()
        if journal is not None and arrival is not None:
            journal.note_arrival(source_id, *arrival)
        self.pending = [item for item in items if item.key not in done]
        self.summary = RunSummary(total=len(items), done_before=len(items) - len(self.pending))
        method = session.method
        #: Decisions first (the decision step only), then the maps behind them.
        self.behind = maps == "behind" and method.decides_from_source_pass
        #: The next batch's decision pass runs on a worker thread while one is decided (engine.run.ahead).
        self.look_ahead = self.behind and looks_ahead(session)
        #: Decided items waiting for their map step, in arrival order, with their rows.
        self.map_queue: deque[tuple[StreamItem, PredictionRow]] = deque()
        self.missing: set[str] = set()  # keys of queued items no longer in the source
        #: The prompted decision comes from the prompt step, behind the maps (not with the decision).
        self.prompt_stage = self.behind and method.has_prompt_step()
        #: Mapped items waiting for their prompt step, in arrival order, with their rows.
        self.prompt_queue: deque[tuple[StreamItem, PredictionRow]] = deque()
        self._prompt_rows: dict[str, PredictionRow] = {}  # their rows as the maps left them
        self._prompts_wanted = threading.Event()
        if prompted == "behind":
            self._prompts_wanted.set()
        if journal is not None and method.has_prompt_step():
            journal.source(source_id).from_legacy_maps()
        if journal is not None and method.has_map_step:
            self._queue_pending_maps(journal, items)
        if journal is not None and method.has_prompt_step():
            self._queue_pending_prompts(journal, items)
        self._since_save = 0
        self._ended = False  # a failure or a save error ended the run (no further step)
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._steps_at: dict[int, int] = {}  # batch size -> steps that succeeded at it

    # -- hooks, safe to call from any thread ------------------------------------------------------
    def request_stop(self) -> None:
        """End after the current batch (saving the state)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_pause(self) -> None:
        """Yield :class:`Paused` after the current batch."""
        self._pause.set()

    def request_prompted(self) -> None:
        """Make the prompted decisions behind the maps in this run (``prompted="on-demand"``)."""
        self._prompts_wanted.set()

    # -- the loop -------------------------------------------------------------------------------
    def outcomes(self) -> Iterator[Outcome]:
        """The outcome of every pending item, in order, then a final :class:`Saved` (with a journal);
        maps behind: the decisions' outcomes, then a :class:`Mapped` or :class:`MapSkipped` each
        (maps an earlier run left pending: after the decisions, or before them when inline)."""
        try:
            if not self.behind:
                yield from self._maps()
                yield from self._prompts()  # an inline step makes the next image's: none may wait
            if not self._ended:
                yield from self._decisions()
            if self.behind and not self._ended:
                yield from self._maps()
            if self.behind and not self._ended and self._prompts_wanted.is_set():
                yield from self._prompts()
        finally:
            if isinstance(self.reader, TileReader):
                self.reader.close()
            self.summary.maps_pending = len(self.map_queue)
            self.summary.prompts_pending = len(self.prompt_queue)
        if self.journal is not None and self.summary.save_error is None:
            yield self.save(final=True)

    def _decisions(self) -> Iterator[Outcome]:
        """Read, step (or decide) and record the pending items in batches."""
        queue = self.session.method.has_map_step and self.behind

        def decided(item: StreamItem, read: Read, step: StepResult) -> Iterator[Outcome]:
            row = make_row(item, step, self.session.card.classes, self.positive_class, read.content)
            if queue:
                row = without_map(row, prompt_step=self.prompt_stage)
            if (error := self.record(item, self._add_row, row)) is not None:
                yield error
                return
            if queue:
                self.map_queue.append((item, row))
            if self.prompt_stage:
                self.prompt_queue.append((item, row))
                self._prompt_rows[item.key] = row
            self.summary.processed += 1
            yield Predicted(item, row, step, read.picture)

        def unreadable(item: StreamItem, exc: Exception) -> Iterator[Outcome]:
            skip = skip_for(item, exc)
            self._record_skip(skip)
            yield skip

        ahead = DecisionsAhead(self.session) if self.look_ahead and self.behind else None
        try:
            call, prime = (self._step, None) if ahead is None else (ahead, ahead.prime)
            yield from self._in_batches(
                self.pending, self.read, call, self.site_of, decided, unreadable, prime
            )
        finally:
            if ahead is not None:
                ahead.close()

    def _maps(self) -> Iterator[Outcome]:
        """The map step of every item in :attr:`map_queue`, in order (see the module notes)."""
        rows = {item.key: row for item, row in self.map_queue}

        def mapped(item: StreamItem, read: Read, result: MapResult) -> Iterator[Outcome]:
            row = with_map(rows.pop(item.key), result)
            if (error := self.record(item, self._add_map, row, None)) is not None:
                yield error
                return
            self._follow(row)
            self.summary.mapped += 1
            yield Mapped(item, row, result, read.picture)

        def lost(item: StreamItem, reason: str) -> Iterator[Outcome]:
            row = replace(rows.pop(item.key), map_status=MAP_UNREADABLE)
            if (error := self.record(item, self._add_map, row, reason)) is not None:
                yield error
                return
            self._follow(row)
            logger.warning("%s: no uncertainty map (%s); its decision is kept", item.name, reason)
            self.summary.maps_skipped += 1
            yield MapSkipped(item, row, reason)

        yield from self._behind(
            self.map_queue, lambda pixels, _: map_batch(self.session, pixels), mapped, lost
        )

    def _prompts(self) -> Iterator[Outcome]:
        """The prompt step of every item in :attr:`prompt_queue`, in order: I-DiPT's prompted
        decisions, made as the maps are (the same batches, the images read again)."""
        rows = self._prompt_rows

        def made(item: StreamItem, read: Read, result: MapResult) -> Iterator[Outcome]:
            row = with_prompted(rows.pop(item.key), result)
            if (error := self.record(item, self._add_prompted, row, None)) is not None:
                yield error
                return
            self.summary.prompted += 1
            yield Prompted(item, row)

        def lost(item: StreamItem, reason: str) -> Iterator[Outcome]:
            row = replace(rows.pop(item.key), prompted_status=MAP_UNREADABLE)
            if (error := self.record(item, self._add_prompted, row, reason)) is not None:
                yield error
                return
            logger.warning("%s: no prompted decision (%s); its decision is kept", item.name, reason)
            yield Prompted(item, row, reason)

        yield from self._behind(
            self.prompt_queue, lambda pixels, _: prompt_batch(self.session, pixels), made, lost
        )

    def _behind(
        self,
        queue: deque[tuple[StreamItem, PredictionRow]],
        call: Callable[[list[np.ndarray], list[str | None]], list[MapResult]],
        made: Callable[[StreamItem, Read, MapResult], Iterator[Outcome]],
        lost: Callable[[StreamItem, str], Iterator[Outcome]],
    ) -> Iterator[Outcome]:
        """``call`` (the map step or the prompt step) on the items of ``queue``, decided earlier and
        read again in order: ``made``'s outcomes for each, ``lost``'s for one that cannot be read
        again or whose file changed since its decision (each leaves the queue as it is done)."""
        if not queue or self.ended_by_request():
            return
        decided_content = {item.key: row.content for item, row in queue}  # read on the reading threads

        def read(item: StreamItem) -> Decoded:
            if item.key in self.missing:
                return GoneError("no longer in the source")
            return same_picture(item, self.read(item), decided_content[item.key])

        def each(item: StreamItem, read: Read, result: MapResult) -> Iterator[Outcome]:
            queue.popleft()
            yield from made(item, read, result)

        def unreadable(item: StreamItem, exc: Exception) -> Iterator[Outcome]:
            queue.popleft()
            yield from lost(item, skip_for(item, exc).reason)

        items = [item for item, _ in queue]
        yield from self._in_batches(items, read, call, lambda _: None, each, unreadable)

    def _follow(self, row: PredictionRow) -> None:
        """The row the prompt step will start from, when ``row``'s item waits for it."""
        if row.key in self._prompt_rows:
            self._prompt_rows[row.key] = row

    def _in_batches(
        self,
        items: Sequence[StreamItem],
        read: Callable[[StreamItem], Decoded],
        call: Callable[[list[np.ndarray], list[str | None]], list[T]],
        site_of: Callable[[StreamItem], str | None],
        each: Callable[[StreamItem, Read, T], Iterator[Outcome]],
        unreadable: Callable[[StreamItem, Exception], Iterator[Outcome]],
        prime: Callable[[list[tuple[StreamItem, Decoded]]], None] | None = None,
    ) -> Iterator[Outcome]:
        """``items`` read ahead on the reading threads, ``call`` on the readable ones' pixels a batch
        at a time, then in order ``each`` item's outcomes with its result (``unreadable``'s for one
        that could not be read); a save or a pause between batches. The run ends at a failed call
        (its item and those after it are read again by the next run) or a row that cannot be written.
        ``prime``: each chunk is handed to it before the chunk before it is stepped."""
        decoded = read_ahead(items, read, self.readers, self.read_ahead)
        taken = chunks(decoded, lambda: self.batch, prime)
        try:
            while not self.ended_by_request():
                chunk = next(taken, None)
                if not chunk:
                    break
                readable = [i for i, (_, d) in enumerate(chunk) if not isinstance(d, Exception)]
                pixels = [d.pixels for _, d in chunk if not isinstance(d, Exception)]
                sites = [site_of(item) for item, d in chunk if not isinstance(d, Exception)]
                results, failure = self.batched(call, pixels, sites)
                # Up to the item whose call failed (it and what follows are read again next run).
                cut = len(chunk) if failure is None else readable[len(results)]
                done = iter(results)
                for item, d in chunk[:cut]:
                    yield from unreadable(item, d) if isinstance(d, Exception) else each(item, d, next(done))
                    if self._ended:
                        return
                if failure is not None:
                    yield self.fail(chunk[cut][0], failure)
                    return
                yield from self.between_batches()
        finally:
            decoded.close()

    def _step(self, pixels: list[np.ndarray], sites: list[str | None]) -> list[StepResult]:
        if self.behind:
            return self.session.step_batch(pixels, sites, decisions_only=True)
        return self.session.step_batch(pixels, sites)

    def _add_row(self, row: PredictionRow) -> None:
        if self.journal is not None:
            self.journal.add_row(self.source_id, row)
        if self.on_row is not None:
            self.on_row(row)

    def _add_map(self, row: PredictionRow, unreadable: str | None) -> None:
        if self.journal is not None:
            self.journal.add_map(self.source_id, row, unreadable)

    def _add_prompted(self, row: PredictionRow, unreadable: str | None) -> None:
        if self.journal is not None:
            self.journal.add_prompted(self.source_id, row, unreadable)

    def _queue_pending_maps(self, journal: Journal, items: Sequence[StreamItem]) -> None:
        """Queue the decided items an earlier run left without their map, with their rows."""
        self.map_queue.extend(self._pending(journal, items, journal.source(self.source_id).pending_maps()))

    def _queue_pending_prompts(self, journal: Journal, items: Sequence[StreamItem]) -> None:
        """Queue the items an earlier run left without their prompted decision, with their rows."""
        pending = self._pending(journal, items, journal.source(self.source_id).pending_prompts())
        self.prompt_queue.extend(pending)
        self._prompt_rows.update((item.key, row) for item, row in pending)

    def _pending(
        self, journal: Journal, items: Sequence[StreamItem], keys: list[str]
    ) -> list[tuple[StreamItem, PredictionRow]]:
        """The items of ``keys`` (decided by an earlier run) with their rows, in order."""
        if not keys:
            return []
        by_key = {item.key: item for item in items}
        wanted = set(keys)
        rows = {row.key: row for row in journal.rows(self.source_id) if row.key in wanted}
        pending = []
        for key in keys:
            row = rows[key]
            item = by_key.get(key)
            if item is None:  # no longer in the source: its step finds nothing to read
                self.missing.add(key)
                item = StreamItem(row.position, key, row.name)
            pending.append((item, row))
        return pending

    def record(self, item: StreamItem, write: Callable[..., None], *args: Any) -> Saved | None:
        """``write(*args)`` (a row); a :class:`Saved` with the error that ends the run, if it fails."""
        try:
            write(*args)
        except OSError as exc:
            # The state already counts this image but its row is not on disk: saving now would
            # make the journal disagree with itself, so the last saved state stays.
            self.summary.save_error = f"{item.name}: its row cannot be written ({exc.strerror or exc})"
            self._ended = True
            return Saved(self.session.images_seen, self.summary.save_error)
        self._since_save += 1
        return None

    def fail(self, item: StreamItem, failure: Exception) -> Failed:
        """The run ends at ``item``, whose step failed (it is retried next run)."""
        logger.debug("step failed on %s", item.name, exc_info=failure)
        self.summary.failure = Failed(item, step_message(item, failure))
        self._ended = True
        return self.summary.failure

    def ended_by_request(self) -> bool:
        """Whether a stop was asked for (the run then ends before its next batch)."""
        if self._stop.is_set():
            self.summary.stopped = True
        return self.summary.stopped or self._ended

    def between_batches(self) -> Iterator[Outcome]:
        """A save when one is due, a pause when one was asked for."""
        if self.journal is not None and self.save_every and self._since_save >= self.save_every:
            self._since_save = 0
            saved = self.save()
            yield saved
            if saved.error is not None:
                self._ended = True
                return
        if self._pause.is_set() and not self._stop.is_set():
            self._pause.clear()
            yield Paused()

    def site_of(self, item: StreamItem) -> str | None:
        """The site an item belongs to: its own when it names one, else its source (a folder or a
        slide is one site); None for a source without identity (the benchmark's free-form streams)."""
        if item.site is not None:
            return item.site
        return self.source_id or None

    def batched(
        self,
        call: Callable[[list[np.ndarray], list[str | None]], list[T]],
        pixels: list[np.ndarray],
        sites: list[str | None],
    ) -> tuple[list[T], Exception | None]:
        """``call`` on ``pixels`` in batches of at most :attr:`batch`; the results, and what stopped them.

        A batch that runs out of memory while its state was kept aside is undone and tried again
        at half the size (the smaller size stays); any other failure ends the stepping there.
        """
        results: list[T] = []
        start = 0
        while start < len(pixels):
            size = min(self.batch, len(pixels) - start)
            kept = self._snapshot() if size > 1 and self._steps_at.get(size, 0) < _TRIAL_STEPS else None
            try:
                results += call(pixels[start : start + size], sites[start : start + size])
            except Exception as exc:  # the model, not the image: retried next run (or smaller)
                if kept is None or not is_out_of_memory(exc):
                    return results, exc
                self.session.restore(kept)
                del kept
                if self.session.device.type == "cuda":
                    torch.cuda.empty_cache()
                self.batch = max(1, size // 2)
                logger.warning(
                    "out of memory at a batch of %d images; going on with batches of %d", size, self.batch
                )
                continue
            self._steps_at[size] = self._steps_at.get(size, 0) + 1
            start += size
        return results, None

    def _snapshot(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """The method's state kept aside before a trial step, or None when it cannot be (no undo)."""
        try:
            return self.session.snapshot()
        except (MemoryError, RuntimeError) as exc:
            logger.warning(
                "the state cannot be kept aside before a batch (%s); a failure cannot be undone", exc
            )
            return None

    def _record_skip(self, skip: Skipped) -> None:
        self.summary.skipped.append(skip)
        if not skip.transient and self.journal is not None:
            self.journal.add_skip(self.source_id, skip.item.key, skip.reason)
        if self.on_skip is not None:
            self.on_skip(skip)

    def save(self, final: bool = False) -> Saved:
        seen = self.session.images_seen
        assert self.journal is not None
        try:
            self.journal.save(self.session)
        except (OSError, F2TTAError) as exc:
            self.summary.saved = False
            self.summary.save_error = f"the state cannot be written to {self.journal.directory}: {exc}"
            return Saved(seen, self.summary.save_error, final)
        self.summary.saved = True
        return Saved(seen, None, final)

    def read(self, item: StreamItem) -> Decoded:
        """The item as read and as the model's pixels (on a reading thread), or why it cannot be."""
        return decode(self.reader, self.session.prepare, item, self.keep_images)
