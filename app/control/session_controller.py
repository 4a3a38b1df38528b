"""What is open and how it is shown: the session, the source, the project, the settings, the selection.

Part of the controller (:class:`app.control.controller.Controller` makes one and hands it the window,
the worker's requests, the :class:`~app.core.open_session.OpenSession`, the run model, the
:class:`~app.control.status.Status` and the events it shares). A plain object: it turns what the user
asks to open or change into requests to the engine worker, shows what comes back (its
``on_worker_*`` methods; failures as banners with their fixes, see :mod:`app.core.advice`) and
checks that the model applies to what was opened. Project management and the banners' fixes are
:class:`~app.control.project_actions.ProjectActions`'s; the wording lives in
:mod:`app.core.notices` and :mod:`app.core.advice`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app._engine import FolderSource, SlideSource
from app.control.project_model import project_model, same_file
from app.control.status import ControllerContext
from app.core import advice, notices
from app.core.applicability import model_kind
from app.core.arrival import ORDER_LABELS
from app.core.messages import SessionInfo, SessionRequest, SourceOpened, SourceRequest
from app.core.notices import Banner
from app.core.phase import Phase
from app.core.project_lines import project_lines
from app.core.projects import ProjectStore
from app.core.recent import export_folder, read_inputs, shown_inputs
from app.core.settings import DEMO_MODEL, AppSettings, available_demos, save_settings
from app.core.slide_display import SlideDisplay
from app.core.stats import segment_size_for

RELOAD_KEYS = ("model", "device", "method", "method_config", "project", "autosave_every", "batch", "maps")


class SessionController:
    """Session, source, project, settings and selection requests (see the module notes).

    Args:
        ctx: what the controller's parts share (the window, the worker's requests, the open
            session, the run model the source's rows go into, the phase and log, the events).
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.view, self.worker, self.state, self.model = ctx.view, ctx.worker, ctx.state, ctx.model
        self.status, self.events = ctx.status, ctx.events
        self.open_after_session: Path | None = None  # a source to open once the session is ready (demos)
        self._shown_seen = -1  # the images seen the project list's entry shows

    # -- the session ---------------------------------------------------------------------------
    def load_session(self) -> None:
        """(Re)load the model, method and project from the current settings.

        The project's own model is loaded (unless another was chosen for this session): a project
        whose model file is gone, whose own file is damaged, or that has adapted another model than
        the one chosen is not loaded; a banner names it with the choices (never the demo model in
        its place, never a reset).
        """
        st = self.state
        st.info = None
        expected = ""
        if st.state_dir is None:
            checked = project_model(self.state, self._refuse)
            if checked is None:
                return
            expected = checked
        s = st.settings
        self.status.set_phase(Phase.LOADING)
        self.view.set_model_text("loading model…")
        request = SessionRequest(s.model_path(), s.method, dict(s.method_config), s.device, s.project)
        self.worker.open_session(
            dataclasses.replace(
                request,
                home=st.home,
                autosave_every=s.autosave_every,
                batch=s.batch,
                maps=s.maps,
                state_dir=st.state_dir,
                expected_sha256=expected,
            )
        )

    def _refuse(self, banner: Banner, message: str) -> None:
        """Nothing is loaded: say why where the user acts (the other projects stay in the list)."""
        self.status.log("error", message)
        self.view.set_model_text("no model loaded")
        self.view.show_banner(banner)
        self.refresh_projects()
        self.status.set_phase(Phase.EMPTY)
        self.events.load_failed.emit(message)

    def on_worker_session_ready(self, info: SessionInfo) -> None:
        self.state.adopt(info)
        if self.state.state_dir is None and info.project.name != self.state.settings.project:
            self.state.change_settings(project=info.project.name)
            self.save_settings()  # a rename that failed: the project kept its name
        self.view.set_model_text(notices.model_line(info))
        self.view.set_classes(tuple(info.card.classes))
        self.view.set_project_summary(self.state.project_text())
        for key in advice.SESSION_KEYS:  # their causes went with the old session (reports: of its project)
            self.view.dismiss_banner(key)
        self.refresh_projects()
        self.show_inputs()
        self.status.log("info", notices.model_loaded(info))
        self.events.session_changed.emit(info)
        if info.project_error:
            self.status.log("error", info.project_error)
            self.view.show_banner(advice.project_refused(info.project.name, info.method, info.project_error))
            self.status.set_phase(Phase.EMPTY)
            self.events.load_failed.emit(info.project_error)
            return
        self.status.log("info", self.state.project_text())
        after, self.open_after_session = self.open_after_session, None
        source = self.model.source
        if after is not None:
            self._open(after)
        elif source is not None:  # the same source again, under the new session
            self._open(source.path if isinstance(source, SlideSource) else source.root)
        else:
            self.status.set_phase(Phase.DONE)

    def on_worker_session_failed(self, message: str, cause: str = "model") -> None:
        """The session could not be opened: ``cause`` is "model", "project" or "model-changed"
        (:class:`app.worker.opening.OpenFailed`)."""
        st = self.state
        if cause == "model-changed":
            self._refuse(advice.model_changed(st.settings.project, message), message)
            return
        if cause == "project":
            self._refuse(advice.project_damaged(st.settings.project, message), message)
            return
        self.status.log("error", message)
        if st.info is None:
            self.view.set_model_text("no model loaded")
            using_demo = same_file(st.settings.model_path(), DEMO_MODEL)
            project = ProjectStore(st.home).info(st.settings.project) if st.state_dir is None else None
            own = project is not None and bool(project.model_path)
            self.view.show_banner(advice.model_failed(message, offer_demo=not using_demo and not own))
        self.status.set_phase(Phase.DONE if st.info else Phase.EMPTY)
        self.events.load_failed.emit(message)

    # -- sources -------------------------------------------------------------------------------
    def open_folder(self, path: str, order_chosen: bool = False, order: str | None = None) -> None:
        """Open the folder at ``path`` in the settings' arrival order (``order``: this one instead);
        a folder begun in another order continues in that one unless ``order_chosen`` (the order
        was changed for it)."""
        s = self.state.settings
        self._request_source(
            SourceRequest(
                Path(path), "folder", order or s.order, seed=s.order_seed, order_chosen=order_chosen
            )
        )

    def open_slide(self, path: str) -> None:
        self._request_source(SourceRequest(Path(path), "slide", min_tissue=self.state.settings.min_tissue))

    def _open(self, path: Path) -> None:
        if path.is_dir():
            self.open_folder(str(path))
        else:
            self.open_slide(str(path))

    def _request_source(self, request: SourceRequest) -> None:
        if not self.state.usable:
            message = "Load a model (and a usable project) before opening images."
            self.status.log("error", message)
            self.view.show_banner(advice.source_failed(message, None))
            return
        self.status.set_phase(Phase.LOADING)
        self.status.log("info", f"Opening {request.kind} {request.path} …")
        self.worker.open_source(request)

    def on_worker_source_failed(self, message: str) -> None:
        self.status.log("error", message)
        self.view.show_banner(advice.source_failed(message, self.model.source))
        self.status.set_phase(
            Phase.READY if self.model.source is not None and self.model.pending else Phase.DONE
        )
        self.events.load_failed.emit(message)

    def on_worker_source_ready(self, opened: SourceOpened) -> None:
        source, model, info = opened.source, self.model, self.state.info
        if not self.state.usable:  # an answer for a project left since (renamed, deleted, switched)
            return
        labelled = any(it.ground_truth is not None for it in source.items)
        self.view.clear_results(len(source.items), segment_size_for(len(source.items)), labelled)
        self.view.clear_banners(advice.SOURCE_KEYS)
        self.view.dismiss_banner("open")
        self.view.dismiss_banner("export")  # the reports written were of what was open before
        if isinstance(source, SlideSource):
            mapped = info.card.classes[info.card.positive_class] if info else "positive class"
            self.view.show_slide(dataclasses.replace(SlideDisplay.of(source, opened.tissue), positive=mapped))
        classes = tuple(info.card.classes) if info else ()
        positive = info.card.positive_class if info else 1
        model.open(
            source, opened.done, opened.restored_rows, positive, classes, opened.overlays, opened.review_dir
        )
        if model.marks:
            self.view.set_reviews(
                {i: model.review_of(r.position) for i, r in enumerate(model.rows) if r.key in model.marks}
            )
        self.view.set_progress(model.progress.progress(running=False))
        self.view.set_source_title(source.display_name)
        # The order menu says the order this folder arrives in (a begun one continues in its own).
        self.view.set_order(source.order if isinstance(source, FolderSource) else self.state.settings.order)
        st = self.state  # a --state folder (a cohort's site) is named by its folder, as in the project list
        shown = st.state_dir.name if st.state_dir is not None else st.settings.project
        for level, text in notices.source_opened(source, opened, model.pending, shown):
            self.status.log(level, text)
        for level, text in model.desk.take_notes():  # marks that could not be used, and why
            self.status.log(level, text)
        document = model.desk.document()
        if document is not None and model.desk.moved_rules:  # the reviews' rule holds after a restart
            self.view.show_banner(advice.review_rule(document.decides))
        self.view.set_undo_texts("", "")
        self._check_source(opened)
        hint = "Select a row to show its image" if opened.restored_rows else "Press Start (F5) to process"
        self.view.show_image(None, None, hint)
        self.status.set_phase(Phase.READY if model.pending else Phase.DONE)
        self.show_inputs()
        self.events.source_opened.emit(opened)

    def _check_source(self, opened: SourceOpened) -> None:
        """Does the model apply? The engine's gate as ``f2tta run`` applies it (image kind,
        class-sorted order, resolution; slides too, on open), then sub-folder names and a new site
        as advice. What the gate says marks every figure of this source (the run model's ``gate``)."""
        source, info = opened.source, self.state.info
        if info is None:
            return
        looks = opened.looks_like if opened.looks_like in ("histology", "fundus") else None
        trained = model_kind(info.card)
        for warning in opened.gate:
            self.status.log("warning", warning.message)
            self.model.checks[f"gate:{warning.check}"] = warning.message
            self.view.show_banner(advice.gate(warning, looks, trained, available_demos()))  # type: ignore[arg-type]
        self.model.set_gate([(w.check, w.message) for w in opened.gate])
        if isinstance(source, FolderSource):
            folders = opened.subfolders
            if folders:
                self.status.log("warning", folders)
                self.model.checks["subfolders"] = folders
                self.view.show_banner(advice.subfolders(folders, looks, trained, available_demos()))  # type: ignore[arg-type]
        elif source.plan.warning and not any(w.check == "resolution" for w in opened.gate):
            self.model.checks["resolution"] = source.plan.warning
            self.view.show_banner(advice.resolution(source.plan.warning))
        if opened.other_sources and not opened.done and self.state.state_dir is None:
            self.view.show_banner(
                advice.new_source_in_project(
                    info.project.name, source, opened.other_images, opened.other_sources
                )
            )

    # -- settings ------------------------------------------------------------------------------
    def refresh_projects(self) -> None:
        """The project list in the window, each with its model and images seen (the --state
        directory counts as the current one)."""
        st = self.state
        current = st.state_dir.name if st.state_dir is not None else st.settings.project
        infos = ProjectStore(st.home).infos()
        lines = {i.name: project_lines(i) for i in infos}  # each model card read once
        details = {name: tooltip for name, (_entry, tooltip) in lines.items()}
        entries = {name: entry for name, (entry, _tooltip) in lines.items()}
        self.view.set_projects(sorted({*details, current}), current, details, entries)
        self.view.set_demos(available_demos())
        self._shown_seen = -1
        self.show_project_count()

    def show_project_count(self) -> None:
        """The open project's entry in the list with the images it has seen now, unsaved ones
        included, as the status bar counts them (the list said "0 images seen" after 48)."""
        st, info = self.state, self.state.info
        if info is None or st.state_dir is not None or st.images_seen == self._shown_seen:
            return
        self._shown_seen = seen = st.images_seen
        entry, tooltip = project_lines(
            dataclasses.replace(st.latest_project or info.project, images_seen=seen), info.card
        )
        self.view.set_project_entry(info.project.name, entry, tooltip)

    def show_inputs(self) -> None:
        """The current project's folders and slides, most recent first (the welcome page, File ▸ Open recent)."""
        info = self.state.info
        inputs = read_inputs(info.project.path) if info is not None and self.state.state_dir is None else ()
        lines = shown_inputs(inputs)
        self.view.set_inputs(lines)
        self.view.set_start_folder("export", export_folder(lines, self.model.source))

    def clear_screen(self) -> None:
        """Forget what is open and shown before another project is opened (switched to, renamed,
        deleted): the run model lets go of its review files first, so nothing more is written into
        the project; the table, plots, metrics, slide, image, banners and status start empty."""
        self.open_after_session = None
        self.model.close()
        self.model.progress.start(0, 0)
        view = self.view
        view.clear_results(0, segment_size_for(0))
        view.clear_banners()
        view.set_source_title("")
        view.show_image(None, None, "")
        view.set_undo_texts("", "")
        view.set_progress(self.model.progress.progress(running=False))
        view.set_inputs([])

    def apply_settings(
        self, settings: AppSettings, then_open: Path | None = None, reload: bool = False
    ) -> None:
        """Adopt new settings; reload the session when the model, method, device or project changed.

        ``then_open``: a source to open once the (re)loaded session is ready (a demo set).
        ``reload``: load the session again even when nothing of it changed (a project deleted
        and made again under the same name).
        """
        if then_open is not None:
            self.open_after_session = then_open
        old = self.state.change_settings(settings)
        self.save_settings()
        self.view.set_order(settings.order)
        self.view.set_reviewer(settings.reviewer_name())
        source = self.model.source
        if (
            reload
            or any(getattr(old, k) != getattr(settings, k) for k in RELOAD_KEYS)
            or self.state.info is None
        ):
            self.load_session()
        elif (old.order, old.order_seed) != (settings.order, settings.order_seed) and isinstance(
            source, FolderSource
        ):
            if self.model.progress.done:  # a begun folder is not renumbered by a default changing
                self.status.log(
                    "info",
                    f"'{source.display_name}' continues in the order it was begun in "
                    f"({ORDER_LABELS.get(source.order, source.order)}); folders opened from now on arrive "
                    f"{ORDER_LABELS.get(settings.order, settings.order).lower()} (File ▸ Arrival order "
                    "reorders this one).",
                )
                self.view.set_order(source.order)
            else:
                self.open_folder(str(source.root), order_chosen=True)

    def remember_folder(self, kind: str, folder: Path) -> None:
        """The ``kind`` file dialog starts in ``folder`` next time (kept in the settings)."""
        self.state.change_settings(self.state.settings.remember_folder(kind, folder))
        self.save_settings()
        self.view.set_start_folders(self.state.settings.start_folders())

    def save_settings(self) -> None:
        if self.state.persist_settings:
            home = self.state.home
            try:
                save_settings(self.state.settings, None if home is None else home / "settings.json")
            except OSError as exc:
                self.status.log("warning", f"Settings cannot be saved: {exc}")

    def on_window_order_changed(self, order: str, remember: bool = True) -> None:
        """File ▸ Arrival order: the open folder's order (a begun folder asks first: its rows are
        numbered again), and the order folders open in from now on; ``remember`` False (the class-
        sorted banner's Interleave): the open folder's only, and the log says the others' stays
        (it changed the order of every folder opened later, silently)."""
        source = self.model.source
        if isinstance(source, FolderSource) and source.order == order:
            return
        if isinstance(source, FolderSource) and self.model.progress.done:
            question = (
                f"Reorder '{source.display_name}'? It was begun in the "
                f"{ORDER_LABELS.get(source.order, source.order).lower()} order; in the new order its rows are "
                "numbered again (the '#' column changes) and the images not processed yet arrive in it."
            )
            if not self.view.confirm("Arrival order", question):
                self.view.set_order(source.order)
                return
        if not remember and isinstance(source, FolderSource):
            other = ORDER_LABELS.get(self.state.settings.order, self.state.settings.order).lower()
            self.status.log(
                "info",
                f"'{source.display_name}' arrives in the {ORDER_LABELS.get(order, order).lower()} order; other "
                f"folders open in the {other} order (File ▸ Arrival order changes it for all).",
            )
            self.open_folder(str(source.root), order_chosen=True, order=order)
            return
        self.state.change_settings(order=order)
        self.save_settings()
        if isinstance(source, FolderSource):
            self.open_folder(str(source.root), order_chosen=True)

    def request_reset(self) -> None:
        if self.state.info is not None:
            self.status.set_phase(Phase.LOADING)
            self.worker.reset_state()

    def on_worker_reset_done(self, info: SessionInfo) -> None:
        self.state.adopt(info)
        self.view.set_project_summary(self.state.project_text())
        self.view.dismiss_banner("project")
        self.status.log("info", f"Project '{info.project.name}' reset to the source model")
        if self.model.source is None or info.project_error:
            self.status.set_phase(Phase.DONE)

    def on_window_about_requested(self) -> None:
        self.view.show_about(notices.about(self.state.info))
