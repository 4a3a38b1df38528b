"""Projects as the user sees them (Qt-free): a model named by its card, the project list's lines.

A *project* (:mod:`app.core.projects`) is the folder ``<studio home>/profiles/<name>/`` with its
model, adaptation state, review marks and the folders and slides opened in it
(:mod:`app.core.recent`).

A model is shown by what its card says -- the kind of image, the classes, the network and the
training site -- never by its file name: both demo models are ``model.safetensors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app._engine import KIND_NAMES, JsonFileError, ModelCard, model_kind, read_json_file
from app.core.names import describe_model
from app.core.projects import ProjectInfo
from app.core.settings import DEMO_NAMES

MAX_CARD_BYTES = 1 << 20  # a model card is a small JSON file
MAX_CARD_DEPTH = 64  # the engine's own limit on a card's nesting
MISSING, NO_CARD = "model file missing", "no readable model card"
UNUSABLE = (MISSING, NO_CARD)  # how model_file_text starts for a model that cannot be used


def card_of(checkpoint: str | Path) -> ModelCard | None:
    """The card beside ``checkpoint`` (same stem, ``.json``), or None when it cannot be read."""
    path = Path(checkpoint).with_suffix(".json")
    try:
        data = read_json_file(path, what="model card", max_bytes=MAX_CARD_BYTES, max_depth=MAX_CARD_DEPTH)
        return ModelCard.from_json(data, origin=str(path))
    except (JsonFileError, OSError, ValueError, TypeError, KeyError):
        return None


def kind_text(card: ModelCard) -> str:
    """ "Histology", "Fundus photographs" or "Unknown kind of image"."""
    kind = model_kind(card)
    return KIND_NAMES[kind].capitalize() if kind is not None else "Unknown kind of image"


NAMED_CLASSES = 6  # a card's classes named in one line; more are counted (a card may hold 10 000)


def classes_text(classes: tuple[str, ...] | list[str]) -> str:
    """``normal / tumor``; for many classes the first few and the count (``a / b / c / d / … (400 classes)``)."""
    if len(classes) <= NAMED_CLASSES:
        return " / ".join(classes)
    return " / ".join(classes[: NAMED_CLASSES - 2]) + f" / … ({len(classes)} classes)"


def model_text(card: ModelCard) -> str:
    """``Histology · normal / tumor · ViT-Tiny, 4 blocks, 12-px patches, 96 px input — site1``."""
    text = f"{kind_text(card)} · {classes_text(card.classes)} · {describe_model(card)}"
    return f"{text} — {card.source_domain}" if card.source_domain else text


REFERENCE_SUFFIX = ".reference.safetensors"  # a model's source reference beside it, not a model


def model_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a model checkpoint to choose (None: it may be one; loading it checks the
    rest): missing, a folder, or a model's source reference (``model.reference.safetensors``)."""
    if path.name.endswith(REFERENCE_SUFFIX):
        return f"{path.name} is the source reference beside a model, not a model: choose the model's own file"
    if not path.exists():
        return f"{path}: no such file"
    if not path.is_file():
        return f"{path}: not a file (choose the model's .safetensors file)"
    return None


def model_file_text(checkpoint: str | Path) -> str:
    """The card's description of the model at ``checkpoint``, or why there is none."""
    return _described(Path(checkpoint), card_of(checkpoint))


def _described(path: Path, card: ModelCard | None) -> str:
    if not path.is_file():
        return f"{MISSING}: {path}"
    return model_text(card) if card is not None else f"{NO_CARD} beside {path.name}"


def project_lines(info: ProjectInfo, card: ModelCard | None = None) -> tuple[str, str]:
    """The project list's entry after a project's name (``Histology · 60 images seen``) and its
    tooltip (the model by its card, the images seen and when saved), the card read once; a
    damaged project says so, and why, instead."""
    if info.damaged:
        return "damaged: cannot be opened", info.damaged
    if card is None:  # ``card``: the open project's, known already (no file is read)
        card = card_of(info.model_path) if info.model_path else None
    seen = f"{info.images_seen} image{'s' if info.images_seen != 1 else ''} seen"
    entry = f"{kind_text(card) if card is not None else 'no usable model'} · {seen}"
    model = _described(Path(info.model_path), card) if info.model_path else "no model chosen yet"
    if info.updated:
        seen += f", saved {info.updated.replace('T', ' ')[:16]}"
    return entry, f"{model}\n{seen}"


def project_entry(info: ProjectInfo) -> str:
    """The project list's words after a project's name: ``Histology · 60 images seen``."""
    return project_lines(info)[0]


def project_tooltip(info: ProjectInfo) -> str:
    """The project list's tooltip: the model by its card and the images seen."""
    return project_lines(info)[1]


@dataclass(frozen=True)
class ModelChoice:
    """A model the New project dialog offers: its label, its checkpoint and its card's description."""

    label: str
    path: str
    text: str


def model_choices(current: Path | None, demos: dict[str, Path]) -> list[ModelChoice]:
    """The current project's model first, then each installed demo model not already listed."""
    choices: list[ModelChoice] = []
    seen: set[Path] = set()
    if current is not None and current.is_file():
        demo = next(
            (kind for kind, path in demos.items() if path.is_file() and path.resolve() == current.resolve()),
            None,
        )
        label = "The current project's model"
        if demo is not None:  # say which: "model.safetensors" names neither demo
            label = (
                f"The {KIND_NAMES.get(demo, DEMO_NAMES.get(demo, demo))} demo model (the current project's)"
            )
        choices.append(ModelChoice(label, str(current), model_file_text(current)))
        seen.add(current.resolve())
    for kind, path in demos.items():
        if path.is_file() and path.resolve() not in seen:
            label = f"The {KIND_NAMES.get(kind, DEMO_NAMES.get(kind, kind))} demo model"
            choices.append(ModelChoice(label, str(path), model_file_text(path)))
            seen.add(path.resolve())
    return choices


def next_project(infos: list[ProjectInfo], deleted: str) -> str | None:
    """The project to continue in after ``deleted`` is deleted: the one saved most recently
    (then created most recently; then the first by name), None when no other is left."""
    others = [i for i in infos if i.name != deleted]
    if not others:
        return None
    return max(others, key=lambda i: (i.updated or "", i.created or "", [-ord(ch) for ch in i.name])).name
