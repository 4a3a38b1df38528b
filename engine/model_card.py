"""Model cards and checkpoints: a timm ViT's weights plus the JSON that says how to use them.

A model is two files side by side: ``NAME.safetensors`` (or a torch file, loaded with
``weights_only=True``) and ``NAME.json``, the card. The card names the timm architecture and the
keyword arguments it was built with, the input size and normalisation, the class names and the
source domain, so a checkpoint can be rebuilt without guessing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch
from safetensors.torch import load_file, save_file

from engine._atomic import atomic_write_bytes
from engine.errors import ModelLoadError

logger = logging.getLogger(__name__)

CARD_VERSION = 1


@dataclass(frozen=True)
class ModelCard:
    """How to rebuild and feed a source model."""

    arch: str  # timm architecture name, e.g. "vit_tiny_patch16_224"
    classes: tuple[str, ...]  # class names in label order
    img_size: int  # square input side in pixels
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)  # per-channel normalisation mean (0-1 scale)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)  # per-channel normalisation std (0-1 scale)
    source_domain: str = ""  # the domain the model was trained on
    model_kwargs: dict[str, Any] = field(default_factory=dict)  # extra timm.create_model kwargs
    mpp: float | None = None  # microns per pixel of the training images, if known
    training: dict[str, Any] = field(default_factory=dict)  # how it was trained (augmentation, epochs)
    positive_class: int = 1  # label index used for precision/recall/AUC

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["classes"] = list(self.classes)
        data["mean"] = list(self.mean)
        data["std"] = list(self.std)
        data["card_version"] = CARD_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], origin: str = "model card") -> ModelCard:
        missing = [k for k in ("arch", "classes", "img_size") if k not in data]
        if missing:
            raise ModelLoadError(f"{origin}: missing field(s) {', '.join(missing)}")
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        try:
            kwargs["classes"] = tuple(str(c) for c in kwargs["classes"])
            kwargs["img_size"] = int(kwargs["img_size"])
            for key in ("mean", "std"):
                if key in kwargs:
                    vals = tuple(float(v) for v in kwargs[key])
                    if len(vals) != 3:
                        raise ValueError(f"{key} needs three values")
                    kwargs[key] = vals
            card = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"{origin}: invalid field: {exc}") from exc
        if card.num_classes < 2:
            raise ModelLoadError(f"{origin}: needs at least two classes, got {list(card.classes)}")
        return card

    def build(self) -> torch.nn.Module:
        """Create the (randomly initialised, never downloaded) timm model this card describes."""
        try:
            return timm.create_model(
                self.arch,
                pretrained=False,
                num_classes=self.num_classes,
                img_size=self.img_size,
                **self.model_kwargs,
            )
        except Exception as exc:  # timm raises RuntimeError/TypeError/KeyError for unknown archs/kwargs
            raise ModelLoadError(
                f"cannot build timm model {self.arch!r} with {self.model_kwargs}: {exc}"
            ) from exc


def card_path_for(checkpoint: str | Path) -> Path:
    """The card that belongs to a checkpoint: same stem, ``.json``."""
    return Path(checkpoint).with_suffix(".json")


CHECKSUM_KEY = "weights_sha256"


def read_card(path: str | Path) -> ModelCard:
    return ModelCard.from_json(_read_card_json(path), origin=str(path))


def _read_card_json(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelLoadError(f"model card not found: {path}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"model card {path} is unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"model card {path} is not a JSON object")
    return data


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise ModelLoadError(f"checkpoint not found: {path}")
    if path.suffix == ".safetensors":
        try:
            return load_file(str(path))
        except Exception as exc:  # safetensors raises SafetensorError / OSError
            raise ModelLoadError(f"checkpoint {path} is not a readable safetensors file: {exc}") from exc
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling refused or corrupt archive
        raise ModelLoadError(
            f"checkpoint {path} cannot be loaded safely (weights only, no code execution): {exc}"
        ) from exc
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ModelLoadError(f"checkpoint {path} does not hold a plain state dict of tensors")
    return {str(k): v for k, v in obj.items()}


def describe_mismatch(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor], limit: int = 6) -> str:
    """A short, human-readable list of what differs between two state dicts ('' if nothing)."""
    problems: list[str] = []
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    if missing:
        problems.append(f"missing {len(missing)} tensor(s), e.g. {', '.join(missing[:limit])}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} tensor(s), e.g. {', '.join(unexpected[:limit])}")
    shapes = [
        f"{k}: expected {tuple(expected[k].shape)}, checkpoint has {tuple(got[k].shape)}"
        for k in sorted(set(expected) & set(got))
        if expected[k].shape != got[k].shape
    ]
    if shapes:
        problems.append(f"{len(shapes)} shape mismatch(es): " + "; ".join(shapes[:limit]))
    return "; ".join(problems)


def fingerprint_state_dict(arch: str, state: dict[str, torch.Tensor]) -> str:
    """A stable hash of an architecture name and its weights (names, shapes, dtypes and bytes)."""
    h = hashlib.sha256(arch.encode())
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(str(t.dtype).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:32]


@dataclass
class LoadedModel:
    """A frozen timm model with its card and the fingerprint of its weights."""

    model: torch.nn.Module
    card: ModelCard
    fingerprint: str
    path: Path | None = None


def load_model(checkpoint: str | Path, card: ModelCard | None = None) -> LoadedModel:
    """Load a checkpoint and its card; refuse one whose tensors do not fit the card's architecture.

    Args:
        checkpoint: ``.safetensors`` or a torch file (read with ``weights_only=True``).
        card: the model card; read from the ``.json`` beside the checkpoint when omitted.

    Returns:
        The model in eval mode with every parameter frozen.

    Raises:
        ModelLoadError: with a message that names what is missing or differs.
    """
    checkpoint = Path(checkpoint)
    expected_sha: str | None = None
    if card is None:
        card_file = card_path_for(checkpoint)
        raw = _read_card_json(card_file)
        card = ModelCard.from_json(raw, origin=str(card_file))
        expected_sha = raw.get(CHECKSUM_KEY)
    if expected_sha and checkpoint.exists():
        actual = _sha256_file(checkpoint)
        if actual != expected_sha:
            raise ModelLoadError(
                f"checkpoint {checkpoint} is damaged or was replaced: its SHA-256 {actual[:16]}... does not match "
                f"the {expected_sha[:16]}... recorded in its model card"
            )
    weights = _read_weights(checkpoint)
    model = card.build()
    expected = model.state_dict()
    mismatch = describe_mismatch(expected, weights)
    if mismatch:
        raise ModelLoadError(
            f"checkpoint {checkpoint} does not match the model card ({card.arch}, {card.num_classes} classes, "
            f"{card.img_size}px): {mismatch}"
        )
    model.load_state_dict(weights, strict=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedModel(model, card, fingerprint_state_dict(card.arch, weights), checkpoint)


def save_model(model: torch.nn.Module, card: ModelCard, checkpoint: str | Path) -> Path:
    """Write ``checkpoint`` (safetensors) and its card atomically; returns the card path."""
    checkpoint = Path(checkpoint)
    if checkpoint.suffix != ".safetensors":
        raise ValueError("checkpoints are written as .safetensors")
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    tmp = checkpoint.with_name(f".{checkpoint.name}.tmp")
    save_file(state, str(tmp), metadata={"arch": card.arch})
    atomic_write_bytes(checkpoint, tmp.read_bytes())
    tmp.unlink()
    card_file = card_path_for(checkpoint)
    card_json = {**card.to_json(), CHECKSUM_KEY: _sha256_file(checkpoint)}
    atomic_write_bytes(card_file, (json.dumps(card_json, indent=2) + "\n").encode())
    return card_file


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
