"""The sentences the app shows in its log, status bar and dialogs, built from Qt-free data."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from app._engine import ReviewMark, Source
from app._engine import shown as shown_name
from app.core.filters import PredictionRow
from app.core.messages import RunEnded, SessionInfo, SourceOpened
from app.core.names import describe_model, method_label
from app.core.project_lines import model_text
from app.core.run_model import RunModel


@dataclass(frozen=True)
class Banner:
    """A message shown where the user acts (above the work area), with the fixes as buttons.

    Attributes:
        key: what it is about; a new banner with the same key replaces the old one.
        level: "error", "warning" or "info".
        text: the message.
        actions: ``(action id, button text)`` pairs; the controller knows the ids.
    """

    key: str
    level: str
    text: str
    actions: tuple[tuple[str, str], ...] = ()
    keys: tuple[str, ...] = ()  # a merged banner: the keys of every banner it stands for


LEVELS = ("info", "warning", "error")  # least to most severe


def merged(banners: Sequence[Banner]) -> list[Banner]:
    """The banners as shown: those that offer the same fix become one, so a fix is offered once.

    The merged banner keeps the first one's key and place, says every text (one a line), offers
    every fix once, takes the most severe level and lists every key it stands for in ``keys``.
    """
    shown: list[Banner] = []
    for banner in banners:
        ids = {action for action, _ in banner.actions}
        target = next((i for i, b in enumerate(shown) if ids & {a for a, _ in b.actions}), None)
        if target is None:
            shown.append(dataclasses.replace(banner, keys=(banner.key,)))
            continue
        into = shown[target]
        actions = into.actions + tuple(a for a in banner.actions if a[0] not in {x for x, _ in into.actions})
        level = max(into.level, banner.level, key=lambda lv: LEVELS.index(lv) if lv in LEVELS else 0)
        shown[target] = dataclasses.replace(
            into,
            level=level,
            text=f"{into.text}\n{banner.text}",
            actions=actions,
            keys=(*into.keys, banner.key),
        )
    return shown


def times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def model_line(info: SessionInfo) -> str:
    """The status bar's model label: the model by its card (kind of image, classes, network, training
    site), not its file name, which the demo models share."""
    return f"{model_text(info.card)} · {method_label(info.method)} · {info.device}"


def model_loaded(info: SessionInfo) -> str:
    return (
        f"Model {info.model_path} loaded ({describe_model(info.card)}, classes {', '.join(info.card.classes)}; "
        f"{method_label(info.method)} on {info.device})"
    )


def about(info: SessionInfo | None) -> str:
    if info is None:
        return ""
    card = info.card
    return (
        f"{describe_model(card)}, classes {', '.join(card.classes)}, trained on {card.source_domain or 'n/a'}"
    )


def source_opened(source: Source, opened: SourceOpened, pending: int, project: str) -> list[tuple[str, str]]:
    """(level, message) lines for the log when a source opens."""
    total = len(source.items)
    labels = f", ground truth from {source.label_origin}" if source.label_origin else ", no ground truth"
    lines = [("info", f"Opened {source.display_name}: {total} images{labels}; {pending} to process")]
    if opened.restored_rows:
        lines.append(
            (
                "info",
                f"{len(opened.restored_rows)} images were processed in an earlier session (project '{project}')",
            )
        )
    lines += [("warning", note) for note in source.notes]
    return lines


def update_skipped(row: PredictionRow) -> str:
    return (
        f"{row.name} (#{row.position + 1}): non-finite loss or gradient, update skipped "
        "(the adaptation keeps its last good state)"
    )


def run_ended(ended: RunEnded, model: RunModel) -> str:
    """``Run finished: 24 images processed, …; state saved``."""
    text = f"Run {ended.reason}: {ended.processed} images processed"
    if ended.failed:
        text += f", {ended.failed} could not be processed"
    made, unreadable, pending = ended.maps
    if made or unreadable or pending:
        text += f", {made} uncertainty maps made behind the decisions"
        text += f" ({unreadable} images could not be read again for theirs)" if unreadable else ""
        text += f", {pending} maps pending (made when the run goes on)" if pending else ""
    if ended.prompted:
        text += f", the adapted network's decisions (I-DiPT) made for {ended.prompted} images"
    if model.run_guard_events:
        text += f", collapse guard acted {times(model.run_guard_events)}"
    if model.run_skipped_updates:
        text += f", update skipped {times(model.run_skipped_updates)} (non-finite loss)"
    if ended.message:
        text += f" ({ended.message})"
    return text + ("; state saved" if ended.saved else "; state NOT saved")


def prompted_asked(images: int) -> str:
    """The review reached I-DiPT's candidate, whose decisions are made only now."""
    return (
        f"The review reached the adapted network's decisions (I-DiPT): they are made now for the "
        f"{images} images decided so far, in order (its prompt tuning); its questions follow"
    )


