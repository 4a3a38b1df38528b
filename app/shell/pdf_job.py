"""The PDF of an export, written on the GUI thread a step at a time between its events.

The engine worker stages the tables and reads the gallery (:mod:`app.worker.exporting`); the PDF's
text layout must stay on the GUI thread (:class:`app.reports.pdf.PdfRender`). Written in one go it
froze the window for minutes on a large report (issue 27): :class:`PdfJob` runs the render's steps
from a zero-time timer for at most :data:`STEP_BUDGET_S` each turn of the event loop, so the
window repaints and answers throughout, and a cancel between two steps takes back everything the
export staged (the folder is as it was).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from PySide6.QtCore import QObject, QTimer, Signal

from app.reports.files import ReportData, StagedReports
from app.reports.pdf import PdfRender, commit_pdf, fail_export

logger = logging.getLogger(__name__)

STEP_BUDGET_S = 0.02  # the longest the job holds the event loop at a time (a step may take longer)


class PdfJob(QObject):
    """Writes the PDF of one export at a time, in steps (see the module notes).

    Signals:
        progress(str, int, int): what is being done, how far, out of how much.
        finished(object): every report file is in place (list of paths).
        failed(str): the reports could not be written (nothing changed in the folder).
        cancelled(): the export was cancelled (nothing changed in the folder).
    """

    progress = Signal(str, int, int)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setObjectName("pdf-job")
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._step)
        self._render: PdfRender | None = None
        self._steps: Iterator[tuple[str, int, int]] | None = None
        self._staged: StagedReports | None = None
        self._cancel_next = False  # cancelled before the worker handed over the tables

    @property
    def running(self) -> bool:
        return self._steps is not None

    def expect(self) -> None:
        """An export begins (a cancel from now on applies to it)."""
        self._cancel_next = False

    def start(self, staged: StagedReports, data: ReportData) -> None:
        """Render the PDF of ``data`` and commit it with the tables ``staged``."""
        if self.running:  # one export at a time: the controller does not start a second
            self._abandon()
        if self._cancel_next:  # cancelled while the worker was finishing the tables
            self._cancel_next = False
            fail_export(staged, None)
            self.cancelled.emit()
            return
        self._staged, self._render = staged, PdfRender(data)
        self._steps = self._render.steps()
        self._timer.start()

    def cancel(self) -> None:
        """Stop before the next step and take back what the export staged."""
        if self._staged is None:
            self._cancel_next = True  # the tables may still be on their way
            return
        staged = self._staged
        self._abandon()
        fail_export(staged, None)
        self.cancelled.emit()

    def _step(self) -> None:
        steps, staged = self._steps, self._staged
        if steps is None or staged is None:
            self._timer.stop()
            return
        deadline = time.monotonic() + STEP_BUDGET_S
        try:
            while True:  # at least one step a turn, more while the budget lasts
                what, done, total = next(steps)
                self.progress.emit(what, done, total)
                if self._steps is not steps:  # cancelled from a progress handler: the render is closed
                    return
                if time.monotonic() >= deadline:
                    break
        except StopIteration:
            content = self._render.result if self._render is not None else b""
            self._finish()
            result = commit_pdf(staged, content)
            if isinstance(result, str):
                self.failed.emit(result)
            else:
                self.finished.emit(result)
        except Exception as exc:  # a report must never leave the window waiting
            logger.exception("rendering the PDF failed")
            self._abandon()
            self.failed.emit(fail_export(staged, exc))

    def _abandon(self) -> None:
        if self._render is not None:
            self._render.close()
        self._finish()

    def _finish(self) -> None:
        self._timer.stop()
        self._steps = self._render = self._staged = None
