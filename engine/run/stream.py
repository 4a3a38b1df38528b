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
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from engine.errors import F2TTAError, ImageReadError
from engine.io.slides import Slide, TilePlan
from engine.io.sources import StreamItem
from engine.run.journal import Journal
from engine.run.rows import PredictionRow, make_row
from engine.run.session import Session
from engine.run.step import StepResult

logger = logging.getLogger(__name__)

Picture = Image.Image | np.ndarray
Reader = Callable[[StreamItem], Picture]


@dataclass(frozen=True)
class Predicted:
    """An item the model adapted to; its row is in the journal (durable at the next save)."""

    item: StreamItem
    row: PredictionRow
    step: StepResult
    image: Picture  # what the model was given (for previews)


@dataclass(frozen=True)
class Skipped:
    """An item that could not be read; ``transient``: the next run tries it again."""

    item: StreamItem
    reason: str
    transient: bool = False


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


def read_item(item: StreamItem) -> Picture:
    """Read a folder item's file (slide tiles need the open slide: see :func:`tile_reader`)."""
    from engine.io.images import read_image

    if item.path is None:
        raise ValueError(f"{item.name}: no file to read")
    return read_image(item.path)


def tile_reader(slide: Slide, plan: TilePlan) -> Reader:
    """A reader of a slide source's tiles (the slide stays open while the run lasts)."""

    def read_tile(item: StreamItem) -> Picture:
        if item.tile is None:
            raise ValueError(f"{item.name}: not a tile")
        return slide.read_tile(plan, item.tile)

    return read_tile


def skip_for(item: StreamItem, exc: Exception) -> Skipped:
    """The skip an exception of reading means (see the module notes for the classes)."""
    if isinstance(exc, ImageReadError):
        reason = str(getattr(exc, "reason", "") or exc)
        return Skipped(item, reason, transient=bool(getattr(exc, "transient", False)))
    if isinstance(exc, OSError):  # the file system, not the content: try again next time
        return Skipped(item, f"cannot be read now ({exc.strerror or exc})", transient=True)
    if isinstance(exc, F2TTAError):
        return Skipped(item, str(exc), transient=bool(getattr(exc, "transient", False)))
    logger.debug("reading %s failed", item.name, exc_info=exc)
    return Skipped(item, f"unreadable ({type(exc).__name__}: {exc})")


class StreamRun:
    """One run over the items of a source not yet in its journal.

    Args:
        session: the adapting session (its state restored from the journal already).
        items: the source's items in arrival order.
        reader: decodes an item (:func:`read_item`, a slide's tile reader, the benchmark's).
        source_id: the source's identity in the journal.
        journal: where rows and state go; None runs without saving (the benchmark).
        save_every: save after this many predictions (0: only at the end).
        positive_class: the class whose probability each row keeps.
        read_ahead: items decoded ahead of the model on a helper thread (0: none).
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
        read_ahead: int = 0,
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
        self.read_ahead = read_ahead
        self.on_row, self.on_skip = on_row, on_skip
        done = journal.source(source_id).done() if journal is not None else set()
        if journal is not None and arrival is not None:
            journal.note_arrival(source_id, *arrival)
        self.pending = [item for item in items if item.key not in done]
        self.summary = RunSummary(total=len(items), done_before=len(items) - len(self.pending))
        self._stop = threading.Event()
        self._pause = threading.Event()

    # -- hooks, safe to call from any thread ------------------------------------------------------
    def request_stop(self) -> None:
        """End after the current item (saving the state)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_pause(self) -> None:
        """Yield :class:`Paused` after the current item."""
        self._pause.set()

    def site_of(self, item: StreamItem) -> str | None:
        """The site an item belongs to: its own when it names one, else its source (a folder or a
        slide is one site); None for a source without identity (the benchmark's free-form streams)."""
        if item.site is not None:
            return item.site
        return self.source_id or None

    # -- the loop -------------------------------------------------------------------------------
    def outcomes(self) -> Iterator[Outcome]:
        """The outcome of every pending item, in order, then a final :class:`Saved` (with a journal)."""
        since_save = 0
        for item, image in self._decoded():
            if self._stop.is_set():
                self.summary.stopped = True
                break
            if isinstance(image, Exception):
                skip = skip_for(item, image)
                self._record_skip(skip)
                yield skip
            else:
                try:
                    step = self.session.step(image, self.site_of(item))
                except Exception as exc:  # the model, not the image: end the run, retry next time
                    logger.debug("step failed on %s", item.name, exc_info=exc)
                    self.summary.failure = Failed(item, _step_message(item, exc))
                    yield self.summary.failure
                    break
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
                yield Predicted(item, row, step, image)
                if self.journal is not None and self.save_every and since_save >= self.save_every:
                    since_save = 0
                    saved = self._save()
                    yield saved
                    if saved.error is not None:
                        return
            if self._pause.is_set() and not self._stop.is_set():
                self._pause.clear()
                yield Paused()
        if self.journal is not None:
            yield self._save(final=True)

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

    def _decoded(self) -> Iterator[tuple[StreamItem, Picture | Exception]]:
        """Items with their decoded image (or the exception of reading), ``read_ahead`` ahead."""
        if self.read_ahead <= 0:
            for item in self.pending:
                yield item, self._read(item)
            return
        with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="f2tta-read") as pool:
            queue: deque[tuple[StreamItem, cf.Future[Picture | Exception]]] = deque()
            items = iter(self.pending)
            for item in items:
                queue.append((item, pool.submit(self._read, item)))
                if len(queue) >= self.read_ahead:
                    break
            try:
                while queue:
                    item, future = queue.popleft()
                    yield item, future.result()
                    following = next(items, None)
                    if following is not None:
                        queue.append((following, pool.submit(self._read, following)))
            finally:
                for _, future in queue:
                    future.cancel()

    def _read(self, item: StreamItem) -> Picture | Exception:
        try:
            return self.reader(item)
        except Exception as exc:  # every failure of reading becomes a skip (see skip_for)
            return exc


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
