"""Images in memory: decoding dataset items, normalising, predicting and measuring accuracy."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from engine.data.readers import Item, SkippedFile, read_array
from engine.errors import ImageReadError
from engine.model.card import LoadedModel

logger = logging.getLogger(__package__)  # one logger for the package: "engine.training"


def load_items(
    items: Sequence[Item], size: int, skipped: list[SkippedFile] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode items to a uint8 (N, 3, size, size) tensor and int64 labels; unreadable files are skipped.

    Each unreadable file is logged with its path and reason and appended to ``skipped``.
    """
    images: list[np.ndarray] = []
    labels: list[int] = []
    for it in items:
        try:
            images.append(read_array(it.path, size))
        except ImageReadError as exc:
            reason = str(exc).removeprefix(f"{it.path}: ")
            logger.warning("skipping %s: %s", it.path, reason)
            if skipped is not None:
                skipped.append(SkippedFile(it.path, reason))
            continue
        labels.append(it.label)
    if not images:
        return torch.empty((0, 3, size, size), dtype=torch.uint8), torch.empty(0, dtype=torch.int64)
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
    return x, torch.tensor(labels, dtype=torch.int64)


def normalise(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 or 0-1 float (B, 3, H, W) -> normalised float32."""
    if x.dtype == torch.uint8:
        x = x.float() / 255.0
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - m) / s


def _unwrap(
    model_or_loaded: torch.nn.Module | LoadedModel,
    img_size: int | None,
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> tuple[torch.nn.Module, int | None, Sequence[float], Sequence[float]]:
    if isinstance(model_or_loaded, LoadedModel):
        card = model_or_loaded.card
        return model_or_loaded.model, img_size or card.img_size, mean or card.mean, std or card.std
    return model_or_loaded, img_size, mean or (0.5, 0.5, 0.5), std or (0.5, 0.5, 0.5)


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module,
    images: torch.Tensor | np.ndarray,
    mean: Sequence[float] = (0.5, 0.5, 0.5),
    std: Sequence[float] = (0.5, 0.5, 0.5),
    batch_size: int = 128,
) -> torch.Tensor:
    """Logits (N, classes) of uint8 images, given as (N, 3, H, W) tensor or (N, H, W, 3) array."""
    x = (
        torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
        if isinstance(images, np.ndarray)
        else images
    )
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [
        model(normalise(x[i : i + batch_size].to(device), mean, std)).float().cpu()
        for i in range(0, x.shape[0], batch_size)
    ]
    model.train(was_training)
    return torch.cat(out) if out else torch.empty(0)


def evaluate(
    model_or_loaded: torch.nn.Module | LoadedModel,
    items: Sequence[Item] | tuple[np.ndarray, np.ndarray],
    *,
    img_size: int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    batch_size: int = 128,
    skipped: list[SkippedFile] | None = None,
) -> float:
    """Accuracy (0-1) of a model on dataset items or on ``(images uint8 (N, H, W, 3), labels)``.

    With a :class:`LoadedModel` the card supplies the input size and normalisation. Unreadable
    files are left out (and appended to ``skipped``); an empty set gives NaN.
    """
    model, size, m, s = _unwrap(model_or_loaded, img_size, mean, std)
    if isinstance(items, tuple) and len(items) == 2 and isinstance(items[0], np.ndarray):
        images, labels = items
        logits = predict_logits(model, images, m, s, batch_size)
        y = torch.as_tensor(labels)
    else:
        if size is None:
            raise ValueError("evaluate() needs img_size for a bare model")
        listed: Sequence[Item] = items
        correct, total = 0, 0
        for i in range(0, len(listed), 1024):  # bounded memory on large test sets
            x, y = load_items(listed[i : i + 1024], size, skipped)
            if len(y):
                correct += int((predict_logits(model, x, m, s, batch_size).argmax(1) == y).sum())
                total += len(y)
        return correct / total if total else float("nan")
    return float((logits.argmax(1) == y).float().mean()) if len(y) else float("nan")
