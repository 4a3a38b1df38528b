"""What a training run is made of (:class:`TrainConfig`) and the timm model it builds; nothing is downloaded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch

from engine.errors import F2TTAError
from engine.training._augment import Augmentation

DEFAULT_ARCH = "vit_tiny_patch16_224"
DEFAULT_IMG_SIZE = 96
# The demo model's shape: 8 x 8 tokens of 12 px, 4 blocks of width 192 (about 1.9 M parameters).
DEFAULT_MODEL_KWARGS: dict[str, Any] = {"patch_size": 12, "depth": 4}
#: Optimisers a TrainConfig may name, with the name the model card records.
OPTIMIZERS = {"adam": "Adam", "adamw": "AdamW"}


class TrainingError(F2TTAError):
    """A source model cannot be trained as asked (no pretrained weights cached, bad arguments...)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run."""

    arch: str = DEFAULT_ARCH  # timm architecture name
    img_size: int = DEFAULT_IMG_SIZE  # square input side in pixels
    model_kwargs: dict[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_MODEL_KWARGS)
    )  # extra timm kwargs
    epochs: int = 40  # maximum number of epochs
    batch_size: int = 64  # images per optimisation step
    lr: float = 1e-3  # peak learning rate
    weight_decay: float = 0.0  # Adam: L2 penalty; AdamW: decoupled decay of the weight matrices
    warmup_epochs: float = 2.0  # linear warm-up (at most 20 % of the run), then cosine decay to zero
    patience: int = 10  # stop after this many epochs without a better validation accuracy
    seed: int = 0  # seeds the weights, the batch order and the augmentation
    split_seed: int = 0  # seeds the per-domain 60/15/25 split
    pretrained: bool = False  # start from timm's pretrained weights (only from the local cache)
    augmentation: Augmentation = field(default_factory=Augmentation)
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)  # input normalisation (0-1 scale)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    device: str | None = None  # None: CUDA, then MPS, then CPU
    optimizer: str = "adam"  # "adam" or "adamw" (see OPTIMIZERS)
    label_smoothing: float = 0.0  # of the training loss (validation loss is plain cross-entropy)
    recipe: str = "default"  # the name of the recipe these settings came from (recorded in the card)


def check_config(cfg: TrainConfig) -> None:
    """Refuse settings no run can use, before any data is read.

    Raises:
        TrainingError: naming the setting.
    """
    aug = cfg.augmentation
    problems = [
        (
            cfg.optimizer not in OPTIMIZERS,
            f"unknown optimizer {cfg.optimizer!r} (choose {', '.join(OPTIMIZERS)})",
        ),
        (
            not 0.0 <= cfg.label_smoothing < 1.0,
            f"label smoothing must lie in [0, 1), got {cfg.label_smoothing}",
        ),
        (not 0.0 < aug.crop_scale <= 1.0, f"crop scale must lie in (0, 1], got {aug.crop_scale}"),
        (not 0.0 <= aug.blur_p <= 1.0, f"blur probability must lie in [0, 1], got {aug.blur_p}"),
        (aug.blur_sigma < 0.0, f"blur sigma must not be negative, got {aug.blur_sigma}"),
        (cfg.epochs < 1 or cfg.batch_size < 1, "epochs and batch size must be at least 1"),
        (not cfg.lr > 0.0, f"the learning rate must be positive, got {cfg.lr}"),
    ]
    for bad, message in problems:
        if bad:
            raise TrainingError(message)


def pretrained_weights_file(arch: str) -> Path:
    """The locally cached file of timm's pretrained weights for ``arch``; nothing is downloaded.

    Raises:
        TrainingError: timm knows no pretrained weights for ``arch`` or they are not cached here.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    cfg = timm.models.get_pretrained_cfg(arch)
    if cfg is None:
        raise TrainingError(f"--pretrained: timm knows no pretrained weights for {arch!r}")
    looked: list[str] = []
    if cfg.file:
        looked.append(str(cfg.file))
        if Path(cfg.file).is_file():
            return Path(cfg.file)
    if cfg.hf_hub_id:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.constants import HF_HUB_CACHE

        repo = str(cfg.hf_hub_id).split("@")[0]
        for name in (cfg.hf_hub_filename or "model.safetensors", "model.safetensors", "pytorch_model.bin"):
            found = try_to_load_from_cache(repo, name, cache_dir=HF_HUB_CACHE)
            if isinstance(found, str) and Path(found).is_file():
                return Path(found)
        looked.append(f"Hugging Face cache {HF_HUB_CACHE} ({repo})")
    if cfg.url:
        cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(str(cfg.url).split("?")[0])
        looked.append(str(cached))
        if cached.is_file():
            return cached
    raise TrainingError(
        f"--pretrained: timm's weights for {arch!r} are not in the local cache (looked in {'; '.join(looked)}). "
        "F²TTA Studio never downloads weights: copy them there first, or train without --pretrained."
    )


def build_model(cfg: TrainConfig, num_classes: int) -> torch.nn.Module:
    """A fresh timm model for ``cfg`` (pretrained weights only from the local cache)."""
    kwargs: dict[str, Any] = {"num_classes": num_classes, "img_size": cfg.img_size, **cfg.model_kwargs}
    try:
        if cfg.pretrained:
            weights = pretrained_weights_file(cfg.arch)
            return timm.create_model(
                cfg.arch, pretrained=True, pretrained_cfg_overlay={"file": str(weights)}, **kwargs
            )
        return timm.create_model(cfg.arch, pretrained=False, **kwargs)
    except TrainingError:
        raise
    except Exception as exc:  # timm raises RuntimeError/TypeError/KeyError for unknown archs/kwargs
        what = "pretrained " if cfg.pretrained else ""
        raise TrainingError(f"cannot build {what}timm model {cfg.arch!r} with {kwargs}: {exc}") from exc
