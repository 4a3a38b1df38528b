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


def prompted_left(rows: Iterable[PredictionRow]) -> int:
    """How many of ``rows`` wait for I-DiPT's prompted decision (made when a review reaches them)."""
    return sum(row.prompted_status == MAP_PENDING for row in rows)


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
        self.prompted_total = self.prompted_pending = 0  # I-DiPT's decisions asked for, still to come
        self._prompt_times: deque[float] = deque(maxlen=MAPS_WINDOW + 1)
        for row in rows:  # rows of earlier runs (a run stopped before its maps were done)
            self.total += 1
            self.pending += row.map_status == MAP_PENDING

    def add(self, batch: Iterable[ItemResult]) -> None:
        for result in batch:
            waiting = result.row.map_status == MAP_PENDING
            if result.prompted_only:  # I-DiPT's decision of an image mapped before
                self.prompted_pending = max(self.prompted_pending - 1, 0)
                self._prompt_times.append(self._clock())
                continue
            if result.map_only:
                self.pending -= 1
                self._times.append(self._clock())
            else:
                self.total += 1
                self.pending += waiting

    def ask_prompted(self, images: int) -> None:
        """I-DiPT's decisions were asked for (the review reached them): the ``images`` whose decisions
        are still to come are counted after the maps (``the adapted network's decisions: 40 of 160``)."""
        self.prompted_total = self.prompted_pending = images
        self._prompt_times.clear()

    def remaining(self) -> float:
        """Seconds until every waiting map (then every prompted decision asked for) is made, at
        their recent rate (nan: not known yet)."""
        pending, times = (
            (self.pending, self._times) if self.pending > 0 else (self.prompted_pending, self._prompt_times)
        )
        if pending <= 0:
            return 0.0
        if len(times) < 2 or times[-1] <= times[0]:
            return math.nan
        rate = (len(times) - 1) / (times[-1] - times[0])
        return pending / rate

    def text(self) -> str:
        """Empty when no image waits for its map nor for a prompted decision asked for."""
        if self.pending > 0:
            text = f"maps: {self.total - self.pending:,} of {self.total:,}"
        elif self.prompted_pending > 0:
            made = self.prompted_total - self.prompted_pending
            text = f"the adapted network's decisions: {made:,} of {self.prompted_total:,}"
        else:
            return ""
        return text.replace(",", "\u2009")
