"""The typed outcomes of the stream loop (:class:`engine.run.stream.StreamRun`) and its summary.

Each crosses from the engine to its callers (``f2tta run``, the app's worker, the benchmark), so
it holds only rows, results of Python scalars and numpy arrays, and pictures as read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.io.sources import StreamItem
from engine.run.maps import MapResult
from engine.run.reading import Picture, Skipped
from engine.run.rows import PredictionRow
from engine.run.step import StepResult


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


@dataclass(frozen=True)
class Mapped:
    """The uncertainty map of an item decided earlier (the map step behind the decisions); ``row``
    is its row with the map, already in the journal."""

    item: StreamItem
    row: PredictionRow
    map: MapResult
    image: Picture  # what the model was given (for previews)


@dataclass(frozen=True)
class MapSkipped:
    """An item decided earlier whose image could not be read again for its map: its decision is
    kept, it gets no map (``row`` says so)."""

    item: StreamItem
    row: PredictionRow
    reason: str


@dataclass(frozen=True)
class Prompted:
    """I-DiPT's prompted decision of an item mapped earlier (the prompt step, made when asked
    for); ``row`` is its row with it, already in the journal. ``reason``: why the image could not
    be read again for it (the row then says so and keeps its decision and map)."""

    item: StreamItem
    row: PredictionRow
    reason: str | None = None


Outcome = Predicted | Skipped | Failed | Saved | Paused | Mapped | MapSkipped | Prompted


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
    mapped: int = 0  # maps made in this run behind the decisions (Mapped outcomes)
    maps_skipped: int = 0  # decided items that could not be read again for their map
    maps_pending: int = 0  # decided items still waiting for their map after this run
    prompted: int = 0  # prompted decisions made in this run (Prompted outcomes, readable)
    prompts_pending: int = 0  # mapped items still waiting for their prompted decision (made when asked for)

    @property
    def failed(self) -> bool:
        return self.failure is not None or self.save_error is not None

    @property
    def remaining(self) -> int:
        """Items neither processed nor skipped for good, after this run."""
        permanent = sum(not s.transient for s in self.skipped)
        return self.total - self.done_before - self.processed - permanent

    @property
    def decided_all(self) -> bool:
        """Every item of the source is decided and mapped, or skipped for good: a review may take
        the site as complete (``SiteReview.complete``)."""
        return not (self.failed or self.stopped) and self.remaining == 0 and self.maps_pending == 0


def step_message(item: StreamItem, exc: Exception) -> str:
    """What a user reads when the model step failed on ``item``."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        what = "ran out of memory while adapting"
    else:
        what = f"the model step failed ({type(exc).__name__}{': ' + text[:300] if text else ''})"
    return (
        f"{item.name}: {what}; the run stopped after the last good image and the state was kept. "
        "The image is tried again by the next run"
    )
