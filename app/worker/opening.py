"""What the engine worker opens (Qt-free): the session a request names, its project and journal,
and a source of images.

The worker (:mod:`app.worker.engine_worker`) holds what these return and answers the UI; errors are raised (or,
for the journal, returned as the user-facing reason) for it to report.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from app._engine import (
    F2TTAError,
    FolderSource,
    Journal,
    KindTally,
    ModelCard,
    PredictionRow,
    Session,
    SettingsMismatchError,
    Slide,
    SlideSource,
    Source,
    StateError,
    check_source,
    in_recorded_order,
    input_notes,
    method_config,
    open_folder,
    open_slide_source,
    processed_here,
    reopen_slide,
    shown,
    subfolder_warning,
    tissue_mask,
)
from app.core import notices, recent
from app.core.messages import SessionRequest, SourceOpened, SourceRequest
from app.core.overlay import Overlay
from app.core.projects import Project, ProjectError, ProjectStore
from app.core.reviews import REVIEW_DIR, OverlayStore
from app.worker.io import model_sha256

logger = logging.getLogger(__name__)


class OpenFailed(Exception):
    """The session a request names cannot be opened; the message is for the user.

    Args:
        message: what to tell the user.
        cause: "model" (it cannot be loaded), "project" (the project cannot be opened) or
            "model-changed" (the project's model file holds other content than it was made with).
    """

    def __init__(self, message: str, cause: str = "model") -> None:
        super().__init__(message)
        self.cause = cause


class OpenedSession(NamedTuple):
    """A session with its project and journal (``journal`` None and ``error`` set: the project's
    state cannot be used with it; the reason is the user's to read)."""

    session: Session
    project: Project
    journal: Journal | None
    error: str | None


def open_session(request: SessionRequest) -> OpenedSession:
    """The model and method of ``request``, its project and the project's journal restored into it.

    Raises:
        OpenFailed: the model or the project cannot be opened (the message says why).
    """
    try:
        session = load_session(request)
    except Exception as exc:  # ModelLoadError, unknown method, bad settings, unavailable device, ...
        if not isinstance(exc, F2TTAError | KeyError | ValueError | TypeError | OSError | RuntimeError):
            logger.exception("loading %s failed", request.model)
        raise OpenFailed(shown(f"Cannot load the model {request.model}: {exc}")) from exc
    sha256 = model_sha256(request.model)
    if request.expected_sha256 and sha256 != request.expected_sha256:
        raise OpenFailed(
            shown(
                f"The model {request.model} is not the one project {request.project!r} was made with: "
                f"its content changed (SHA-256 {request.expected_sha256[:12]}… then, {sha256[:12] or '?'}… now)."
            ),
            "model-changed",
        )
    try:
        project = open_project(request)
    except (ProjectError, OSError) as exc:
        raise OpenFailed(shown(f"Cannot open project {request.project!r}: {exc}"), "project") from exc
    journal, error = open_journal(project, session)
    if error is None:
        try:
            project.note_model(str(request.model), sha256, request.method, dict(request.method_config))
        except (ProjectError, OSError) as exc:
            logger.warning("project %s cannot record its model: %s", project.name, exc)
    return OpenedSession(session, project, journal, error)


def load_session(request: SessionRequest) -> Session:
    """The model and method of ``request`` on its device (raises what loading raises)."""
    config = method_config(request.method, request.method_config)
    return Session(
        request.model,
        method=request.method,
        method_config=config,
        device=None if request.device in ("", "auto") else request.device,
    )


def open_project(request: SessionRequest) -> Project:
    """The ``--state`` directory of ``request``, or its project in the studio home."""
    if request.state_dir is not None:
        return Project(request.state_dir, external=True)
    return ProjectStore(request.home).open(request.project)


def open_journal(project: Project, session: Session) -> tuple[Journal | None, str | None]:
    """The project's journal restored into ``session``, and the user-facing reason it cannot be used.

    A journal whose state cannot be read is returned open (locked) with its reason: a reset
    replaces the state.
    """
    try:
        journal = project.open_journal()
    except (StateError, OSError) as exc:
        return None, notices.project_unusable(project.name, exc)
    try:
        journal.restore(session)
        journal.check_space(session)
    except SettingsMismatchError as exc:
        journal.close()
        return None, notices.settings_differ(project.name, exc.differences)
    except StateError as exc:
        return journal, notices.state_unusable(project.name, exc)
    return journal, None


class OpenSource(NamedTuple):
    source: Source
    slide: Slide | None  # open until the worker closes it
    tissue: np.ndarray | None  # a slide's tissue mask (thumbnail grid)


def open_source(
    request: SourceRequest, card: ModelCard, project: Project | None = None, journal: Journal | None = None
) -> OpenSource:
    """The folder or slide of ``request`` in its arrival order, for a model described by ``card``;
    once it opened, it goes first in ``project``'s list of inputs.

    A folder ``journal`` says was begun in another order continues in that one (as ``f2tta run``
    without ``--order`` does), so its rows keep their "#" and the stream the method saw stays one
    stream; unless the request chose the order for it (``order_chosen``)."""
    if request.kind == "slide":
        slide_source = open_slide_source(request.path, card.img_size, card.mpp, request.min_tissue)
        tissue = tissue_mask(slide_source.thumbnail)[0]
        opened = OpenSource(slide_source, reopen_slide(slide_source), tissue)
    else:
        folder = open_folder(request.path, card.classes, request.order, request.manifest, seed=request.seed)
        if journal is not None and not request.order_chosen:
            folder = in_recorded_order(folder, journal, card.classes, request.manifest)
        opened = OpenSource(folder, None, None)
    if project is not None:
        note_input(project, request)
    return opened


def note_input(project: Project, request: SourceRequest) -> None:
    """Put the source just opened first in the project's list of inputs (a project folder only;
    a failure is logged: the list is a convenience, the run does not depend on it)."""
    if project.external:
        return
    try:
        recent.note_opened(project.path, request.path, request.kind)
    except OSError as exc:
        logger.warning("project %s cannot record %s: %s", project.name, request.path, exc)


def note_reports(project: Project | None, source: Source | None, directory: Path) -> None:
    """Record in the project's list of inputs where the reports of ``source`` were written."""
    _note(project, source, "the reports", lambda folder, path: recent.note_reports(folder, path, directory))


def note_progress(project: Project | None, source: Source | None, journal: Journal | None) -> None:
    """Record in the project's list of inputs how many images of ``source`` the journal holds."""
    if source is None or journal is None:
        return
    done = len(journal.source(source.source_id).done())
    _note(project, source, "the images", lambda folder, path: recent.note_images(folder, path, done))


def _note(
    project: Project | None, source: Source | None, what: str, record: Callable[[Path, Path], object]
) -> None:
    """``record(project folder, source path)`` for a project folder (not an external state); a
    failure is logged: the list is a convenience, the run does not depend on it."""
    if project is None or project.external or source is None:
        return
    path = source.path if isinstance(source, SlideSource) else source.root
    try:
        record(project.path, path)
    except OSError as exc:
        logger.warning("project %s cannot record %s of %s: %s", project.name, what, path, exc)


def source_opened(
    source: Source,
    rows: tuple[PredictionRow, ...],
    journal: Journal,
    project: Project | None,
    card: ModelCard,
    tissue: np.ndarray | None,
    judged: KindTally | None,
) -> tuple[SourceOpened, OverlayStore | None]:
    """What the UI is told about a source just opened -- its restored rows with their kept overlays,
    the review folder, the gate's verdict, the project's other sources -- and the overlay store
    its new rows are kept in (None without a project folder)."""
    done = processed_here(journal.source(source.source_id).done(), source)  # not those gone since
    notes = input_notes(journal, source, rows)  # a slide replaced, pictures changed since decided
    if notes:
        source = dataclasses.replace(source, notes=source.notes + notes)
    review_dir = project.path / REVIEW_DIR if project is not None else None
    overlays: dict[str, Overlay] = {}
    store = None
    if review_dir is not None:
        store = OverlayStore(review_dir, source.source_id)
        overlays = store.load(r.key for r in rows)
    others = [
        len(rec.processed) for sid, rec in journal.record.items() if sid != source.source_id and rec.processed
    ]
    gate = check_source(source, card, judged)
    looks_like = judged.verdict() if judged is not None else None
    folders = subfolder_warning(source, card.classes) if isinstance(source, FolderSource) else None
    opened = SourceOpened(
        source, done, rows, overlays, review_dir, tissue, len(others), sum(others), looks_like, gate, folders
    )
    return opened, store
