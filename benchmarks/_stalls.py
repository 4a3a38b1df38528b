"""Where the UI thread's time goes during a run: the event loop's stalls and the handler of each.

Two instruments, both on the GUI thread only:

* a ping :class:`~PySide6.QtCore.QTimer` every ``PING_MS``: a gap between two pings is a stall of
  the event loop (what a user scrolling or marking images waits), noted with the rows the run had
  made by then;
* :func:`probing_application`, a ``QApplication`` whose ``notify`` times every event the GUI
  thread dispatches at the top level and names it by its receiver (a queued call to a controller
  handler is named after the handler: ``app.shell.wiring`` names its receivers so) and the
  event's type (``Paint``, ``MetaCall``, ``Timer``, ``UpdateRequest`` for a repaint of the window).
  Each event's wall time comes with the GUI thread's own CPU time in it: on a busy machine the
  difference is time the thread waited for a CPU or for the interpreter (the engine's thread
  holds it between its own calls), not work of the window's.

:func:`stall_report` joins the two: each long gap with the longest event dispatched inside it.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

PING_MS = 10
NOTED_MS = 1.0  # events shorter than this are not kept


@dataclass
class Gap:
    """One gap between two pings: when it ended (perf_counter s), how long it was, the rows by then."""

    end: float
    ms: float
    rows: int


@dataclass
class Event:
    """One top-level event the GUI thread dispatched: when it began, how long it took (wall and
    the thread's CPU time), its name."""

    start: float
    ms: float
    name: str
    cpu_ms: float = 0.0


@dataclass
class Recording:
    """What the instruments saw during one run (see the module notes)."""

    gaps: list[Gap] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "gaps": [(g.end, g.ms, g.rows) for g in self.gaps],
            "events": [(e.start, e.ms, e.name, e.cpu_ms) for e in self.events],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recording:
        return cls([Gap(*g) for g in data["gaps"]], [Event(*e) for e in data["events"]])


def probing_application(recording: Recording) -> Any:
    """A ``QApplication`` that times the GUI thread's top-level events into ``recording``."""
    from PySide6.QtWidgets import QApplication

    gui = threading.get_ident()

    class ProbingApplication(QApplication):
        depth = 0

        def notify(self, receiver: Any, event: Any) -> bool:
            if threading.get_ident() != gui:
                return bool(super().notify(receiver, event))
            ProbingApplication.depth += 1
            start, cpu = time.perf_counter(), time.thread_time()
            kind = event.type()  # read before dispatch: the handler may delete the event
            try:
                return bool(super().notify(receiver, event))
            finally:
                ProbingApplication.depth -= 1
                ms = (time.perf_counter() - start) * 1000.0
                if ProbingApplication.depth == 0 and ms >= NOTED_MS:
                    cpu_ms = (time.thread_time() - cpu) * 1000.0
                    recording.events.append(Event(start, ms, f"{_name(receiver)} {kind.name}", cpu_ms))

    return ProbingApplication([])


def _name(receiver: Any) -> str:
    try:
        return str(receiver.objectName()) or type(receiver).__name__
    except RuntimeError:  # deleted by its own event (an animation that ended)
        return "(deleted)"


class Pinger:
    """Pings the GUI event loop every ``PING_MS`` into ``recording`` (``rows()``: the rows so far)."""

    def __init__(self, recording: Recording, rows: Any) -> None:
        from PySide6.QtCore import QTimer

        self.recording, self.rows = recording, rows
        self.last = time.perf_counter()
        self.timer = QTimer()
        self.timer.setInterval(PING_MS)
        self.timer.timeout.connect(self.ping)

    def start(self) -> None:
        self.last = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def ping(self) -> None:
        now = time.perf_counter()
        self.recording.gaps.append(Gap(now, (now - self.last) * 1000.0, int(self.rows())))
        self.last = now


def cause(recording: Recording, gap: Gap) -> str:
    """The longest event dispatched inside ``gap`` (or what the gap holds when none was noted)."""
    begin = gap.end - gap.ms / 1000.0
    inside = [e for e in recording.events if begin - 1e-4 <= e.start < gap.end]
    if not inside:
        return "no event over 1 ms (the thread waited for the interpreter or the system)"
    top = max(inside, key=lambda e: e.ms)
    more = f", +{len(inside) - 1} more" if len(inside) > 1 else ""
    return f"{top.name} {top.ms:.1f} ms ({top.cpu_ms:.1f} ms of it the GUI thread's CPU time{more})"


def longest(recording: Recording, count: int = 3, rows: tuple[int, int] | None = None) -> list[Gap]:
    """The ``count`` longest gaps, those while the run had made ``rows`` = (low, high] rows only."""
    gaps = recording.gaps if rows is None else [g for g in recording.gaps if rows[0] < g.rows <= rows[1]]
    return sorted(gaps, key=lambda g: -g.ms)[:count]


def busiest(recording: Recording, gaps: list[Gap]) -> Event | None:
    """The event with the most GUI-thread CPU time inside any of ``gaps`` (the window's own work,
    whatever the machine's load made of the wall time)."""
    inside = [e for g in gaps for e in recording.events if g.end - g.ms / 1000.0 - 1e-4 <= e.start < g.end]
    return max(inside, key=lambda e: e.cpu_ms, default=None)


def stall_report(recording: Recording, count: int = 3) -> list[str]:
    """One line for each of the ``count`` longest stalls: length, rows by then, and its cause."""
    return [f"{g.ms:.1f} ms at {g.rows} rows: {cause(recording, g)}" for g in longest(recording, count)]


def handler_table(recording: Recording, count: int = 12) -> list[str]:
    """The events by name, longest first: how many, the longest, the total (the debug option)."""
    by_name: dict[str, list[Event]] = defaultdict(list)
    for e in recording.events:
        by_name[e.name].append(e)
    ranked = sorted(by_name.items(), key=lambda kv: -max(e.ms for e in kv[1]))[:count]
    return [
        f"{name}: {len(v)} over {NOTED_MS:g} ms, longest {max(e.ms for e in v):.1f} "
        f"(CPU {max(e.cpu_ms for e in v):.1f}), total {sum(e.ms for e in v):.0f} ms "
        f"(CPU {sum(e.cpu_ms for e in v):.0f})"
        for name, v in ranked
    ]
