"""C-MAE: continual test-time adaptation with adaptive distribution masked autoencoders.

Implements Liu, Xu, Yang, Li, Zhang, Wang, Mu & Zhang, "Continual-MAE: Adaptive Distribution
Masked Autoencoders for Continual Test-Time Adaptation", CVPR 2024. Per batch:

1. distribution-aware masking: a token-wise uncertainty from D = 10 Monte-Carlo passes marks the
   K % (50 %) most uncertain patches; their patch embeddings are replaced by a learnable mask token
   (before the positional embedding, as in SimMIM/MaskFeat);
2. consistency: the student's prediction on the masked image follows the teacher's soft
   prediction on the full image (cross-entropy);
3. reconstruction: a linear head maps the student's final features of the masked patches to
   their HOG features (:mod:`engine.methods.parts.hog`); ``L = CE + 0.5 * MSE``;
4. one Adam step (lr 1e-5) on the adapted parameters, the head and the mask token, then CoTTA's
   stochastic restore (p = 0.01) of the adapted backbone parameters.

As in the authors' code the teacher is the student before the step ("one model setting": the
teacher is overwritten by the student after every step), so no second copy is kept. The returned
prediction is, by default, the next teacher's -- the student after the step and the restore -- on
the full, unmasked image, made without gradients (the I-DiPT paper's evaluation protocol: update,
then predict again).

Departures:

* **Uncertainty.** The authors' code takes the variance of token means over 10 augmented teacher
  passes; the I-DiPT paper describes C-MAE's masking as MC dropout. Here it is the engine's UoM
  (:mod:`engine.methods.parts.uom`): MC dropout in block 1's MLP of the adapted copy, D passes, std of
  the channel-pooled tokens -- the same estimate I-DiPT uses, so the two differ only in what they
  do with it.
* **The HOG head is not fitted on the source domain.** There is no source data at test time. The
  head starts at zero and is learned online from the test stream together with the backbone; while
  it is near zero the reconstruction loss mostly trains the head itself, so early on the
  consistency term drives the adaptation. (The authors' code also creates the head afresh at test
  time, with a small random initialisation.)
* **What adapts.** The paper updates every weight; the default here is the LayerNorm affine
  parameters (plus head and mask token), for the reasons given in :mod:`engine.methods.cotta`;
  ``params="all"`` restores the paper's choice. The student is a private copy of the backbone.
* HOG cells are 8 pixels (the code's ``cell_sz``) when they divide the patch size, else one cell
  per patch.
* **Prediction after the update.** The authors' code returns the teacher's prediction from before
  the step; ``predict_after_update=False`` restores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import setting
from engine.methods.base import MethodOutput, register_method
from engine.methods.parts.fields import (
    AdamConfig,
    ParamScope,
    check_param_scope,
    mc_dropout_setting,
    mc_passes_setting,
    param_scope_setting,
    predict_after_update_setting,
    restore_prob_setting,
)
from engine.methods.parts.hog import hog_dim, patch_hog
from engine.methods.parts.losses import soft_cross_entropy
from engine.methods.parts.norm import ScopedCopyMethod, prediction_after_update, stochastic_restore
from engine.methods.parts.uom import mc_dropout_uncertainty, select_tokens


@dataclass(frozen=True)
class CMAEConfig(AdamConfig):
    """Hyper-parameters of C-MAE; defaults are the paper's (ViT-Base settings of its code)."""

    lr: float = setting(
        1e-5, "Adam learning rate (backbone parameters, head and mask token)", low=0.0, high=1.0
    )
    mask_percent: float = setting(
        50.0, "K: percent of patches masked (the most uncertain ones)", low=0.0, high=50.0
    )
    mc_passes: int = mc_passes_setting()
    mc_dropout: float = mc_dropout_setting()
    hog_weight: float = setting(
        0.5, "weight of the HOG reconstruction loss (the authors' run script)", low=0.0, high=100.0
    )
    hog_bins: int = setting(9, "orientation bins of the HOG targets", low=1, high=360)
    hog_cell: int = setting(
        8, "HOG cell side in pixels (one cell per patch if it does not divide the patch)", low=1, high=256
    )
    restore_prob: float = restore_prob_setting()
    params: ParamScope = param_scope_setting()
    predict_after_update: bool = predict_after_update_setting()

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_percent <= 50.0:
            raise ValueError("mask_percent must be in (0, 50]")
        if self.lr <= 0 or self.mc_passes < 2 or self.hog_bins < 1 or self.hog_cell < 1:
            raise ValueError("lr must be positive, mc_passes >= 2, hog_bins and hog_cell >= 1")
        if not 0.0 <= self.mc_dropout < 1.0 or not 0.0 <= self.restore_prob <= 1.0:
            raise ValueError("mc_dropout must be in [0, 1) and restore_prob in [0, 1]")
        check_param_scope(self.params)


