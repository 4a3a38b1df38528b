"""The engine worker's part of an export, in steps that can be stopped (Qt-free).

An export stages the tables (CSV, JSON, reviews, GeoJSON) and reads the gallery's images here, on
the worker's thread; the PDF follows on the GUI thread in steps of its own
(:class:`app.reports.pdf.PdfRender`, driven by :class:`app.shell.pdf_job.PdfJob`), and the set is
committed only then (:mod:`app.reports.export`). Between steps the export says how far it is and
looks at its stop flag: a cancelled export takes back what it staged, and the folder is as it was.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from app._engine import F2TTAError
from app.core.overlay import composite
from app.reports.data import side_by_side
from app.reports.export import discard, prepare, stage
from app.reports.files import (
    REPORT_KINDS,
    ExampleImage,
    GalleryItem,
    ReportData,
    StagedReports,
    report_failure,
    tabular_reports,
)

logger = logging.getLogger(__name__)

GALLERY_OPACITY = 0.4


class ExportCancelled(Exception):
    """The user stopped the export; what it staged was taken back."""


class TabularExport:
    """The tables staged and the gallery made into images, step by step (see the module notes).

    Args:
        directory: the export folder.
        data: what the reports say (gathered on the UI thread).
        read_preview: reads the preview of a stream position the UI no longer holds.
        stop: set (from any thread) to cancel the export between two steps.

    After :meth:`steps` is exhausted, :attr:`staged` names the files staged and :attr:`data` has its
    gallery complete.
    """

    def __init__(
        self,
        directory: Path,
        data: ReportData,
        read_preview: Callable[[int], np.ndarray | None],
        stop: threading.Event,
    ) -> None:
        self.directory, self.data, self._read, self._stop = directory, data, read_preview, stop
        self.staged: StagedReports | None = None

    def steps(self) -> Iterator[tuple[str, int, int]]:
        """``(what, done, total)`` after each image and each file.

        Raises:
            ExportCancelled: the stop flag was set (nothing is left staged).
            OSError: the folder or a file cannot be written (nothing is left staged).
        """
        gallery = self.data.gallery
        examples: list[ExampleImage] = []
        for done, item in enumerate(gallery, 1):
            self._check()
            example = self._example(item)
            if example is not None:
                examples.append(example)
            yield "Reading the report's images", done, len(gallery)
        if examples:
            self.data = dataclasses.replace(self.data, examples=tuple(examples))
        self._check()
        prepare(self.directory, REPORT_KINDS)
        files = tabular_reports(self.data)
        names: list[str] = []
        try:
            for done, (name, content) in enumerate(files, 1):
                self._check()
                stage(self.directory, name, content)
                names.append(name)
                yield f"Writing {name}", done, len(files)
            self._check()
        except BaseException:
            discard(self.directory)
            raise
        self.staged = StagedReports(self.directory, tuple(names), self.data.remove)

    def run(self, progress: Callable[[str, int, int], object]) -> str:
        """Every step, each announced to ``progress``: "" once done (:attr:`staged` set) or
        cancelled (:attr:`staged` None), else what to tell the user (nothing left staged)."""
        try:
            for step in self.steps():
                progress(*step)
        except ExportCancelled:
            return ""
        except Exception as exc:  # the scripted mode waits for one of the answers
            return report_failure(exc, self.directory)
        return ""

    def _check(self) -> None:
        if self._stop.is_set():
            raise ExportCancelled

    def _example(self, item: GalleryItem) -> ExampleImage | None:
        """A gallery case as an image with its overlay beside it (None: its image cannot be read)."""
        preview = item.preview
        if preview is None:
            try:
                preview = self._read(item.row.position)
            except (F2TTAError, OSError) as exc:
                logger.warning("%s is left out of the report's gallery: %s", item.row.name, exc)
                return None
        if preview is None:
            return None
        rgb = side_by_side(preview, composite(preview, item.overlay, opacity=GALLERY_OPACITY))
        return ExampleImage(item.caption[0], rgb, item.caption[1:], item.group, item.overlay is not None)
