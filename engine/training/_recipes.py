"""Named training recipes (``f2tta train-source --recipe NAME``): whole sets of training settings.

``default`` is :class:`TrainConfig`'s defaults, the recipe of the demo models: a ViT-Tiny-like
model (8 x 8 tokens of 12 px at 96 px, 4 blocks of width 192), Adam, flips, quarter turns and
colour jitter.

``adamw-p16`` trains another way, so that an evaluation can ask whether a finding holds for source
models made differently: a different shape (6 x 6 tokens of 16 px, 6 blocks of width 256 with 4
heads, about 4.9 M parameters), AdamW with decoupled weight decay 0.05 on the weight matrices,
a longer warm-up, label smoothing 0.1, and a DeiT-like augmentation: random resized crops (75-100 %
of the area), stronger colour jitter and an occasional Gaussian blur on top of the flips and
quarter turns. On a CPU one epoch costs about 1.5 x the default's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.training._augment import Augmentation
from engine.training._model import TrainConfig, TrainingError

DEFAULT_RECIPE = "default"

RECIPES: dict[str, TrainConfig] = {
    DEFAULT_RECIPE: TrainConfig(),
    "adamw-p16": TrainConfig(
        model_kwargs={"patch_size": 16, "depth": 6, "embed_dim": 256, "num_heads": 4},
        optimizer="adamw",
        lr=5e-4,
        weight_decay=0.05,
        warmup_epochs=3.0,
        label_smoothing=0.1,
        augmentation=Augmentation(
            brightness=0.3,
            contrast=0.3,
            saturation=0.3,
            hue=0.05,
            crop_scale=0.75,
            blur_p=0.25,
            blur_sigma=1.2,
        ),
        recipe="adamw-p16",
    ),
}


def recipe_config(name: str, **overrides: Any) -> TrainConfig:
    """The settings of recipe ``name``, with ``overrides`` (TrainConfig fields) replacing its own.

    Raises:
        TrainingError: an unknown recipe or field.
    """
    if name not in RECIPES:
        raise TrainingError(f"unknown training recipe {name!r}; choose one of {', '.join(RECIPES)}")
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise TrainingError(f"{', '.join(unknown)} is not a training setting")
    settings = {"model_kwargs": dict(RECIPES[name].model_kwargs), **overrides}
    return dataclasses.replace(RECIPES[name], **settings)