@register_method("cmae", "Continual-MAE (masked autoencoding)", bench_order=6, in_paper=True)
class CMAE(ScopedCopyMethod):
    """Uncertainty-masked consistency plus HOG reconstruction on a copy of the source ViT."""

    test_settings: ClassVar[Mapping[str, Any]] = {"mc_passes": 3}

    config_class = CMAEConfig
    config: CMAEConfig

    def configure_extra(self) -> None:
        cfg = self.config
        patch = int(self.model.vit.patch_embed.patch_size[0])
        self.patch = patch
        self.cell = cfg.hog_cell if patch % cfg.hog_cell == 0 else patch
        dim = self.model.embed_dim
        out = hog_dim(patch, self.cell, cfg.hog_bins)
        self.head_weight = nn.Parameter(torch.zeros(out, dim, device=self.device))
        self.head_bias = nn.Parameter(torch.zeros(out, device=self.device))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim, device=self.device))

    def extra_parameters(self) -> dict[str, nn.Parameter]:
        return {"head.weight": self.head_weight, "head.bias": self.head_bias, "mask_token": self.mask_token}

    def masked_forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Student logits and final patch features with the patches in ``mask`` ``(B, N)`` replaced."""
        vit = self.adapted.vit
        patches = vit.patch_embed(x)
        m = mask.unsqueeze(-1).to(patches.dtype)
        patches = patches * (1.0 - m) + self.mask_token.to(patches.dtype) * m
        tokens = vit.norm_pre(vit.patch_drop(vit._pos_embed(patches)))
        for blk in vit.blocks:
            tokens = blk(tokens)
        features = vit.norm(tokens)
        logits: torch.Tensor = vit.forward_head(features)
        return logits, features[:, self.adapted.num_prefix_tokens :]

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        cfg = self.config
        with torch.no_grad():
            source_logits = self.model(x)
            teacher = self.adapted.source_pass(x)
            uncertainty = mc_dropout_uncertainty(
                self.adapted, teacher, cfg.mc_passes, cfg.mc_dropout, self.generator
            )
            masked, _ = select_tokens(uncertainty, cfg.mask_percent)
            mask = torch.zeros_like(uncertainty).scatter_(1, masked, 1.0)
            target = patch_hog(x, self.patch, self.cell, cfg.hog_bins)
        logits, features = self.masked_forward(x, mask)
        consistency = soft_cross_entropy(logits, teacher.logits.softmax(dim=-1)).mean()
        index = masked.unsqueeze(-1)
        selected = torch.gather(features, 1, index.expand(-1, -1, features.shape[-1]))
        predicted = F.linear(selected, self.head_weight, self.head_bias)
        reconstruction = F.mse_loss(
            predicted, torch.gather(target, 1, index.expand(-1, -1, target.shape[-1]))
        )
        loss = consistency + cfg.hog_weight * reconstruction
        self.descend(loss)
        restored = stochastic_restore(
            self.backbone_params(), self.source_params(), cfg.restore_prob, self.generator
        )
        logits = prediction_after_update(cfg.predict_after_update, teacher.logits, lambda: self.adapted(x))
        out = self.finish(
            logits,
            source_logits,
            loss=float(loss.detach()),
            loss_consistency=float(consistency.detach()),
            loss_hog=float(reconstruction.detach()),
            restored=float(restored),
        )
        out.uncertainty, out.uncertain_tokens = uncertainty, masked
        return out
