"""Progress and ETA of a run, as the status bar shows them (Qt-free)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


def format_duration(seconds: float) -> str:
    """``1:02:03``, ``2:03`` or ``--:--`` for unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    rate: float  # images per second over the recent window (nan before two images)
    remaining_s: float  # estimated seconds left (nan when unknown)

    running: bool = True  # rate and time left mean something only while a run goes
    maps: str = ""  # how many images have their map yet, while some wait (app.core.run_maps)
    maps_left_s: float = math.nan  # the maps' time left, from their own rate (nan: not known yet)

    def text(self) -> str:
        """The time left is never the decisions' alone while maps wait: the maps follow the
        decisions and took longer than them ("0:00 left" with every map still to make)."""
        maps = f" · {self.maps}" if self.maps else ""
        if self.maps and self.done >= self.total:  # every decision made: the maps are what goes on
            left = (
                f" · {format_duration(self.maps_left_s)} left"
                if self.running and math.isfinite(self.maps_left_s)
                else ""
            )
            return f"{self.maps}{left} · decisions: {self.done} / {self.total}"
        if not self.running:
            return f"{self.done} / {self.total}{maps}"
        rate = f"{self.rate:.2f} img/s" if math.isfinite(self.rate) else "-- img/s"
        left = f"{format_duration(self.remaining_s)} left" + (", then the maps" if maps else "")
        return f"{self.done} / {self.total} · {rate} · {left}{maps}"


class ProgressMeter:
    """Images per second over a sliding window of completions; pauses do not count.

    Args:
        window: number of recent completions the rate is measured over.
        clock: seconds clock (injected by tests).
    """

    def __init__(self, window: int = 50, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._times: deque[float] = deque(maxlen=window + 1)
        self._last_rate = math.nan  # shown while paused or done
        self.done = 0
        self.total = 0

    def start(self, done: int, total: int) -> None:
        """Begin (or resume) timing with ``done`` of ``total`` images processed."""
        self.done, self.total = done, total
        self._times.clear()
        self._times.append(self._clock())

    def pause(self) -> None:
        self._last_rate = self._rate()
        self._times.clear()

    def add(self, count: int = 1) -> None:
        now = self._clock()
        if not self._times:
            self._times.append(now)
        for _ in range(count):
            self._times.append(now)
        self.done += count

    def _rate(self) -> float:
        if len(self._times) >= 2:
            span = self._times[-1] - self._times[0]
            if span > 0:
                return (len(self._times) - 1) / span
        return self._last_rate

    def progress(self, running: bool = True) -> Progress:
        """Where the run stands; ``running`` False (before a start, paused, stopped) leaves out rate and ETA."""
        rate = self._rate()
        remaining = max(self.total - self.done, 0)
        eta = remaining / rate if math.isfinite(rate) and rate > 0 else (0.0 if remaining == 0 else math.nan)
        return Progress(self.done, self.total, rate, eta, running)
