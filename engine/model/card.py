"""Model cards and checkpoints: a timm ViT's weights plus the JSON that says how to use them.

A model is two files side by side: ``NAME.safetensors`` (or a torch file, loaded with
``weights_only=True``) and ``NAME.json``, the card. The card names the timm architecture and the
keyword arguments it was built with, the input size and normalisation, the class names and the
source domain, so a checkpoint can be rebuilt without guessing.

A card is untrusted input: it is read as a regular file of at most :data:`MAX_CARD_BYTES` with
bounded JSON nesting, every field is type-checked and every number bounded
(``engine/model/card_schema.py``, ``std > 0``), and the model it describes is first built on PyTorch's ``meta`` device (no memory)
to check its size and to compare its tensor shapes with the checkpoint's header, so a card that
describes a 20 000-pixel or 3 000-block model is refused before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch
from safetensors.torch import load_file, save_file

from engine.errors import ModelLoadError
from engine.model.card_schema import card_fields, check_card
from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import (
    JsonFileError,
    SchemaError,
    loads_bounded,
    read_json_file,
    require_int,
    require_list,
    require_object,
)
from engine.util.files import UnsafeFileError, open_regular

logger = logging.getLogger(__name__)

CARD_VERSION = 1

MAX_CARD_BYTES = 1 << 20  # a card is a few hundred bytes; its "training" record a few kB
MAX_JSON_DEPTH = 32
# Largest model built (ViT-g/14 has 1.0e9 parameters) and longest token sequence (128 x 128 patches).
MAX_MODEL_PARAMS = 1_500_000_000
MAX_TOKENS = 16_384


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
    def from_json(cls, data: object, origin: str = "model card") -> ModelCard:
        """A card from its parsed JSON; every field type-checked and bounded.

        Raises:
            ModelLoadError: a missing field, a wrong type or a value out of range, named.
        """
        if isinstance(data, dict):
            missing = [k for k in ("arch", "classes", "img_size") if k not in data]
            if missing:
                raise ModelLoadError(f"{origin}: missing field(s) {', '.join(missing)}")
        try:
            card = cls(**card_fields(data))
            check_card(vars(card))
        except SchemaError as exc:
            raise ModelLoadError(f"{origin}: invalid field: {exc}") from exc
        return card

    def validate(self, origin: str = "model card") -> None:
        """Check every field's type and bound (``engine/model/card_schema.py``) without building anything.

        Raises:
            ModelLoadError: naming the first field out of bounds.
        """
        try:
            check_card(vars(self))
        except SchemaError as exc:
            raise ModelLoadError(f"{origin}: invalid field: {exc}") from exc

    def check_shapes(self) -> dict[str, tuple[int, ...]]:
        """Build the model on the ``meta`` device (no memory used), check its size, return its tensor shapes.

        Raises:
            ModelLoadError: the card is out of bounds, timm cannot build it, or the model would
                exceed :data:`MAX_MODEL_PARAMS` parameters or :data:`MAX_TOKENS` tokens.
        """
        self.validate()
        with torch.device("meta"):
            model = self._create()
        params = sum(p.numel() for p in model.parameters())
        if params > MAX_MODEL_PARAMS:
            raise ModelLoadError(
                f"model card describes a model of {params:,} parameters, more than the limit of {MAX_MODEL_PARAMS:,}"
            )
        tokens = getattr(getattr(model, "patch_embed", None), "num_patches", None)
        if isinstance(tokens, int) and tokens > MAX_TOKENS:
            raise ModelLoadError(
                f"model card describes {tokens} image tokens per image ({self.img_size}px), more than the "
                f"limit of {MAX_TOKENS}"
            )
        return {k: tuple(v.shape) for k, v in model.state_dict().items()}

    def build(self) -> torch.nn.Module:
        """Create the (randomly initialised, never downloaded) timm model this card describes.

        The card is checked first (:meth:`check_shapes`), so an out-of-bounds card allocates nothing.
        """
        self.check_shapes()
        return self._create()

    def _create(self) -> torch.nn.Module:
        try:
            model: torch.nn.Module = timm.create_model(
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
        return model


def card_path_for(checkpoint: str | Path) -> Path:
    """The card that belongs to a checkpoint: same stem, ``.json``."""
    return Path(checkpoint).with_suffix(".json")


CHECKSUM_KEY = "weights_sha256"


def read_card(path: str | Path) -> ModelCard:
    return ModelCard.from_json(_read_card_json(path), origin=str(path))


def _read_card_json(path: str | Path) -> dict[str, Any]:
    try:
        data = read_json_file(path, what="model card", max_bytes=MAX_CARD_BYTES, max_depth=MAX_JSON_DEPTH)
    except FileNotFoundError as exc:
        raise ModelLoadError(f"model card not found: {path}") from exc
    except JsonFileError as exc:  # not a regular file, too large, not UTF-8, not JSON, too deep
        raise ModelLoadError(f"unreadable {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"model card {path} is not a JSON object")
    return data


def _check_checkpoint_file(path: Path) -> None:
    try:
        fh, _ = open_regular(path)
    except UnsafeFileError as exc:
        if not path.exists() and not path.is_symlink():
            raise ModelLoadError(f"checkpoint not found: {path}") from exc
        raise ModelLoadError(f"checkpoint {path} cannot be read: {exc.reason}") from exc
    fh.close()


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from a safetensors file's header, without reading any tensor."""
    try:
        fh, st = open_regular(path)
        with fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > min(st.st_size - 8, 100_000_000):
                raise ValueError(f"header length {length} does not fit a file of {st.st_size} bytes")
            header = require_object(
                loads_bounded(fh.read(length), max_bytes=100_000_000, max_depth=MAX_JSON_DEPTH), "the header"
            )
        shapes: dict[str, tuple[int, ...]] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dims = require_list(require_object(info, name).get("shape"), f"{name}.shape", 8)
            shapes[name] = tuple(require_int(d, f"{name}.shape", 0, 2**40) for d in dims)
        return shapes
    except (UnsafeFileError, struct.error, ValueError) as exc:
        raise ModelLoadError(f"checkpoint {path} is not a readable safetensors file: {exc}") from exc


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
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


