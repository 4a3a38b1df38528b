"""Training a source model: a timm ViT on one domain's train split, early-stopped on its val split.

The recipe follows the paper's source training (Adam, cross-entropy) scaled down to a small ViT
trained from scratch on a CPU: a linear warm-up then cosine learning-rate decay, flips, rotations
by multiples of 90 degrees and colour jitter (without colour augmentation a from-scratch model is
at chance on every other site). The augmentation, the epochs, the seed and the accuracies reached
are recorded in the model card's ``training`` dict.
"""

from __future__ import annotations

from engine.training._augment import Augmentation, augment
from engine.training._data import evaluate, load_items, normalise, predict_logits
from engine.training._fit import EpochStats, fit
from engine.training._model import (
    DEFAULT_ARCH,
    DEFAULT_IMG_SIZE,
    DEFAULT_MODEL_KWARGS,
    TrainConfig,
    TrainingError,
    build_model,
    pretrained_weights_file,
)
from engine.training._source import TrainResult, compute_reference, describe_reference, train_source

__all__ = [
    "DEFAULT_ARCH",
    "DEFAULT_IMG_SIZE",
    "DEFAULT_MODEL_KWARGS",
    "Augmentation",
    "EpochStats",
    "TrainConfig",
    "TrainResult",
    "TrainingError",
    "augment",
    "build_model",
    "compute_reference",
    "describe_reference",
    "evaluate",
    "fit",
    "load_items",
    "normalise",
    "predict_logits",
    "pretrained_weights_file",
    "train_source",
]
