"""Qt-free run state: the phase machine behind the buttons, progress and ETA, and the image cache."""

from __future__ import annotations

import enum
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.messages import RunEnded, SessionInfo
from app.profiles import ProfileInfo
from app.settings import AppSettings


class Phase(enum.Enum):
    """Where the app is; decides which actions are enabled."""

    EMPTY = "no model"  # no session yet (loading, or the model failed)
    LOADING = "loading"  # a model, profile or source is being opened
    READY = "ready"  # a session and a source with images left to process
    RUNNING = "running"
    PAUSING = "pausing"  # the current image finishes, then the run pauses
    PAUSED = "paused"
    STOPPING = "stopping"  # finishing the current image and saving the state
    DONE = "done"  # every image of the source has been processed (or nothing is open)


@dataclass(frozen=True)
class Actions:
    """Which user actions are possible in a phase."""

    open: bool
    start: bool
    pause: bool
    resume: bool
    stop: bool
    reset: bool
    export: bool
    settings: bool


def actions_for(phase: Phase, *, has_session: bool, pending: int, has_rows: bool) -> Actions:
    """The enabled actions.

    Args:
        phase: the current phase.
        has_session: a model is loaded.
        pending: images of the open source not processed yet.
        has_rows: the table has at least one row (something to export).
    """
    idle = phase in (Phase.READY, Phase.DONE, Phase.EMPTY)
    return Actions(
        open=idle and has_session,
        start=phase in (Phase.READY, Phase.DONE) and has_session and pending > 0,
        pause=phase is Phase.RUNNING,
        resume=phase is Phase.PAUSED,
        stop=phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED),
        reset=idle and has_session,
        export=phase in (Phase.READY, Phase.DONE, Phase.PAUSED) and has_rows,
        settings=idle,
    )


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

    def text(self) -> str:
        if not self.running:
            return f"{self.done} / {self.total}"
        rate = f"{self.rate:.2f} img/s" if math.isfinite(self.rate) else "-- img/s"
        return f"{self.done} / {self.total} · {rate} · {format_duration(self.remaining_s)} left"


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


class LruCache:
    """A small least-recently-used cache of preview images keyed by stream position."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[int, np.ndarray] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: int) -> np.ndarray | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: int, value: np.ndarray) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class MessageThrottle:
    """Lets a repeated message (numbers ignored) through once per ``interval`` seconds.

    Args:
        interval: seconds between two copies of the same message.
        clock: seconds clock (injected by tests).
    """

    def __init__(self, interval: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    @staticmethod
    def _key(message: str) -> str:
        return "".join("#" if ch.isdigit() else ch for ch in message)

    def admit(self, message: str, key: str | None = None) -> str | None:
        """The message to show (with a count of suppressed copies), or None to drop it.

        Args:
            message: the message.
            key: what counts as a repeat (default: the message with its digits ignored).
        """
        key, now = self._key(message) if key is None else key, self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._last[key] = now
        dropped = self._suppressed.pop(key, 0)
        return f"{message} ({dropped} similar messages not shown)" if dropped else message


@dataclass
class SessionState:
    """What the two controllers share about the open session (owned by the UI thread).

    Attributes:
        settings: the user's settings in force.
        home: the studio home (profiles, settings.json); None for the default.
        state_dir: a journal directory used instead of a profile (``f2tta-studio --state``).
        persist_settings: settings changed in the dialog are saved to disk.
        info: the loaded session, None while none is.
        latest_profile: the profile's listing as last saved.
        last_run: how the last run ended.
        images_seen: the session's live count (unsaved images included).
        errors: every error shown in this session (for the reports).
        phase: where the app is.
    """

    settings: AppSettings
    home: Path | None = None
    state_dir: Path | None = None
    persist_settings: bool = True
    info: SessionInfo | None = None
    latest_profile: ProfileInfo | None = None
    last_run: RunEnded | None = None
    images_seen: int = 0
    errors: list[str] = field(default_factory=list)
    phase: Phase = Phase.EMPTY

    def adopt(self, info: SessionInfo) -> None:
        """A session (re)loaded or reset: its counts replace the live ones."""
        self.info, self.latest_profile, self.images_seen, self.last_run = (
            info,
            info.profile,
            info.images_seen,
            None,
        )

    @property
    def usable(self) -> bool:
        """A session is loaded and its profile's state can be used."""
        return self.info is not None and not self.info.profile_error

    def profile_text(self) -> str:
        return "" if self.latest_profile is None else self.latest_profile.summary(self.images_seen)
