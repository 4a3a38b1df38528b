"""A site of a cohort opened for review in the main window (part of the controller, Qt-free).

The cohort window (:mod:`app.views.cohort_view`) asks for a site with a
:class:`~app.core.cohort_sites.CohortSiteRequest`. The site's state folder is an ordinary
``f2tta run`` state, so it opens as ``f2tta-studio SOURCE --state COHORT/sites/SITE`` opens it:
the session loads again on that state, with the model the cohort was run with, and the site's
slide or folder opens in it with its rows, its review queue (Q) and its certificates.
"""

from __future__ import annotations

import dataclasses

from app.control.project_model import model_setting
from app.control.session_controller import SessionController
from app.control.status import RUNNING, ControllerContext
from app.core.cohort_sites import CohortSiteRequest


class CohortActions:
    """Opens a cohort's site in the main window.

    Args:
        ctx: what the controller's parts share.
        sessions: the session controller whose settings and sources the opening ends in.
    """

    def __init__(self, ctx: ControllerContext, sessions: SessionController) -> None:
        self.ctx, self.sessions = ctx, sessions

    def open_site(self, request: CohortSiteRequest) -> None:
        """Open ``request``'s site state with its slide or folder (refused while a run goes on here,
        or when the site's input is gone)."""
        st, view, status = self.ctx.state, self.ctx.view, self.ctx.status
        title = f"Open site {request.site}"
        if st.phase in RUNNING:
            view.show_error(title, "Stop the run in this window first; then open the site again.")
            return
        if not request.source.exists():
            view.show_error(title, f"The site's slide or folder is not there any more: {request.source}")
            return
        if not request.state.is_dir():
            view.show_error(title, f"The site has not been run yet: {request.state} does not exist.")
            return
        settings = st.settings
        if request.model is not None:
            settings = dataclasses.replace(settings, model=model_setting(request.model))
            st.model_chosen, st.model_located = True, False
        if request.method:  # the site's state was made with this method and its settings
            settings = dataclasses.replace(
                settings, method=request.method, method_config=request.method_config
            )
        st.state_dir = request.state
        status.log("info", f"Opening site {request.site} of a cohort for review ({request.state}).")
        self.sessions.clear_screen()
        self.sessions.apply_settings(settings, then_open=request.source, reload=True)
