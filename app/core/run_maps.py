"""How many images wait for their map when maps arrive behind the decisions (the engine's
maps-behind mode), and how long they will take: the status bar's count and time left. Each map
replaces its image's row in :class:`~app.core.run_model.RunModel` (``_apply_maps``)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable

from app._engine import MAP_PENDING, PredictionRow
from app.core.messages import ItemResult

MAPS_WINDOW = 50  # maps the maps' rate is measured over


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
            if result.prompted_only:  # I-DiPT's decision of an image mapped before
                continue
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
