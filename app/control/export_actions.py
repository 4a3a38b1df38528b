"""Exports as the controller runs them (part of the controller, Qt-free).

An export gathers what the reports say from the run model (:mod:`app.reports.data`), asks before
it replaces reports that are not this project's own of this folder or slide
(:mod:`app.reports.ownership`), and hands the rest to the worker's side: the tables and images on
the engine worker's thread, the PDF on the UI thread in steps, the set committed at the end. While
it goes on the window shows its progress with a Cancel that leaves the folder as it was.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from app._engine import shown as shown_name
from app.control.status import ControllerContext
from app.core import advice
from app.reports.data import collect_report_data
from app.reports.files import ReportData, report_files
from app.reports.ownership import replace_question, reports_in

logger = logging.getLogger(__name__)


class ExportActions:
    """Exports and their answers (see the module notes).

    Args:
        ctx: what the controller's parts share.
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.exporting: Path | None = None  # the folder of the export under way

    def export(self, directory: str | Path, ask: bool = True) -> None:
        """Write every report kind into ``directory``.

        Args:
            directory: the folder.
            ask: a folder holding reports that are not this project's own of the open source is
                replaced only when the user says so; False (a scripted export: nobody to ask):
                it is refused.
        """
        ctx, directory = self.ctx, Path(directory)
        if self.exporting is not None:
            ctx.status.log("warning", f"An export to {shown_name(self.exporting)} is under way; wait for it.")
            return
        try:
            data = self.report_data()
        except Exception as exc:  # a report must never leave a scripted run waiting forever
            logger.exception("collecting the report data failed")
            self.on_export_failed(f"Reports cannot be prepared: {type(exc).__name__}: {exc}")
            return
        if data is None:
            self.on_export_failed("Nothing to export: open images and process them first.")
            return
        found = reports_in(directory)
        info = ctx.state.info
        project = info.project.name if info is not None else ""
        project_id = info.project.project_id if info is not None else None
        writes = tuple(report_files(data))
        if found is not None and found.owned_by(project, data.source_path, project_id):
            data = dataclasses.replace(data, remove=tuple(n for n in found.written if n not in writes))
        elif found is not None:
            question = replace_question(directory, found, writes)
            if not ask:
                first = question.split("\n")[0]
                self.on_export_failed(f"{first} They are not replaced; choose another folder.")
                return
            if not ctx.view.confirm("Replace reports?", question):
                text = f"Nothing exported: the reports in {shown_name(directory)} are as they were."
                ctx.status.log("info", text)
                ctx.view.show_status(text)  # where the user acted, not only in the Log
                ctx.events.export_error.emit("cancelled")
                return
        self.exporting = directory
        ctx.view.show_export_progress("Preparing the reports", 0, 0)
        ctx.status.log("info", f"Exporting reports to {shown_name(directory)} …")
        ctx.worker.export_reports(directory, data)

    def report_data(self) -> ReportData | None:
        """What the reports need, read from the run model and the session (None: no rows yet)."""
        ctx = self.ctx
        return collect_report_data(ctx.model, ctx.state, ctx.view.plot_png)

    def cancel(self) -> None:
        """Stop the export under way (the folder stays as it was)."""
        if self.exporting is not None:
            self.ctx.view.show_export_progress("Cancelling …", 0, 0)
            self.ctx.worker.cancel_export()

    def on_export_progress(self, what: str, done: int, total: int) -> None:
        if self.exporting is not None:
            self.ctx.view.show_export_progress(what, done, total)

    def on_reports_written(self, paths: list[Path]) -> None:
        """Every report file is in place (the PDF was the last, written on the UI thread)."""
        ctx, self.exporting = self.ctx, None
        ctx.view.hide_export_progress()
        ctx.status.log("info", "Reports written: " + ", ".join(shown_name(p) for p in paths))
        ctx.view.show_banner(advice.exported(str(paths[0].parent), [p.name for p in paths]))
        ctx.worker.note_reports(paths[0].parent)  # the project's list names where its reports are
        ctx.view.set_start_folder("export", str(paths[0].parent))
        ctx.events.export_finished.emit(paths)

    def on_export_failed(self, message: str) -> None:
        ctx, self.exporting = self.ctx, None
        ctx.view.hide_export_progress()
        ctx.status.log("error", message)
        ctx.view.show_banner(advice.export_failed(message))
        ctx.events.export_error.emit(message)

    def on_export_cancelled(self) -> None:
        ctx, directory, self.exporting = self.ctx, self.exporting, None
        ctx.view.hide_export_progress()
        where = shown_name(directory) if directory is not None else "the folder"
        text = f"Export cancelled: nothing in {where} was changed."
        ctx.status.log("info", text)
        ctx.view.show_status(text)  # where the user acted, not only in the Log
        ctx.events.export_error.emit("cancelled")
