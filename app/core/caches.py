"""Bounded memory for the UI: the image cache and the throttle on repeated messages (Qt-free)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np


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
