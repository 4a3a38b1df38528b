"""The collapse guard: notice when adaptation drives every prediction into one class.

A literal I-DiPT run can drift until it predicts one class for every image (``docs/method.md``). The guard
watches a sliding window of (adapted, source) predictions. When one class takes at least
``adapted_share`` of the adapted predictions while the source model gave that class to at most
``source_share`` of the same images, it first asks the method to forget its image-specific state
(:meth:`TTAMethod.recover`); if the collapse comes back within two windows, it resets the method to
the source model. Each action is logged and recorded as an event for reports.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from engine.config import setting


@dataclass(frozen=True)
class GuardConfig:
    """When the collapse guard steps in."""

    enabled: bool = setting(True, "watch for collapse at all")
    window: int = setting(100, "images in the sliding window", low=1, high=100_000)
    adapted_share: float = setting(
        0.95, "share of adapted predictions in one class that means collapse", low=0.0, high=1.0
    )
    source_share: float = setting(
        0.75, "...if the source model gave that class at most this share", low=0.0, high=1.0
    )


@dataclass(frozen=True)
class GuardEvent:
    index: int  # arrival index of the image after which the guard acted
    action: str  # "recover" or "reset"
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "action": self.action, "message": self.message}


class CollapseGuard:
    """Sliding-window detector; :meth:`observe` returns "recover", "reset" or None."""

    def __init__(self, config: GuardConfig, num_classes: int) -> None:
        self.config = config
        self.num_classes = num_classes
        self.window: deque[tuple[int, int]] = deque(maxlen=config.window)
        self.last_action_index: int | None = None

    def observe(self, index: int, adapted: int, source: int) -> str | None:
        cfg = self.config
        if not cfg.enabled:
            return None
        self.window.append((adapted, source))
        if len(self.window) < cfg.window:
            return None
        counts = [0] * self.num_classes
        for a, _ in self.window:
            counts[a] += 1
        top = max(range(self.num_classes), key=counts.__getitem__)
        source_top = sum(1 for _, s in self.window if s == top)
        n = len(self.window)
        if counts[top] < cfg.adapted_share * n or source_top > cfg.source_share * n:
            return None
        recent = self.last_action_index is not None and index - self.last_action_index <= 2 * cfg.window
        self.last_action_index = index
        self.window.clear()
        return "reset" if recent else "recover"

    def describe(self, index: int, adapted_class: str, action: str, what: str) -> GuardEvent:
        cfg = self.config
        return GuardEvent(
            index,
            action,
            f"collapse guard after {index + 1} images: {cfg.adapted_share:.0%}+ of the last {cfg.window} adapted "
            f"predictions were '{adapted_class}' while the source model disagreed; {what}",
        )

    def state(self) -> dict[str, Any]:
        return {"window": [list(p) for p in self.window], "last_action_index": self.last_action_index}

    def load(self, data: dict[str, Any]) -> None:
        self.window = deque(((int(a), int(s)) for a, s in data.get("window", [])), maxlen=self.config.window)
        last = data.get("last_action_index")
        self.last_action_index = None if last is None else int(last)
