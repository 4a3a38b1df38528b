"""Tent: fully test-time adaptation by entropy minimisation.

Implements Wang, Shelhamer, Liu, Olshausen & Darrell, "Tent: Fully Test-Time Adaptation by
Entropy Minimization", ICLR 2021: for every test batch, minimise the mean Shannon entropy of the
model's predictions with one optimiser step on the affine parameters of the normalisation layers.
The prediction returned is, by default, a second gradient-free forward pass of the updated copy on
the same image (the I-DiPT paper's evaluation protocol: update, then predict again).

Departures from the paper:

* A ViT has no BatchNorm: the adapted parameters are the weight and bias of every LayerNorm
  (blocks, final norm; the standard ViT port of Tent, as in SAR and the CTTA benchmarks). The
  feature-statistics half of Tent (BN with test-batch statistics) has no counterpart, since
  LayerNorm normalises each token by itself already.
* The copy stays in eval mode (timm's train mode would only switch on dropout / drop-path).
* Batch size 1 (the F²TTA protocol); the entropy of one image is the loss.
* The LayerNorm parameters live in a private copy of the backbone; the shared source model is
  never modified and gives ``source_logits``.
* **Prediction after the update.** The authors' code returns the prediction of the forward pass
  made before the step (an image's own update first helps the next image), which costs one pass
  less; ``predict_after_update=False`` restores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from engine.config import setting
from engine.methods.base import MethodOutput, register_method
from engine.methods.parts.fields import AdamConfig, check_positive, predict_after_update_setting
from engine.methods.parts.losses import softmax_entropy
from engine.methods.parts.norm import AdaptedCopyMethod, prediction_after_update


@dataclass(frozen=True)
class TentConfig(AdamConfig):
    """Hyper-parameters of Tent; defaults are the paper's (Adam setting of its code)."""

    lr: float = setting(1e-3, "Adam learning rate of the single step per batch", low=0.0, high=1.0)
    weight_decay: float = setting(0.0, "L2 weight decay on the LayerNorm parameters", low=0.0, high=1.0)
    predict_after_update: bool = predict_after_update_setting()

    def __post_init__(self) -> None:
        check_positive(self, "lr")


@register_method("tent", "Tent (entropy minimisation)", bench_order=1, in_paper=True)
class Tent(AdaptedCopyMethod):
    """Entropy minimisation on the LayerNorm affine parameters of a copy of the source ViT."""

    config_class = TentConfig
    config: TentConfig

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        cfg = self.config
        return torch.optim.Adam(
            params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay
        )

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        with torch.no_grad():
            source_logits = self.model(x)
        logits = self.adapted(x)
        loss = softmax_entropy(logits).mean()
        self.descend(loss)
        logits = prediction_after_update(self.config.predict_after_update, logits, lambda: self.adapted(x))
        return self.finish(logits, source_logits, loss=float(loss.detach()))
