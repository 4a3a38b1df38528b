"""Projects, the settings dialog, the demos and the fixes offered by banners (part of the controller).

Each project remembers its model and method (``profile.json``): selecting a project selects them.
A new project, a renamed or deleted one, a demo set and every banner's fix end in
:meth:`~app.control.session_controller.SessionController.apply_settings`
or a request to the engine worker. A plain object, handed the controller's shared context and its
session part.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from app._engine import SlideSource
from app.control.project_model import model_setting
from app.control.session_controller import SessionController
from app.control.status import ControllerContext
from app.core import advice, notices
from app.core.phase import Phase
from app.core.project_lines import model_choices, model_file_problem, model_file_text, next_project
from app.core.projects import DEFAULT_PROJECT, ProjectError, ProjectStore, check_name
from app.core.settings import (
    DEMO_MODELS,
    DEMO_PROJECTS,
    DEMO_SETS,
    AppSettings,
    available_demos,
    available_devices,
    check_model,
    method_fields,
)


class ProjectActions:
    """Project, settings, demo and banner-fix requests of the window.

    Args:
        ctx: what the controller's parts share (renames and deletions release the project in the
            worker first; the run model is closed when its project is deleted).
        sessions: the session controller, whose settings, sources and reset the actions end in.
    """

    def __init__(self, ctx: ControllerContext, sessions: SessionController) -> None:
        self.ctx, self.sessions = ctx, sessions
        self.view, self.worker, self.state, self.model, self.status = (
            ctx.view,
            ctx.worker,
            ctx.state,
            ctx.model,
            ctx.status,
        )

    # -- selecting, creating, renaming, deleting -----------------------------------------------
    def settings_for_project(self, name: str) -> AppSettings:
        """The settings with ``name`` as project, and the model and method that project remembers."""
        st = self.state
        new = dataclasses.replace(st.settings, project=name)
        info = ProjectStore(st.home).info(name)
        if info is None:
            return new
        if info.model_path:  # a model that is gone stays named: loading it says so (never a stand-in)
            new = dataclasses.replace(new, model=model_setting(Path(info.model_path)))
        if info.method and info.method in method_fields():
            config = info.method_config if info.method_config is not None else {}
            new = dataclasses.replace(new, method=info.method, method_config=dict(config))
        return new

    def select(self, name: str) -> None:
        """Open the project ``name`` with its own model and method; the screen starts empty (its
        folders and slides are offered on the welcome page)."""
        st = self.state
        if name == st.settings.project and st.usable and st.state_dir is None:
            return
        info = ProjectStore(st.home).info(name)
        if info is not None and info.damaged:  # the open project stays open
            self.view.show_error("Project", f"Project '{name}' cannot be opened. {info.damaged}")
            self.sessions.refresh_projects()
            return
        st.state_dir, st.model_chosen, st.model_located = None, False, False
        self.sessions.clear_screen()
        self.sessions.apply_settings(self.settings_for_project(name), reload=True)

    def on_window_new_project_requested(self, name: str = "", then_open: Path | None = None) -> None:
        """Ask for the new project's name (``name`` offered) and model, then create it with them
        (``then_open``: and open this folder or slide in it)."""
        st = self.state
        current = st.settings.model_path() if st.info is not None else None
        demos = {kind: DEMO_MODELS[kind] for kind in sorted(available_demos())}
        taken = ProjectStore(st.home).names()
        answer = self.view.ask_new_project(model_choices(current, demos), taken, model_file_text, name)
        if answer is None:
            return
        name, model = answer
        self.sessions.remember_folder("model", Path(model).parent)
        st.model_chosen = st.model_located = False
        self.create(name, dataclasses.replace(st.settings, model=model_setting(Path(model))), then_open)

    def create(self, name: str, settings: AppSettings | None = None, then_open: Path | None = None) -> None:
        """A new project with the model and method of ``settings`` (the current ones when None),
        opened (``then_open``: with this folder or slide open in it). The engine worker makes its
        folder (the one writer of project folders)."""
        st = self.state
        try:
            name = check_name(name)
            if ProjectStore(st.home).info(name) is not None:
                raise ProjectError(f"a project named {name!r} exists already")
        except ProjectError as exc:
            self.view.show_error("New project", str(exc))
            return
        st.state_dir = None
        self.sessions.clear_screen()
        self.sessions.apply_settings(dataclasses.replace(settings or st.settings, project=name), then_open)

    def run_apart(self, source: Path, reasons: list[str], ask: bool = True) -> bool:
        """The gate flags the open source: ask once whether to run it in a project of its own (the
        open project's adaptation state is not touched), and make that project, the source open
        and run in it, when the user says yes (``ask`` False: without asking). Returns whether a
        run follows."""
        st = self.state
        name = apart_name(st.settings.project, source, ProjectStore(st.home).names())
        question = notices.gate_question(reasons, st.settings.project, name)
        if ask and not self.view.confirm("Run anyway?", question):
            self.status.log("info", "Not run: the applicability check's warnings stand (see the banner).")
            return False
        st.gate_accepted.add(str(source))
        st.run_after_open = True
        self.create(name, then_open=source)
        return True

    def on_window_rename_project_requested(self, name: str) -> None:
        """Rename the current project; its open folder or slide opens again under the new name."""
        try:
            check_name(name)
        except ProjectError as exc:
            self.view.show_error("Rename project", str(exc))
            return
        source = self.model.source
        self.sessions.clear_screen()
        if source is not None:
            self.sessions.open_after_session = source.path if isinstance(source, SlideSource) else source.root
        self.state.change_settings(project=name.strip())
        self.sessions.save_settings()
        self.status.set_phase(Phase.LOADING)
        self.worker.rename_project(name.strip())

    def on_window_delete_project_requested(self, name: str) -> None:
        """Delete the project ``name``. The one in use: the app goes on in the project saved most
        recently, or -- none left -- in a new empty project "default" with the same model, and
        says so. The screen is emptied and the review files let go of first, so nothing writes
        into the folder the worker removes."""
        st = self.state
        if name != st.settings.project or st.state_dir is not None:
            self.worker.delete_project(st.home, name)
            self.status.log("info", f"Project '{name}' deleted.")
            self.sessions.refresh_projects()
            return
        following = next_project(ProjectStore(st.home).infos(), name)
        self.sessions.clear_screen()
        self.worker.delete_project(st.home, name)
        if following is not None:
            settings = self.settings_for_project(following)
            self.status.log("info", f"Project '{name}' deleted; project '{following}' is open.")
        else:
            settings = dataclasses.replace(st.settings, project=DEFAULT_PROJECT)
            model = model_file_text(settings.model_path())
            self.status.log("info", f"Project '{name}' deleted; no other project was left.")
            self.view.show_banner(advice.fresh_project(name, DEFAULT_PROJECT, model))
        self.sessions.apply_settings(settings, reload=True)

    def on_worker_project_failed(self, message: str) -> None:
        self.status.log("error", message)
        self.view.show_error("Project", message)

    # -- settings and demos --------------------------------------------------------------------
    def on_window_settings_requested(self) -> None:
        st = self.state
        new = self.view.edit_settings(st.settings, method_fields(), available_devices(), check_model)
        if new is not None and new != st.settings:
            st.model_chosen |= new.model != st.settings.model  # chosen for this project, not inherited
            self.sessions.apply_settings(new)

    def on_window_demo_requested(self, kind: str) -> None:
        """Open a demo set with its demo model, in a project of its own."""
        if kind not in available_demos():
            return
        settings = dataclasses.replace(
            self.settings_for_project(DEMO_PROJECTS[kind]), model=model_setting(DEMO_MODELS[kind])
        )
        st = self.state
        st.state_dir = None
        if settings == st.settings and st.usable:
            self.sessions.open_folder(str(DEMO_SETS[kind]))
        else:
            self.sessions.apply_settings(settings, then_open=DEMO_SETS[kind])

    # -- the fixes banners offer ---------------------------------------------------------------
    def on_window_banner_action_triggered(self, key: str, action: str) -> None:
        s, st, view = self.sessions, self.state, self.view
        verb, _, arg = action.partition(":")
        if verb == "settings":
            self.on_window_settings_requested()
        elif verb == "demo-model":
            kind = arg or "histology"
            settings = dataclasses.replace(
                self.settings_for_project(DEMO_PROJECTS[kind]) if arg else st.settings,
                model=model_setting(DEMO_MODELS[kind]),
            )
            st.state_dir = None
            s.apply_settings(settings)
        elif verb == "new-project-for-method":
            info = st.info
            method = info.method if info is not None else st.settings.method
            self.create(advice.project_for_method(st.settings.project, method))
        elif verb == "new-project":  # the dialog, with the name the banner suggests
            source = self.model.source
            opened = (source.path if isinstance(source, SlideSource) else source.root) if source else None
            self.on_window_new_project_requested(arg, opened if arg else None)
        elif verb == "reset":
            if view.confirm(
                "Reset to source model",
                f"Reset project '{st.settings.project}' to the source model? Its adaptation state and "
                "record of processed images are deleted (review marks are kept).",
            ):
                s.request_reset()
        elif verb == "interleave":  # this folder's order only (File ▸ Arrival order sets the default)
            s.on_window_order_changed("interleaved", remember=False)
        elif verb == "open":
            view.open_location(arg)
        elif verb == "show-log":
            view.show_tab("log")
        elif verb == "show-certificates":
            view.show_tab("certificates")
        elif verb == "take-new":  # the folder again, with what arrived, and a run
            source = self.model.source
            if source is not None:
                st.run_after_open = True
                s.open_folder(str(source.path if isinstance(source, SlideSource) else source.root))
        elif verb == "locate-model":
            self.locate_model()
        elif verb == "own-model":
            st.model_chosen = st.model_located = False
            s.apply_settings(self.settings_for_project(st.settings.project), reload=True)

    def locate_model(self) -> None:
        """The project's model was moved or renamed: load the file the user points at (its content
        is checked against the project's before anything of the project is used)."""
        st = self.state
        path = self.view.ask_model_file(str(st.settings.model_path().parent))
        if not path:
            return
        problem = model_file_problem(Path(path))
        if problem is not None:
            self.view.show_error("Locate the model", problem)
            return
        st.model_chosen = st.model_located = True
        self.sessions.apply_settings(
            dataclasses.replace(st.settings, model=model_setting(Path(path))), reload=True
        )


def apart_name(project: str, source: Path, taken: list[str]) -> str:
    """A project name for running ``source`` apart from ``project`` (only characters names allow)."""
    base = re.sub(r"[^A-Za-z0-9 ._-]", "-", f"{project} - {source.stem or source.name}")[:58].strip()
    name, number = base, 2
    while name in taken:
        name, number = f"{base} {number}", number + 1
    return name