def _refuse_non_finite(checkpoint: Path, weights: Mapping[str, torch.Tensor]) -> None:
    """Refuse weights holding inf or NaN: such a model predicts one class with no confidence.

    A checksum only proves the file is the one the card was written for; a model trained into
    divergence (or edited) is written with its non-finite weights and a matching checksum.

    Raises:
        ModelLoadError: naming how many tensors hold non-finite values and the first of them.
    """
    bad = [
        name
        for name, t in weights.items()
        if t.is_floating_point() or t.is_complex()
        if not bool(torch.isfinite(t).all())
    ]
    if bad:
        raise ModelLoadError(
            f"checkpoint {checkpoint} holds non-finite weights (inf or NaN) in {len(bad)} tensor(s), e.g. "
            f"{', '.join(sorted(bad)[:3])}: it was damaged or trained into divergence and cannot be used"
        )


def describe_mismatch(
    expected: Mapping[str, torch.Tensor | tuple[int, ...]],
    got: Mapping[str, torch.Tensor | tuple[int, ...]],
    limit: int = 6,
) -> str:
    """A short, human-readable list of what differs between two state dicts or their shapes ('' if nothing)."""

    def shape(v: torch.Tensor | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(v.shape) if isinstance(v, torch.Tensor) else tuple(v)

    problems: list[str] = []
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    if missing:
        problems.append(f"missing {len(missing)} tensor(s), e.g. {', '.join(missing[:limit])}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} tensor(s), e.g. {', '.join(unexpected[:limit])}")
    shapes = [
        f"{k}: expected {shape(expected[k])}, checkpoint has {shape(got[k])}"
        for k in sorted(set(expected) & set(got))
        if shape(expected[k]) != shape(got[k])
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
        sha = raw.get(CHECKSUM_KEY)
        expected_sha = sha if isinstance(sha, str) and sha else None
    else:
        card.validate()
    _check_checkpoint_file(checkpoint)
    if expected_sha:
        actual = _sha256_file(checkpoint)
        if actual != expected_sha:
            raise ModelLoadError(
                f"checkpoint {checkpoint} is damaged or was replaced: its SHA-256 {actual[:16]}... does not match "
                f"the {expected_sha[:16]}... recorded in its model card"
            )
    expected = card.check_shapes()  # on the meta device: nothing is allocated yet

    def refuse_if_mismatched(got: Mapping[str, torch.Tensor | tuple[int, ...]]) -> None:
        mismatch = describe_mismatch(dict(expected), got)
        if mismatch:
            raise ModelLoadError(
                f"checkpoint {checkpoint} does not match the model card ({card.arch}, {card.num_classes} classes, "
                f"{card.img_size}px): {mismatch}"
            )

    if checkpoint.suffix == ".safetensors":
        refuse_if_mismatched(dict(_safetensors_shapes(checkpoint)))
    weights = _read_weights(checkpoint)
    refuse_if_mismatched(dict(weights))
    _refuse_non_finite(checkpoint, weights)
    model = card._create()
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
    try:
        fh, _ = open_regular(path)
    except UnsafeFileError as exc:
        raise ModelLoadError(f"{path} cannot be read: {exc.reason}") from exc
    with fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
