"""Cyclic garbage is collected on the GUI thread only (app/runtime/collector.py), never on the engine's thread."""

from __future__ import annotations

import gc
import threading
from typing import ClassVar

from app.runtime.collector import GuiThreadCollector


class _Cycle:
    """A reference cycle that records which thread freed it."""

    freed_on: ClassVar[list[str]] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _Cycle.freed_on.append(threading.current_thread().name)


def _churn_on_a_worker_thread() -> list[list[object]]:
    """What the engine's thread does: make cycles, then allocate far past the collection thresholds."""
    kept: list[list[object]] = []

    def churn() -> None:
        for _ in range(20):
            _Cycle()
        kept.extend([] for _ in range(20_000))

    worker = threading.Thread(target=churn, name="engine")
    worker.start()
    worker.join()
    return kept


def test_without_the_collector_cpython_collects_on_the_worker_thread() -> None:
    """The hazard the collector removes (and proof that the test below can see it)."""
    gc.collect()
    _Cycle.freed_on.clear()
    assert gc.isenabled()
    _churn_on_a_worker_thread()
    assert "engine" in _Cycle.freed_on


def test_cycles_wait_for_the_gui_thread_and_collection_is_given_back(qtbot: object) -> None:
    was_enabled = gc.isenabled()
    gc.collect()
    _Cycle.freed_on.clear()
    collector = GuiThreadCollector(interval_ms=10_000)  # the test calls it; the timer stays out of the way
    try:
        assert not gc.isenabled()
        kept = _churn_on_a_worker_thread()
        assert _Cycle.freed_on == [], "a collection ran on the engine's thread"
        assert gc.get_count()[0] > collector.thresholds[0]
        assert collector.collect_due() >= 0
        assert _Cycle.freed_on and set(_Cycle.freed_on) == {threading.current_thread().name}
        del kept
    finally:
        collector.stop()
        collector.deleteLater()
    assert gc.isenabled() == was_enabled
