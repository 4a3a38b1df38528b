"""The cohort window: a cohort's sites with their progress and status, its run in the background,
and each site opened for review in the main window.

File ▸ Open cohort… (or ``f2tta-studio --cohort COHORT``) opens one :class:`CohortWindow` per cohort
folder beside the main window. The list is read from the cohort's record
(:mod:`app.core.cohort_sites`) and read again whenever the record changes (``f2tta run`` rewrites it
as sites finish, at most every 2 s). **Run / Resume** starts ``f2tta run`` on the cohort in a
separate process (:class:`QProcess`), so the window never waits for it; **Stop** asks it to stop
as Ctrl-C does (each site keeps what it saved; Resume continues). Another process running the
cohort refuses the run with its own message, shown here. **Open for review** (or a double click)
asks the main window to open that site's state as a project (``cohortSiteRequested``).
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEvent, QProcess, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.core.cohort_sites import (
    Cohort,
    CohortSite,
    CohortSiteRequest,
    RecordedRun,
    finished_line,
    read_cohort,
    record_stamp,
    recorded_run,
    run_arguments,
    shown_output,
    write_manifest,
)
from app.views.window_base import WindowBase

logger = logging.getLogger(__name__)

COLUMNS = ("Site", "Kind", "Images", "Processed", "Skipped", "Status", "Decided by", "Review")
#: How often the record's time stamp is looked at (it is read again only when it changed).
POLL_MS = 1000
#: How long closing the window waits for a stopped run to save before it ends it.
STOP_WAIT_MS = 30_000
MODEL_FILTER = "Models (*.safetensors *.pt *.pth);;All files (*)"


class CohortWindow(QDialog):
    """One cohort's sites (see the module notes).

    Args:
        directory: the cohort's state folder.
        parent: the main window (its ``cohortSiteRequested`` opens a site); None in tests.
        fallback: the model, method and options to run with when the cohort records none (its
            sites never ran; the Model… button chooses the model otherwise).
    """

    def __init__(
        self, directory: Path, parent: WindowBase | None = None, fallback: RecordedRun | None = None
    ) -> None:
        # A window of its own (not a dialog kept above the main window), so the main window comes
        # to the front for the review of a site; it closes with the main window.
        super().__init__(parent, Qt.WindowType.Window)
        self.main = parent
        self.setWindowTitle(f"Cohort {directory.name}")
        self.resize(1100, 520)
        self.cohort = Cohort(directory)
        self.run_info = RecordedRun()
        self._fallback = fallback or RecordedRun()
        self._chosen: Path | None = None  # the model chosen here (Model…)
        self._stamp: tuple[int, int] | None = None
        self._temp: str | None = None
        self._output: list[str] = []
        self.requests: list[CohortSiteRequest] = []  # what was asked of the main window (tests)
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.readyReadStandardOutput.connect(self._read_output)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(self._failed_to_start)
        self._build()
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop_and_wait)
        self.refresh(force=True)

    # -- layout ----------------------------------------------------------------------------------
    def _build(self) -> None:
        self.heading = QLabel()
        self.heading.setTextFormat(Qt.TextFormat.PlainText)
        self.heading.setWordWrap(True)
        self.problem = QLabel()
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.hide()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.table.doubleClicked.connect(lambda _index: self.open_selected())
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.state_line = QLabel()
        self.state_line.setTextFormat(Qt.TextFormat.PlainText)
        self.state_line.setWordWrap(True)
        self.output = QPlainTextEdit()
        self.output.setReadOnly(True)
        self.output.setMaximumBlockCount(400)
        self.output.setFixedHeight(90)
        self.output.setPlaceholderText("Messages of the cohort's run appear here.")
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop after the current images; every site keeps what it saved")
        self.stop_button.clicked.connect(self.stop)
        self.model_button = QPushButton("Model…")
        self.model_button.setToolTip("Choose the model to run the cohort with")
        self.model_button.clicked.connect(self.choose_model)
        self.open_button = QPushButton("Open for review")
        self.open_button.setToolTip(
            "Open this site in the main window: its images, review queue (Q) and certificates"
        )
        self.open_button.clicked.connect(self.open_selected)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        for button in (self.run_button, self.stop_button, self.model_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.open_button)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        for widget in (self.heading, self.problem, self.table, self.state_line, self.output):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.setStretch(2, 1)

    # -- the list --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process.state() != QProcess.ProcessState.NotRunning

    def refresh(self, force: bool = False) -> None:
        """Read the cohort again when its record changed (``force``: in any case). A record that
        cannot be read is named; the sites last read stay listed."""
        stamp = record_stamp(self.cohort.directory)
        if not force and stamp == self._stamp:
            return
        self._stamp = stamp
        cohort = read_cohort(self.cohort.directory)
        if cohort.problem:
            self.problem.setText(cohort.problem)
            self.problem.show()
            if self.cohort.sites:  # keep what was shown, with the old record's output folder
                cohort.sites, cohort.records, cohort.out = (
                    self.cohort.sites,
                    self.cohort.records,
                    self.cohort.out,
                )
        else:
            self.problem.hide()
        self.cohort = cohort
        if not cohort.problem:
            self.run_info = recorded_run(cohort)
        self._fill(cohort.sites)
        self._update_buttons()

    def _fill(self, sites: list[CohortSite]) -> None:
        selected = self.selected_site()
        self.table.setRowCount(len(sites))
        for row, site in enumerate(sites):
            counts = (
                (f"{site.images:,}", f"{site.processed:,}", f"{site.skipped:,}") if site.ran else ("–",) * 3
            )
            cells = (site.name, site.kind, *counts, site.status, site.decided_by, site.review)
            tip = "\n".join(t for t in (str(site.path), site.why, site.adapting, site.review) if t)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                if 2 <= column <= 4:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
            if selected is not None and site.name == selected.name:
                self.table.selectRow(row)
        if selected is None and sites:
            self.table.selectRow(0)
        where = f"Cohort folder: {self.cohort.directory}"
        if self.cohort.out is not None:
            where += f"\nReports and summary: {self.cohort.out}"
        self.heading.setText(where)

    def site_names(self) -> list[str]:
        return [s.name for s in self.cohort.sites]

    def row_texts(self, name: str) -> dict[str, str]:
        """The listed cells of site ``name`` by column title (for tests and checks)."""
        row = self.site_names().index(name)
        items = [self.table.item(row, c) for c in range(len(COLUMNS))]
        return {title: item.text() if item else "" for title, item in zip(COLUMNS, items, strict=True)}

    def selected_site(self) -> CohortSite | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or rows[0].row() >= len(self.cohort.sites):
            return None
        return self.cohort.sites[rows[0].row()]

    def _update_buttons(self) -> None:
        usable = not self.cohort.problem and self.cohort.out is not None
        started = any(s.processed or s.status != "Not run yet" for s in self.cohort.sites)
        self.run_button.setText("Resume" if started else "Run")
        self.run_button.setEnabled(usable and not self.running)
        self.stop_button.setEnabled(self.running)
        self.model_button.setEnabled(not self.running)
        self.open_button.setEnabled(self.selected_site() is not None)
        model = self._run_model()
        if self.running:
            text = "Running in the background; the list follows as sites finish."
        elif model is not None:
            text = f"{self.cohort.summary()} Runs with the model {model.name} ({model.parent})."
        else:
            text = f"{self.cohort.summary()} {self.run_info.note}"
        self.state_line.setText(text)

    def _run_model(self) -> Path | None:
        return self._chosen or self.run_info.model or self._fallback.model

    # -- running ---------------------------------------------------------------------------------
    def choose_model(self) -> None:
        current = self._run_model()
        start = str(current.parent) if current is not None else ""
        path, _ = QFileDialog.getOpenFileName(self, "The model to run the cohort with", start, MODEL_FILTER)
        if path:
            self._chosen = Path(path)
            self._update_buttons()

    def start(self) -> None:
        """Start (or resume) the cohort's run in a separate process; the list follows it."""
        if self.running:
            self._say("The cohort is running already.")
            return
        model = self._run_model()
        if model is None:
            self._say(self.run_info.note or "Choose the model to run the cohort with (Model…).")
            return
        if self.cohort.problem or self.cohort.out is None:
            self._say(
                self.cohort.problem or "The cohort records no output folder; it cannot be run from here."
            )
            return
        self._cleanup()
        self._temp = tempfile.mkdtemp(prefix="f2tta-cohort-")
        manifest = Path(self._temp) / "sites.csv"
        self._output = []
        self.output.clear()
        names, missing = write_manifest(self.cohort, manifest)
        if missing:
            more = " …" if len(missing) > 5 else ""
            self._say(f"Not found, left as they are: {', '.join(missing[:5])}{more}")
        if not names:
            self._say("There is no site to run.")
            self._cleanup()
            return
        run = self.run_info
        if run.model is None and not run.method:  # nothing recorded: what this window was given
            run = replace(run, method=self._fallback.method, options=run.options or self._fallback.options)
        argv = run_arguments(self.cohort, manifest, run, model)
        if all(site.finished for site in self.cohort.sites):
            what = "every site is done: only images added since are processed"
        else:
            what = f"{len(names)} unfinished site(s) of {len(self.cohort.sites)}"
        self._say(f"Started: {what}, one after another.")
        self.process.start(sys.executable, ["-m", "engine.cli", *argv])
        self._update_buttons()

    def stop(self) -> None:
        """Ask the run to stop after its current images (as Ctrl-C); a second Stop ends it at once."""
        if not self.running:
            return
        if self.stop_button.text() == "Stop":
            self.stop_button.setText("Stop now")
            self._say("Stopping after the current images…")
            self.process.terminate()
        else:
            self.process.kill()

    def stop_and_wait(self) -> None:
        """Stop the run and wait for it to save (the app quits, or this window closes)."""
        if self.running:
            self.process.terminate()
            if not self.process.waitForFinished(STOP_WAIT_MS):
                self.process.kill()
                self.process.waitForFinished(5000)

    def _read_output(self) -> None:
        text = bytes(self.process.readAllStandardOutput().data()).decode("utf-8", "replace")
        for line in text.splitlines():
            logger.debug("f2tta run: %s", line)
            shown = shown_output(line)
            if shown:
                self._say(shown)

    def _say(self, line: str) -> None:
        self._output.append(line)
        self.output.appendPlainText(line)

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self._read_output()
        self._say(finished_line(code, status == QProcess.ExitStatus.CrashExit))
        self.stop_button.setText("Stop")
        self._cleanup()
        self.refresh(force=True)

    def _failed_to_start(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._say(f"The run could not be started: {self.process.errorString()}")
            self._cleanup()
            self._update_buttons()

    def _cleanup(self) -> None:
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    def messages(self) -> list[str]:
        """What the window said about its runs (for tests and checks)."""
        return list(self._output)

    # -- review ----------------------------------------------------------------------------------
    def open_selected(self) -> None:
        """Open the selected site in the main window for review."""
        site = self.selected_site()
        if site is None:
            return
        if not site.state.is_dir():
            self._say(f"{site.name} has not been run yet: there is nothing to review.")
            return
        run = self.run_info
        request = CohortSiteRequest(
            site.name, site.state, site.path, self._run_model(), run.method, dict(run.method_config)
        )
        self.requests.append(request)
        if self.main is not None:
            self.main.cohortSiteRequested.emit(request)
            self.main.raise_()
            self.main.activateWindow()

    def changeEvent(self, event: QEvent) -> None:
        """Coming back to the window reads the sites again (a site reviewed in the main window)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.ActivationChange and self.isActiveWindow():
            self.refresh(force=True)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.timer.stop()
        self.stop_and_wait()
        self._cleanup()
        super().closeEvent(event)


def open_cohort_window(w: WindowBase, directory: Path | None = None) -> CohortWindow | None:
    """Show the cohort in ``directory`` (None: ask for its folder) beside the main window ``w``; a
    cohort shown already is brought to the front."""
    if directory is None:
        chosen = QFileDialog.getExistingDirectory(
            w, "Open a cohort's folder", w.start_folders.get("folder", "")
        )
        if not chosen:
            return None
        directory = Path(chosen)
    directory = directory.expanduser().resolve()
    for child in w.findChildren(CohortWindow):
        if child.cohort.directory == directory:
            child.showNormal()
            child.raise_()
            child.activateWindow()
            return child
    window = CohortWindow(directory, w)
    window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    window.show()
    return window