def project_unusable(name: str, exc: Exception) -> str:
    return f"Project '{name}' cannot be used: {str(exc).rstrip('.')}."


def settings_differ(name: str, differences: list[str]) -> str:
    return (
        f"The saved state of project '{name}' was made with other method settings "
        f"({'; '.join(differences)}). Set them back in Settings to continue it, or reset "
        "the project to the source model to use the new ones."
    )


def state_unusable(name: str, exc: Exception) -> str:
    return (
        f"The saved state of project '{name}' cannot be used: {str(exc).rstrip('.')}. "
        "Reset the project to the source model, or choose another project."
    )


def decision_undone(number: int) -> str:
    return (
        f"Comparison {number} of this folder's review is open again: the review it rested on was undone "
        "(the rule in use before it decides the images again)."
    )


def mark_undone(name: str, mark: ReviewMark | None, redo: bool) -> str:
    """The status line after an undo (``mark``: the mark the image has now) or a redo."""
    shown = shown_name(name)
    if redo:
        return f"Redone: the review mark on {shown}"
    if mark is None:
        return f"Undone: {shown} has no review mark (removed from the project)"
    return f"Undone: {shown} has its earlier review mark again"


def mark_against_label(dataset: str, mark: str, origin: str | None) -> tuple[str, str]:
    """The question asked before a review mark that disagrees with the dataset's label (title, text)."""
    where = "The folder" if origin in (None, "class sub-folders") else f"The dataset ({origin})"
    return (
        "Mark against the dataset's label?",
        f"{where} says '{dataset}'; you mark '{mark}'. Keep both: the dataset label stays, your mark "
        "is recorded beside it (the figures against the dataset's labels do not change; those "
        "against the reviewers' marks do).",
    )


def gate_question_here(reasons: Sequence[str], project: str) -> str:
    """Asked before a run of a slide whose only warning comes with every slide of the model
    (:func:`app.core.applicability.model_wide`): it runs in the open project, warning recorded."""
    text = "The applicability check says the model may not apply to these images:\n\n"
    text += "\n".join(f"• {r}" for r in reasons)
    return text + (
        "\n\nThis warning comes with every slide this model reads, so a project of its own would "
        f"protect nothing. Run the slide in project '{project}' anyway? The warning is recorded with "
        "the figures and the reports."
    )


def gate_question(reasons: Sequence[str], project: str | None = None, apart: str | None = None) -> str:
    """Asked before a run of images the applicability check flags (``f2tta run`` refuses them
    without ``--accept-warnings``): in ``project``'s case, whether to run them in the project
    ``apart``; for a ``--state`` directory, in it."""
    text = "The applicability check says the model may not apply to these images:\n\n"
    text += "\n".join(f"• {r}" for r in reasons)
    if project is None or apart is None:
        return text + "\n\nRun them anyway in this state directory (as f2tta run --accept-warnings would)?"
    return text + (
        f"\n\nRunning them would adapt project '{project}' to them. Run them anyway in a new project "
        f"'{apart}' with the same model (project '{project}' is not touched)?"
    )
