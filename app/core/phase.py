"""The phase machine behind the buttons: which actions a run's phase allows (Qt-free)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Phase(enum.Enum):
    """Where the app is; decides which actions are enabled."""

    EMPTY = "no model"  # no session yet (loading, or the model failed)
    LOADING = "loading"  # a model, project or source is being opened
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


def export_tip(phase: Phase, allowed: bool, exporting: bool = False) -> str:
    """What the Export button says about itself: what it does, or why it is greyed (it was greyed
    during a run with no word of why, although a pause allows it)."""
    if exporting:
        return "Reports are being written (Cancel in the status bar)"
    if allowed:
        return "Export reports of the images processed so far (Ctrl+E)"
    if phase in (Phase.RUNNING, Phase.PAUSING, Phase.STOPPING):
        return "Export is possible while the run is paused (Pause, F6) or once it has ended"
    return "Nothing to export yet: open a folder or slide and process it (Start, F5)"


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
