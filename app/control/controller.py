"""The controller: joins the window, the engine worker and the Qt-free run model (a plain object).

It holds no results: they live in :class:`~app.core.run_model.RunModel`, whose notifiers it connects
to the window (a :class:`~app.control.view.View`); the engine work is asked of a
:class:`~app.control.requests.WorkerRequests` and its answers arrive at the ``on_worker_*`` methods.
This class starts, pauses and stops runs, paces the views (:meth:`Controller.tick`), exports
reports and keeps review marks; what is open (session, source, settings, selection) is its
:class:`~app.control.session_controller.SessionController`'s and the projects its
:class:`~app.control.project_actions.ProjectActions`'. Nothing here imports Qt: the thread, the
timer, the runtime guards and the signal wiring are :class:`app.shell.studio_app.StudioApp`'s, and
the tests drive this class with a fake window and a fake worker (``tests/test_controller_plain.py``).
Scripted use is :mod:`app.control.script`.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from app._engine import Certificate, SlideSource
from app.control.cohort_actions import CohortActions
from app.control.export_actions import ExportActions
from app.control.project_actions import ProjectActions
from app.control.requests import Ticker, WorkerRequests
from app.control.selection import SelectionController
from app.control.session_controller import SessionController
from app.control.status import RUNNING, TICKING, ControllerContext, ControllerEvents, Status
from app.control.view import View
from app.core import advice, notices
from app.core.applicability import Collapse, model_kind, model_wide
from app.core.caches import MessageThrottle
from app.core.filters import PredictionRow
from app.core.messages import ItemFailure, ItemResult, RegionRead, RegionRequest, RunEnded
from app.core.open_session import OpenSession
from app.core.phase import Phase
from app.core.projects import ProjectInfo
from app.core.run_maps import MapsCount, prompted_left
from app.core.run_model import RunModel
from app.core.settings import available_demos
from app.reports.files import ReportData

logger = logging.getLogger(__name__)


class Controller:
    """Connects a :class:`View` to the engine worker's requests and answers (see the module notes).

    Args:
        view: the window.
        worker: the requests to the engine worker.
        state: the open session's settings, home and state directory (owned by this controller).
        ticker: the timer that calls :meth:`tick` while a run goes on.

    Attributes:
        events: what it announces (a session loaded, a source opened, a run ended, reports written).
        sessions: the session, source, settings and selection part.
        projects: the project, settings-dialog, demo and banner-fix part.
    """

    def __init__(self, view: View, worker: WorkerRequests, state: OpenSession, ticker: Ticker) -> None:
        self.view, self.worker, self.state = view, worker, state
        self.model = RunModel(state.settings.low_confidence)
        self.events = ControllerEvents()
        self.status = Status(view, state, self.model, ticker)
        self.ctx = ControllerContext(view, worker, state, self.model, self.status, self.events)
        self.sessions = SessionController(self.ctx)
        self.projects = ProjectActions(self.ctx, self.sessions)
        self.exports = ExportActions(self.ctx)
        self.selection = SelectionController(self.ctx)
        self.cohorts = CohortActions(self.ctx, self.sessions)
        self._closing = False
        self._region_ticket = 0
        self._throttle = MessageThrottle()
        self._skip_throttle = MessageThrottle()  # a NaN storm must not flood the log
        self.maps = MapsCount()  # the run's images with their map yet (maps behind the decisions)
        self._prompted_for: str | None = None  # the source whose I-DiPT decisions were asked for
        self._prompted_waiting = False  # the review waits for them: the queue goes on once made
        self._watch_model()
        self.events.source_opened.connect(self._after_open)
        settings = state.settings
        view.set_preferences(settings.low_confidence, settings.overlay_opacity)
        view.set_reviewer(settings.reviewer_name())
        view.set_order(settings.order)
        view.set_start_folders(settings.start_folders())
        view.set_demos(available_demos())
        self.sessions.refresh_projects()
        self.status.set_phase(Phase.EMPTY)

    def _watch_model(self) -> None:
        """The run model's notifiers, to the window (and to the worker for previews to read again)."""
        m, view = self.model, self.view
        m.rows_shown.connect(view.append_rows)
        m.plots_changed.connect(view.set_plot_data)
        m.cells_changed.connect(lambda cells: view.set_tile_values([(c.row, c.col, c.value) for c in cells]))
        m.selection_changed.connect(self.selection.show_selection)
        m.preview_needed.connect(self.worker.load_preview)
        m.event_noted.connect(self._note_event)
        m.rows_changed.connect(view.update_rows)
        m.metrics_changed.connect(view.set_metrics)
        m.collapse_noted.connect(self._note_collapse)
        m.collapse_changed.connect(lambda found: self._note_collapse(found, log=False))
        m.queue_changed.connect(view.set_queue)
        m.certificates_changed.connect(view.set_certificates)
        m.outlook_changed.connect(view.set_outlook)
        m.review_decided.connect(self._note_decided)

    # -- phase and messages -------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return self.state.phase

    @property
    def running(self) -> bool:
        """A run is going on (running, pausing, paused or stopping)."""
        return self.phase in RUNNING

    def log(self, level: str, message: str) -> None:
        """Show ``message`` in the log panel (errors also in the status bar and the reports)."""
        self.status.log(level, message)

    def on_engine_logged(self, level: str, message: str) -> None:
        """A warning or error the engine logged (from any thread; repeated ones are throttled)."""
        shown = self._throttle.admit(message)
        if shown is not None:
            self.view.log_message(level, f"engine: {shown}")

    def _note_collapse(self, found: Collapse, log: bool = True) -> None:
        """Nearly every prediction is one class: the model may not apply (offer the other demo model)."""
        info = self.state.info
        model = model_kind(info.card) if info is not None else None
        looks = self.model.looks_like()
        told = "gate:image-kind" in self.model.checks
        banner = advice.collapse(found, looks, model, available_demos(), kind_told=told)
        if log:
            self.log("warning", banner.text)
        self.model.checks["collapse"] = banner.text  # the figures as of now replace earlier ones
        self.view.show_banner(banner)

    def _note_event(self, row: PredictionRow) -> None:
        """The collapse guard's actions and skipped updates, as their images arrive."""
        if row.guard_message:
            self.log("warning", f"{row.name}: {row.guard_message}")
            self.view.show_status(f"{row.name}: {row.guard_message}")
        if row.update_skipped:
            shown = self._skip_throttle.admit(notices.update_skipped(row), key="update skipped")
            if shown is not None:
                self.log("warning", shown)

    # -- review marks, certificates and the slide's pyramid ------------------------------------
    def on_window_review_requested(self, position: int, label: int) -> None:
        """Confirm or correct the image at ``position`` (label -1 clears the mark); kept at once,
        under the reviewer's name. A mark that disagrees with the dataset's label asks first."""
        disagreement = self.model.disagreement(position, label)
        if disagreement is not None:
            origin = self.model.source.label_origin if self.model.source is not None else None
            if not self.view.confirm(*notices.mark_against_label(*disagreement, origin)):
                self.view.show_status("No review mark recorded: the image keeps its dataset label only")
                return
        try:
            self.model.review(position, None if label < 0 else label, self.state.settings.reviewer_name())
        except OSError as exc:
            self.log("error", f"The review mark cannot be kept ({exc}); nothing was changed.")
            return
        except ValueError as exc:
            self.log("warning", str(exc))
            return
        self._reviewed()

    def on_window_queue_requested(self) -> None:
        """Open the review queue; a comparison starts on the images processed so far when none is
        open, and an empty queue says why."""
        try:
            queue = self.model.start_queue()
        except OSError as exc:
            self.log("error", f"The review cannot be started ({exc}).")
            return
        for level, text in self.model.desk.take_notes():
            self.log(level, text)
        self.view.open_queue()
        if not queue.ranks:
            text = self.model.desk.why_empty()
            self.view.show_status(text[:1].upper() + text[1:])
        self._ask_for_prompted()

    def _ask_for_prompted(self) -> None:
        """The review reached I-DiPT's candidate: its decisions (its prompt tuning, the dearest step,
        made only now) are made behind the maps of the run going on, or in a run of their own; the
        queue goes on when they are all made (``docs/method.md``, "The prompted decision on demand")."""
        review, source = self.model.desk.review, self.model.source
        if review is None or source is None or not review.wants_prompted:
            return
        left = prompted_left(self.model.raw_rows)
        self._prompted_waiting = left > 0 and any(p.ladder.waits_for_prompted for p in review.parts)
        self.worker.want_prompted()  # the worker makes them from now on, in this source's runs
        first = self._prompted_for != source.source_id
        start = self._prompted_waiting and not self.running and self.state.usable  # (again, after a stop)
        if first or start:
            self.maps.ask_prompted(left)  # the status bar counts them
        if first:  # said once a source
            self._prompted_for = source.source_id
            if left:
                self.log("info", notices.prompted_asked(left))
        if start:
            self.model.start_run()
            self.status.set_phase(Phase.RUNNING)
            self.worker.start()

    def on_window_undo_requested(self, redo: bool = False) -> None:
        """Take the last review mark change back (or, ``redo``, make it again) and show its image."""
        m = self.model
        try:
            change = m.undo(redo)
        except OSError as exc:
            self.log("error", f"The review mark cannot be changed back ({exc}); nothing was changed.")
            return
        if change is None:
            return
        for number in m.desk.undecided_since():
            self.view.dismiss_banner(advice.review_key(number))
            self.log("info", notices.decision_undone(number))
        index = m.desk.index_of(change.key)
        self.view.select_row(index)
        m.select(m.rows[index].position)
        self.view.show_status(
            notices.mark_undone(m.rows[index].name, change.after if redo else change.before, redo)
        )
        self._reviewed()

    def _reviewed(self) -> None:
        """After a mark changed: what the desk has to say, the undo texts, the views."""
        for level, text in self.model.desk.take_notes():
            self.log(level, text)
        self.view.set_undo_texts(*self.model.desk.history())
        if not self.running:
            self.model.flush(force=True)
        self._ask_for_prompted()

    def _note_decided(self, line: Certificate) -> None:
        """A comparison of the site's review was decided: say so where the user acts, and in the log."""
        banner = advice.review_decided(line)
        self.log(banner.level, banner.text)
        self.view.show_banner(banner)

    def on_worker_preview_ready(self, position: int, image: np.ndarray) -> None:
        self.model.preview_loaded(position, image)

    def on_window_region_requested(self, x: int, y: int, width: int, height: int, max_side: int) -> None:
        self._region_ticket += 1
        self.worker.read_region(RegionRequest(self._region_ticket, x, y, width, height, max_side))

    def on_worker_region_ready(self, read: RegionRead) -> None:
        r = read.request
        if r.ticket == self._region_ticket:  # an answer to an older request is dropped
            self.view.set_slide_region(r.x, r.y, r.width, r.height, read.rgb)

    # -- what is open (the session controller does the work) ----------------------------------
    def load_session(self) -> None:
        self.sessions.load_session()

    def open_folder(self, path: str) -> None:
        self.sessions.remember_folder("folder", Path(path).parent)
        self.sessions.open_folder(path)

    def open_slide(self, path: str) -> None:
        self.sessions.remember_folder("slide", Path(path).parent)
        self.sessions.open_slide(path)

    def save_settings(self) -> None:
        self.sessions.save_settings()

    # -- the run ------------------------------------------------------------------------------
    def start(self, ask: bool = True) -> None:
        """Process the open source's pending images. Where the applicability gate flags the source
        (``f2tta run`` stops with exit code 4), ask once first: a project's images then run in a
        project of their own (:meth:`ProjectActions.run_apart`); a ``--state`` directory, which the
        user chose as ``f2tta run``'s, runs in it. ``ask`` False (a script that accepts the
        warnings): no question, the answer is yes."""
        source, st = self.model.source, self.state
        if not st.usable or source is None or not self.model.pending:
            return
        path = str(source.path if isinstance(source, SlideSource) else source.root)
        if self.model.gate and path not in st.gate_accepted:
            here = self._gate_question()
            if here is None:
                self.projects.run_apart(Path(path), list(self.model.gate), ask)
                return
            if ask and not self.view.confirm("Run anyway?", here):
                self.log("info", "Not run: the applicability check's warnings stand (see the banner).")
                return
            st.gate_accepted.add(path)
            self.log(
                "info",
                f"Run despite the applicability check (recorded with the figures): {' '.join(self.model.gate)}",
            )
        self.model.start_run()
        self.maps = MapsCount(self.model.raw_rows)  # the source's rows so far, some maps maybe pending
        if self._prompted_for == source.source_id:  # and I-DiPT's decisions, asked for already
            self.maps.ask_prompted(prompted_left(self.model.raw_rows))
        if self.model.selected is None:  # "Press Start (F5)" no longer holds
            self.view.show_image(
                None, None, "Processing … each image shows here as it is done (Follow newest)"
            )
        self.view.dismiss_banner("export")  # the reports written no longer hold every image
        # The advice to open it in a project of its own is moot once it runs here (three stacked
        # banners left a slide ~290 px of a 1280x800 screen).
        self.view.dismiss_banner(advice.SOURCE_KEYS + "project")
        self.status.set_phase(Phase.RUNNING)
        self.log("info", f"Run started: {self.model.pending} images")
        self.worker.start()

    def _gate_question(self) -> str | None:
        """The question before a run the gate flags, where the images run in the open state: a
        ``--state`` directory (chosen as ``f2tta run``'s), or a project when the only warning comes
        with every slide of the model (:func:`model_wide`: a project of its own protects nothing);
        None: they run in a project of their own."""
        st = self.state
        if st.state_dir is not None:
            return notices.gate_question(self.model.gate)
        if not model_wide(self.model.gate_checks, st.info.card.mpp if st.info is not None else None):
            return None
        return notices.gate_question_here(self.model.gate, st.settings.project)

    def _after_open(self, _opened: object) -> None:
        """A source opened in a project made to run it apart from the gate's: the run starts."""
        self._prompted_for = None  # the worker forgets them with every source opened (reopened too)
        if self.state.run_after_open:
            self.state.run_after_open = False
            self.start()

    def pause(self) -> None:
        if self.phase is Phase.RUNNING:
            self.worker.pause()
            self.status.set_phase(Phase.PAUSING)

    def resume(self) -> None:
        if self.phase is Phase.PAUSED:
            self.model.start_run(counters=False)
            self.view.dismiss_banner("export")  # reports written while paused lack what comes now
            self.status.set_phase(Phase.RUNNING)
            self.worker.resume()

    def stop(self) -> None:
        if self.phase in (Phase.RUNNING, Phase.PAUSING, Phase.PAUSED):
            self.worker.stop()
            self.status.set_phase(Phase.STOPPING)

    def tick(self, force: bool = False) -> None:
        """Hand what arrived to the views (one group of views per tick, all of them with ``force``)."""
        progress = self.model.progress.progress(running=self.phase in TICKING)
        self.view.set_progress(
            dataclasses.replace(progress, maps=self.maps.text(), maps_left_s=self.maps.remaining())
        )
        self.model.flush(force=force, follow=self.view.following)
        self.view.set_project_summary(self.state.project_text())
        self.sessions.show_project_count()

    def on_worker_results_ready(self, batch: tuple[ItemResult, ...]) -> None:
        self.model.add_results(batch)
        self.maps.add(batch)
        self.state.images_seen += sum(not r.map_only for r in batch)
        if self._prompted_waiting and any(r.prompted_only for r in batch):
            if not prompted_left(self.model.raw_rows):
                self._prompted_waiting = False  # every decision the review waited for is made
                self.on_window_queue_requested()

    def on_worker_item_failed(self, failure: ItemFailure) -> None:
        self.model.note_failure(failure.retried)
        self.log("error", failure.message)

    def on_worker_paused(self) -> None:
        self.tick(force=True)
        self.model.progress.pause()
        if self.phase is Phase.PAUSING:
            self.status.set_phase(Phase.PAUSED)
            self.view.set_progress(self.model.progress.progress(running=False))
            self.log("info", f"Paused after {self.model.progress.done} of {self.model.progress.total} images")

    def on_window_activated(self) -> None:
        """The window came to the front: has the open folder grown meanwhile? (the worker counts)"""
        if self.model.source is not None and not self.running and self.phase is not Phase.LOADING:
            self.worker.count_new_images()

    def on_worker_new_images(self, count: int) -> None:
        """``count`` images were copied into the open folder since it opened: offer them."""
        source = self.model.source
        if count and source is not None and not self.running:
            self.view.show_banner(advice.new_images(count, source))
        elif not count:
            self.view.dismiss_banner(advice.SOURCE_KEYS + "new-images")

    def on_worker_run_ended(self, ended: RunEnded) -> None:
        self.tick(force=True)
        self.model.progress.pause()
        self.state.last_run = ended
        if ended.project is not None:
            self.on_worker_state_saved(ended.project)
        self.log("error" if ended.reason == "failed" else "info", notices.run_ended(ended, self.model))
        if self.model.collapse is not None:  # the banner's figures as of the end of the run
            final = self.model.watch.collapse()
            if final is not None:
                self.model.collapse = final  # the figures' caption says the same
                self._note_collapse(final, log=False)
        self.view.set_progress(self.model.progress.progress(running=False))
        pending = self.model.pending
        status = None
        if ended.reason != "finished" or pending:
            status = f"{ended.reason} · {pending} left" + (" · state saved" if ended.saved else "")
        self.status.set_phase(Phase.READY if pending else Phase.DONE, status)
        self.worker.count_new_images()  # a folder being copied into has more now
        self.events.run_finished.emit(ended)
        if self._closing:
            self.events.shutdown_needed.emit(None)
            self.view.close_now()

    def on_worker_state_saved(self, info: ProjectInfo) -> None:
        self.state.latest_project = info
        self.view.set_project_summary(self.state.project_text())
        for level, text in self.model.desk.take_notes():
            self.log(level, text)

    def on_worker_save_failed(self, message: str) -> None:
        self.log("error", message)

    # -- export (the export part does the work) ----------------------------------------------
    def export(self, directory: str | Path, ask: bool = True) -> None:
        self.exports.export(directory, ask)

    def report_data(self) -> ReportData | None:
        return self.exports.report_data()

    # -- closing ------------------------------------------------------------------------------
    def on_window_close_requested(self) -> None:
        """The user closes the window: during a run, stop and save first and close when it ends.
        A maximised window opens maximised next time (the settings keep it)."""
        self.state.change_settings(maximized=self.view.is_maximized())
        if self.running:
            self._closing = True
            self.view.close_allowed = False
            self.stop()
        else:
            self.events.shutdown_needed.emit(None)
