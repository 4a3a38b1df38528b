"""Maps that arrive behind the decisions (the engine's maps-behind mode): each replaces its image's
row (the same decision, now with its uncertainty and I-DiPT's prompted decision) and brings the
overlay, so the table, the image view and the slide map show which images have their map yet."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from app._engine import MAP_PENDING, PredictionRow
from app.core.messages import ItemResult
from app.core.overlay import Overlay, widen_levels
from app.core.review_desk import ReviewDesk


class MapsHolder(Protocol):
    """What :func:`apply_maps` updates of :class:`app.core.run_model.RunModel`."""

    raw_rows: list[PredictionRow]
    rows: list[PredictionRow]
    selected: int | None
    overlays: dict[int, Overlay]
    heat_levels: tuple[float, float] | None
    desk: ReviewDesk

    def row_index(self, position: int) -> int | None: ...
    def effective(self, row: PredictionRow) -> PredictionRow: ...
    def select(self, position: int, keep_view: bool = False) -> None: ...


MAPS_WINDOW = 50  # maps the maps' rate is measured over


def apply_maps(model: MapsHolder, results: Sequence[ItemResult]) -> list[int]:
    """Put each map's row and overlay in place; the indices of the rows that changed."""
    changed = []
    for result in results:
        index = model.row_index(result.row.position)
        if index is None:
            continue
        model.raw_rows[index] = result.row
        model.rows[index] = model.effective(result.row)
        model.overlays[result.row.position] = result.overlay
        model.heat_levels = widen_levels(model.heat_levels, result.overlay)
        changed.append(index)
    model.desk.add_rows([r.row for r in results])  # the review's rows: I-DiPT's prompted decisions
    if model.selected is not None and model.selected in {r.row.position for r in results}:
        model.select(model.selected, keep_view=True)  # its overlay arrived
    return changed


def waiting(rows: Iterable[PredictionRow]) -> int:
    """How many of ``rows`` wait for their map (a run still has work when only maps are left)."""
    return sum(row.map_status == MAP_PENDING for row in rows)


class MapsCount:
    """How many of a run's images have their map yet (the status bar's ``maps: 1 200 of 20 000``),
    and the maps' own rate over their last :data:`MAPS_WINDOW` (their time left).

    Args:
        rows: rows of earlier runs (some maybe without their map yet).
        clock: seconds clock (injected by tests).
    """

    def __init__(
        self, rows: Iterable[PredictionRow] = (), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._times: deque[float] = deque(maxlen=MAPS_WINDOW + 1)  # when the last maps came
        self.total = self.pending = 0
        for row in rows:  # rows of earlier runs (a run stopped before its maps were done)
            self.total += 1
            self.pending += row.map_status == MAP_PENDING

    def add(self, batch: Iterable[ItemResult]) -> None:
        for result in batch:
            waiting = result.row.map_status == MAP_PENDING
            if result.map_only:
                self.pending -= 1
                self._times.append(self._clock())
            else:
                self.total += 1
                self.pending += waiting

    def remaining(self) -> float:
        """Seconds until every waiting map is made, at the maps' recent rate (nan: not known yet)."""
        if self.pending <= 0:
            return 0.0
        if len(self._times) < 2 or self._times[-1] <= self._times[0]:
            return math.nan
        rate = (len(self._times) - 1) / (self._times[-1] - self._times[0])
        return self.pending / rate

    def text(self) -> str:
        """Empty when no image waits for its map."""
        if self.pending <= 0:
            return ""
        return f"maps: {self.total - self.pending:,} of {self.total:,}".replace(",", "\u2009")
