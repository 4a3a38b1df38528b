"""Training a source model: a timm ViT on one domain's train split, early-stopped on its val split.

The default recipe follows the paper's source training (Adam, cross-entropy) scaled down to a
small ViT trained from scratch on a CPU: a linear warm-up then cosine learning-rate decay, flips,
rotations by multiples of 90 degrees and colour jitter (without colour augmentation a from-scratch
model is at chance on every other site). A second recipe (``adamw-p16``, :mod:`._recipes`) trains
another shape another way. The recipe, the augmentation, the epochs, the seed and the accuracies
reached are recorded in the model card's ``training`` dict.
"""

from __future__ import annotations

from engine.training._augment import Augmentation, augment
from engine.training._data import evaluate, load_items, normalise, predict_logits
from engine.training._fit import EpochStats, fit
from engine.training._model import (
    DEFAULT_ARCH,
    DEFAULT_IMG_SIZE,
    DEFAULT_MODEL_KWARGS,
    OPTIMIZERS,
    TrainConfig,
    TrainingError,
    build_model,
    check_config,
    pretrained_weights_file,
)
from engine.training._recipes import DEFAULT_RECIPE, RECIPES, recipe_config
from engine.training._source import TrainResult, compute_reference, describe_reference, train_source

__all__ = [
    "DEFAULT_ARCH",
    "DEFAULT_IMG_SIZE",
    "DEFAULT_MODEL_KWARGS",
    "DEFAULT_RECIPE",
    "OPTIMIZERS",
    "RECIPES",
    "Augmentation",
    "EpochStats",
    "TrainConfig",
    "TrainResult",
    "TrainingError",
    "augment",
    "build_model",
    "check_config",
    "compute_reference",
    "describe_reference",
    "evaluate",
    "fit",
    "load_items",
    "normalise",
    "predict_logits",
    "pretrained_weights_file",
    "recipe_config",
    "train_source",
]
