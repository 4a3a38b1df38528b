"""DLTTA: Tent with a dynamic, per-image learning rate from a memory bank.

Implements Yang, Chen, Jiang, Liu, Cao, Heng & Dou, "DLTTA: Dynamic Learning Rate for Test-Time
Adaptation on Cross-Domain Medical Images", IEEE TMI 2022, integrated into Tent as in the I-DiPT
paper's comparison. A memory bank holds (feature, prediction) pairs of past test images. For a new
image, the k nearest stored features give an averaged past prediction; the discrepancy between
it and the current prediction (symmetric KL divergence) scales the learning rate of the Tent step:
``lr_t = d_t * lr``. Images that look like what the model has already adapted to barely move it;
images that disagree with their neighbours move it more.

Following the authors' Camelyon17 (classification) code: keys are the pooled features, values the
logits, both taken *after* the image's update; neighbours are found by dot product, k = 4, their
logits are averaged; the current prediction is softened with temperature 2; the dynamic rate is
used once the memory is full (before that, Tent's base rate); the returned prediction is the
model's after the update -- already the I-DiPT paper's protocol (update, then predict again), so
unlike Tent DLTTA has no ``predict_after_update`` switch.

Departures:

* LayerNorm affine parameters instead of BatchNorm ones (as in :mod:`engine.methods.tent`), on a
  private copy of the backbone; pooled features are the ViT's pre-logits (CLS token after the
  final norm).
* The memory keeps exactly ``memory_size`` entries (the code's dictionary kept one more).
* Batch size 1: the discrepancy of the image is its own (the code averaged it over the batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from engine.config import setting
from engine.methods.base import MethodOutput, register_method
from engine.methods.parts.fields import AdamConfig, check_at_least_one, check_positive
from engine.methods.parts.losses import softmax_entropy
from engine.methods.parts.memory import KeyValueMemory
from engine.methods.parts.norm import AdaptedCopyMethod, forward_features_and_logits, symmetric_kl


@dataclass(frozen=True)
class DLTTAConfig(AdamConfig):
    """Hyper-parameters of DLTTA; defaults are the authors' Camelyon17 settings."""

    lr: float = setting(
        1e-3,
        "base Adam learning rate (Tent's), scaled by the discrepancy when memory is full",
        low=0.0,
        high=1.0,
    )
    memory_size: int = setting(800, "number of (feature, logits) pairs kept, FIFO", low=1, high=100_000)
    neighbours: int = setting(
        4, "k nearest stored features averaged into the past prediction", low=1, high=100_000
    )
    temperature: float = setting(
        2.0, "softmax temperature of the current prediction in the discrepancy", low=0.001, high=1000.0
    )

    def __post_init__(self) -> None:
        check_positive(self, "lr", "temperature")
        check_at_least_one(self, "memory_size", "neighbours")


@register_method("dltta", "DLTTA (Tent with a dynamic learning rate)", bench_order=2, in_paper=True)
class DLTTA(AdaptedCopyMethod):
    """Tent whose learning rate is the memory-bank discrepancy times the base rate."""

    test_settings: ClassVar[Mapping[str, Any]] = {"memory_size": 2, "neighbours": 2}

    config_class = DLTTAConfig
    config: DLTTAConfig

    def configure_extra(self) -> None:
        self.memory = KeyValueMemory(self.config.memory_size, prefix="memory")

    def _discrepancy(self, features: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Symmetric KL between the current prediction and the neighbours' mean, per sample."""
        cfg = self.config
        past = []
        for f in features:
            values, _ = self.memory.nearest(f, cfg.neighbours, "dot")
            past.append(values.mean(dim=0))
        past_probs = torch.stack(past).softmax(dim=-1)
        current = (logits.detach() / cfg.temperature).softmax(dim=-1)
        return symmetric_kl(current, past_probs)

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        cfg = self.config
        vit = self.adapted.vit
        with torch.no_grad():
            source_logits = self.model(x)
        features, logits = forward_features_and_logits(vit, x)
        lr = cfg.lr
        discrepancy = float("nan")
        if self.memory.full:
            with torch.no_grad():
                discrepancy = float(self._discrepancy(features.detach(), logits).mean())
            lr = discrepancy * cfg.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss = softmax_entropy(logits).mean()
        self.descend(loss)
        with torch.no_grad():
            new_features, adapted = forward_features_and_logits(vit, x)
            for f, z in zip(new_features, adapted, strict=True):
                self.memory.push(f, z)
        return self.finish(
            adapted,
            source_logits,
            loss=float(loss.detach()),
            lr=lr,
            discrepancy=discrepancy,
            memory_size=float(len(self.memory)),
        )

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors.update(self.memory.state_tensors())
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        super().load_state(tensors, meta)
        self.memory.load_state_tensors(tensors, self.device)
