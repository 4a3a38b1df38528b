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
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from engine.errors import F2TTAError
from engine.io.sources import StreamItem
from engine.run.batch import is_out_of_memory
from engine.run.journal import Journal
from engine.run.reading import (
    Picture,
    Reader,
    Skipped,
    TileReader,
    read_ahead,
    read_item,
    skip_for,
    tile_reader,
)
from engine.run.rows import PredictionRow, make_row
from engine.run.session import Session
from engine.run.step import StepResult

logger = logging.getLogger(__name__)

__all__ = [
    "Failed",
    "Outcome",
    "Paused",
    "Picture",
    "Predicted",
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


@dataclass(frozen=True)
class Predicted:
    """An item the model adapted to; its row is in the journal (durable at the next save)."""

    item: StreamItem
    row: PredictionRow
    step: StepResult
    image: Picture  # what the model was given (for previews)


@dataclass(frozen=True)
class Failed:
    """The model step failed on ``item``: the run ends here and the item is retried next time."""

    item: StreamItem
    message: str


@dataclass(frozen=True)
class Saved:
    """A save of the state after ``images_seen`` images; ``error`` says why it failed (the run ends)."""

    images_seen: int
    error: str | None = None
    final: bool = False  # the save at the end of the run


@dataclass(frozen=True)
class Paused:
    """The run paused after the last item, as asked; pulling again continues it."""


Outcome = Predicted | Skipped | Failed | Saved | Paused


@dataclass
class RunSummary:
    """What a run did, for the caller's report and exit code."""

    total: int  # items in the source
    done_before: int  # items the journal accounted for at the start (processed or skipped for good)
    processed: int = 0  # items predicted in this run
    skipped: list[Skipped] = field(default_factory=list)  # this run's skips, transient ones included
    failure: Failed | None = None  # the model step failed (the run ended early)
    save_error: str | None = None  # the state could not be saved (the run ended early)
    stopped: bool = False  # a stop was asked for before the end
    saved: bool = False  # the last save succeeded

    @property
    def failed(self) -> bool:
        return self.failure is not None or self.save_error is not None

    @property
    def remaining(self) -> int:
        """Items neither processed nor skipped for good, after this run."""
        permanent = sum(not s.transient for s in self.skipped)
        return self.total - self.done_before - self.processed - permanent


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
            model's pixels, so that memory stays small whatever the files' size.
        on_row: called with each new row before the outcome is yielded (CSV outputs).
        on_skip: called with each skip before the outcome is yielded.
        arrival: the arrival order and seed of ``items`` (a folder's ``order`` and ``seed``),
            recorded in the journal so a later run continues in the same order.
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
        keep_images: bool = True,
        on_row: Callable[[PredictionRow], None] | None = None,
        on_skip: Callable[[Skipped], None] | None = None,
        arrival: tuple[str, int] | None = None,
    ) -> None:
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

    # -- the loop -------------------------------------------------------------------------------
    def outcomes(self) -> Iterator[Outcome]:
        """The outcome of every pending item, in order, then a final :class:`Saved` (with a journal)."""
        since_save = 0
        decoded = read_ahead(self.pending, self._read, self.readers, self.read_ahead)
        try:
            while True:
                if self._stop.is_set():
                    self.summary.stopped = True
                    break
                chunk = self._gather(decoded)
                if not chunk:
                    break
                readable = [i for i, (_, d) in enumerate(chunk) if not isinstance(d, Exception)]
                pixels = [d[1] for _, d in chunk if not isinstance(d, Exception)]
                sites = [self.site_of(item) for item, d in chunk if not isinstance(d, Exception)]
                steps, failure = self._step(pixels, sites)
                # Up to the image whose step failed (it and what follows are read again next run).
                cut = len(chunk) if failure is None else readable[len(steps)]
                results = iter(steps)
                for item, d in chunk[:cut]:
                    if isinstance(d, Exception):
                        skip = skip_for(item, d)
                        self._record_skip(skip)
                        yield skip
                        continue
                    step = next(results)
                    row = make_row(item, step, self.session.card.classes, self.positive_class)
                    try:
                        if self.journal is not None:
                            self.journal.add_row(self.source_id, row)
                        if self.on_row is not None:
                            self.on_row(row)
                    except OSError as exc:
                        # The state already counts this image but its row is not on disk: saving now
                        # would make the journal disagree with itself, so the last saved state stays.
                        self.summary.save_error = (
                            f"{item.name}: its row cannot be written ({exc.strerror or exc})"
                        )
                        yield Saved(self.session.images_seen, self.summary.save_error)
                        return
                    self.summary.processed += 1
                    since_save += 1
                    yield Predicted(item, row, step, d[0])
                if failure is not None:
                    item = chunk[cut][0]
                    logger.debug("step failed on %s", item.name, exc_info=failure)
                    self.summary.failure = Failed(item, _step_message(item, failure))
                    yield self.summary.failure
                    break
                if self.journal is not None and self.save_every and since_save >= self.save_every:
                    since_save = 0
                    saved = self._save()
                    yield saved
                    if saved.error is not None:
                        return
                if self._pause.is_set() and not self._stop.is_set():
                    self._pause.clear()
                    yield Paused()
        finally:
            decoded.close()
            if isinstance(self.reader, TileReader):
                self.reader.close()
        if self.journal is not None:
            yield self._save(final=True)

    def site_of(self, item: StreamItem) -> str | None:
        """The site an item belongs to: its own when it names one, else its source (a folder or a
        slide is one site); None for a source without identity (the benchmark's free-form streams)."""
        if item.site is not None:
            return item.site
        return self.source_id or None

    def _gather(
        self, decoded: Iterator[tuple[StreamItem, tuple[Picture, np.ndarray] | Exception]]
    ) -> list[tuple[StreamItem, tuple[Picture, np.ndarray] | Exception]]:
        """The next items in order, up to ``batch`` readable ones (and the unreadable among them)."""
        chunk: list[tuple[StreamItem, tuple[Picture, np.ndarray] | Exception]] = []
        readable = 0
        for item, d in decoded:
            chunk.append((item, d))
            readable += not isinstance(d, Exception)
            if readable >= self.batch:
                break
        return chunk

    def _step(
        self, pixels: list[np.ndarray], sites: list[str | None]
    ) -> tuple[list[StepResult], Exception | None]:
        """Step ``pixels`` in batches of at most :attr:`batch`; the results, and what stopped them.

        A batch that runs out of memory while its state was kept aside is undone and tried again
        at half the size (the smaller size stays); any other failure ends the stepping there.
        """
        results: list[StepResult] = []
        start = 0
        while start < len(pixels):
            size = min(self.batch, len(pixels) - start)
            kept = self._snapshot() if size > 1 and self._steps_at.get(size, 0) < _TRIAL_STEPS else None
            try:
                results += self.session.step_batch(pixels[start : start + size], sites[start : start + size])
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

    def _save(self, final: bool = False) -> Saved:
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

    def _read(self, item: StreamItem) -> tuple[Picture, np.ndarray] | Exception:
        """The item as read and as the model's pixels (on a reading thread), or why it cannot be."""
        try:
            picture = self.reader(item)
            pixels = self.session.prepare(picture)
        except Exception as exc:  # every failure of reading becomes a skip (see skip_for)
            return exc
        return (picture if self.keep_images else pixels), pixels


def _step_message(item: StreamItem, exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        what = "ran out of memory while adapting"
    else:
        what = f"the model step failed ({type(exc).__name__}{': ' + text[:300] if text else ''})"
    return (
        f"{item.name}: {what}; the run stopped after the last good image and the state was kept. "
        "The image is tried again by the next run"
    )
