"""The banners the app raises where the user acts, each with its fixes (Qt-free wording).

Each function turns a situation into a :class:`~app.core.notices.Banner`; the action ids are handled
by :class:`app.control.project_actions.ProjectActions` (``demo-model[:kind]``, ``settings``,
``new-project-for-method``, ``reset``, ``interleave``, ``new-project:<name>``, ``open:<folder>``,
``show-log``, ``show-certificates``, ``locate-model``, ``own-model``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from app._engine import Certificate, FolderSource, GateWarning, SlideSource, Source
from app.core.applicability import KIND_NAMES, Collapse, Kind
from app.core.certificates import decided_text, is_warning
from app.core.notices import Banner

SOURCE_KEYS = "source-"  # banners about the open source start with this (cleared when another opens)
SESSION_KEYS = ("model", "project", "export")  # banners whose cause goes with the session (a project switch)


def model_failed(message: str, offer_demo: bool) -> Banner:
    """The model cannot be loaded (``offer_demo``: the project has no model of its own yet, so the
    demo model may stand in; a project's own model is never replaced by it)."""
    actions: tuple[tuple[str, str], ...] = (("settings", "Settings…"),)
    if offer_demo:
        actions = (("demo-model", "Use the demo model"), *actions)
    return Banner(
        "model",
        "error",
        f"No model is loaded, so nothing can be opened or run. {message.rstrip('.')}.",
        actions,
    )


def project_refused(project: str, method: str, error: str) -> Banner:
    """The project's saved state cannot be used with the session's model, method or settings."""
    return Banner(
        "project",
        "error",
        error,
        (
            ("new-project-for-method", "New project for this method"),
            ("reset", "Reset project…"),
            ("settings", "Settings…"),
        ),
    )


def project_damaged(project: str, message: str) -> Banner:
    """The project's own file cannot be used: this project is not opened (the others are)."""
    return Banner(
        "project",
        "error",
        f"Project '{project}' cannot be opened. {message.rstrip('.')}.",
        (("new-project", "New project…"),),
    )


def _model_not_its_own(text: str, fix: tuple[str, str]) -> Banner:
    """A project that cannot be opened with this model: ``fix`` opens it with its own, or a new
    project is made for this one."""
    return Banner("model", "error", text, (fix, ("new-project", "New project…")))


def model_missing(project: str, model: Path) -> Banner:
    """The project's model file is not there any more: never replaced by another, never reset."""
    return _model_not_its_own(
        f"Project '{project}' was made with the model {model}, which is not there any more. Its "
        "adaptation state belongs to that model: locate it (moved or renamed), or start a new project.",
        ("locate-model", "Locate the model…"),
    )


def model_changed(project: str, message: str) -> Banner:
    """The project's model file holds other content than the project was made with."""
    return _model_not_its_own(
        f"{message.rstrip('.')}. Project '{project}' keeps the adaptation state of the model it was made "
        "with: locate that model, or start a new project for this one.",
        ("locate-model", "Locate the original model…"),
    )


def other_model(project: str, own: Path, chosen: Path) -> Banner:
    """Another model was chosen for a project that has adapted its own."""
    return _model_not_its_own(
        f"Project '{project}' adapts the model {own}, not {chosen}. Open it with its own model, or "
        "start a new project for the other one.",
        ("own-model", "Open with its own model"),
    )


def project_for_method(project: str, method: str) -> str:
    """A project name for ``project`` under ``method`` (only characters project names allow)."""
    tag = re.sub(r"[^A-Za-z0-9._-]", "-", method.replace("+", "-plus"))
    return f"{project} {tag}"[:64].strip()


def source_failed(message: str, still_open: Source | None) -> Banner:
    text = message.rstrip(".") + "."
    if still_open is not None:
        what = "slide" if isinstance(still_open, SlideSource) else "folder"
        text += f" The {what} '{still_open.display_name}' stays open."
    return Banner("open", "error", text, (("show-log", "Show log"),))


def subfolders(text: str, images: Kind | None, model: Kind | None, demos: set[str]) -> Banner:
    return Banner(SOURCE_KEYS + "folders", "warning", text, _demo_action(images, model, demos))


def class_sorted(text: str) -> Banner:
    return Banner(SOURCE_KEYS + "sorted", "warning", text, (("interleave", "Interleave (seeded)"),))


def gate(warning: GateWarning, images: Kind | None, model: Kind | None, demos: set[str]) -> Banner:
    """A check of the engine's applicability gate that fired (``f2tta run`` stops with exit code 4)."""
    if warning.check == "class-sorted":
        return class_sorted(warning.message)
    if warning.check == "resolution":
        return resolution(warning.message)
    return Banner(SOURCE_KEYS + warning.check, "warning", warning.message, _demo_action(images, model, demos))


def resolution(warning: str) -> Banner:
    return Banner(SOURCE_KEYS + "resolution", "warning", warning)


def new_source_in_project(project: str, source: Source, other_images: int, other_sources: int) -> Banner:
    """A folder or slide new to a project that has already adapted to other sources."""
    name = source.display_name if isinstance(source, FolderSource) else Path(source.display_name).stem
    suggestion = re.sub(r"[^A-Za-z0-9 ._-]", "-", name).strip(" .-_")[:64] or "new site"
    plural = "s" if other_sources > 1 else ""
    text = (
        f"'{source.display_name}' opens in project '{project}', which has already adapted to {other_images} "
        f"images from {other_sources} other source{plural}. Images of another site belong in a project of "
        "their own, or the adaptation carries over from one site to the next."
    )
    return Banner(
        SOURCE_KEYS + "project", "info", text, ((f"new-project:{suggestion}", f"New project '{suggestion}'"),)
    )


def new_images(count: int, source: Source) -> Banner:
    """Images were copied into the open folder after it opened (a folder being copied into)."""
    plural = "s" if count != 1 else ""
    return Banner(
        SOURCE_KEYS + "new-images",
        "info",
        f"{count} new image{plural} arrived in '{source.display_name}' since it was opened. Process them?",
        (("take-new", f"Process the {count} new image{plural}"),),
    )


def collapse(
    found: Collapse, images: Kind | None, model: Kind | None, demos: set[str], kind_told: bool = False
) -> Banner:
    """The collapse, and the images' kind where it differs from the model's and the gate has not
    said so already (``kind_told``: the two banners offer the same fix and show as one)."""
    text = found.text()
    if images is not None and model is not None and images != model and not kind_told:
        text += f" The images look like {KIND_NAMES[images]}; this model was trained on {KIND_NAMES[model]}."
    return Banner(SOURCE_KEYS + "collapse", "warning", text, _demo_action(images, model, demos))


def _demo_action(images: Kind | None, model: Kind | None, demos: set[str]) -> tuple[tuple[str, str], ...]:
    if images is not None and images != model and images in demos:
        return ((f"demo-model:{images}", f"Use the {images} demo model"),)
    return ()


def review_key(number: int) -> str:
    """The banner of the site's review: one at a time, whichever comparison was decided last (an
    older one's sentence would say another rule decides; ``number`` is kept for the callers)."""
    return f"{SOURCE_KEYS}review"


def review_decided(line: Certificate) -> Banner:
    """A comparison of the site's review was decided (a revert is a warning; the others are news)."""
    return Banner(
        review_key(line.number),
        "warning" if is_warning(line) else "info",
        decided_text(line),
        (("show-certificates", "Show certificates"),),
    )


def review_rule(decides: str) -> Banner:
    """On opening: the site's reviews put another rule than adapting's own in use; ``decides`` says
    which (``SiteCertificates.decides``: "the best-fit threshold decides this folder", or each part's)."""
    text = f"{decides[:1].upper()}{decides[1:]}, as your answers in its review certified."
    return Banner(review_key(0), "info", text, (("show-certificates", "Show certificates"),))


def exported(directory: str, names: Sequence[str]) -> Banner:
    return Banner(
        "export",
        "info",
        f"Reports written to {directory}: {', '.join(names)}.",
        ((f"open:{directory}", "Open export folder"),),
    )


def export_failed(message: str) -> Banner:
    return Banner("export", "error", message, (("show-log", "Show log"),))


def fresh_project(deleted: str, name: str, model: str) -> Banner:
    """The project in use was deleted and no other was left: a new empty one is open."""
    return Banner(
        "project",
        "info",
        f"Project '{deleted}' was deleted. No other project was left, so a new empty project '{name}' "
        f"is open with the same model ({model}). To work with another model, make a new project.",
        (("new-project", "New project…"),),
    )
