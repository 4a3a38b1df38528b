"""The engine worker's thread-safe controls: set from the UI thread, seen by the worker between
images and between an export's steps (a queued request would wait for the image under way)."""

from __future__ import annotations

import threading


class RunControls:
    """Pause, stop, an export's cancel and I-DiPT's decisions asked for, as flags (part of :class:`~app.worker.engine_worker.EngineWorker`)."""

    def __init__(self) -> None:
        self._pause = threading.Event()
        self._stop = threading.Event()
        self._export_stop = threading.Event()
        self._prompted = threading.Event()

    def request_prompted(self) -> None:
        """The open source's review reached I-DiPT's candidate: its prompted decisions are made
        behind the maps, in the run going on and the next ones (until another source is opened)."""
        self._prompted.set()

    def request_pause(self) -> None:
        """The run pauses after its current image."""
        self._pause.set()

    def request_stop(self) -> None:
        """The run stops after its current image (and saves)."""
        self._stop.set()

    def request_export_cancel(self, cancel: bool = True) -> None:
        """The export stops before its next step and takes back what it staged (``cancel`` False:
        arm it for the next export, before that is queued)."""
        (self._export_stop.set if cancel else self._export_stop.clear)()
