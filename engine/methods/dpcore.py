"""DPCore: a dynamic coreset of visual prompts keyed by feature statistics.

Implements Zhang, Mehra, Niu & Hamm, "DPCore: Dynamic Prompt Coreset for Continual Test-Time
Adaptation", ICML 2025. Visual prompt tokens (VPT-shallow: 8 learnable tokens inserted after the
CLS token at the input) are learned to align the feature statistics of test data with those of the
source domain, ``L = ||μ - μ_s||_2 + λ ||σ - σ_s||_2`` on the final (normed) features. The coreset
holds one element per encountered "domain": its statistics (μ_j, σ_j) and its prompt p_j. Per batch:

1. statistics (μ, σ) of the unprompted features; weights ``w = softmax(-(||μ - μ_j|| +
   λ||σ - σ_j||) / τ)`` over the coreset (τ = 3); a weighted prompt ``p_w = Σ w_j p_j``;
2. ID / OOD rule: if the weighted prompt brings the alignment loss below ρ = 0.8 times the
   unprompted loss, the batch is "in distribution": ``p_w`` takes one AdamW step (lr 0.1, fresh
   optimiser) and every element moves towards the batch by its weight,
   ``μ_j += α w_j (μ - μ_j)``, ``σ_j += α w_j max(σ - σ_j, 0)``, ``p_j += α w_j (p - p_j)``
   (α = 0.999); otherwise a new prompt is learned from the initial one for 50 steps and
   (μ, σ, p) joins the coreset;
3. the prediction is, by default, a gradient-free pass with the prompt as learned on the image
   (after its last AdamW step), the I-DiPT paper's evaluation protocol: update, then predict again.

Departures:

* **Statistics over tokens.** DPCore takes the mean and std of the CLS features over the batch; a
  batch of one image has no spread, so the statistics are per channel over the image's tokens
  (CLS and patches; the prompt tokens are left out) of the final normed features.
* **Source statistics** come from the first ``source_images`` test images (no adaptation
  meanwhile) or :meth:`DPCore.fit_source_statistics`, instead of 300 source training images; see
  :mod:`engine.methods.parts.token_stats`.
* The coreset statistics are updated with the unprompted statistics of the batch (the keys that
  were matched, as the paper's Eq. 9 reads); the authors' code passes the prompted ones.
* Prompt tokens are inserted after the embedding (timm's ``norm_pre`` included, an identity for
  standard ViTs) and removed again before the final norm and the head, so average-pooled ViTs pool
  over image tokens only. The frozen source model itself is used; nothing in it is modified.
* ``max_coreset`` (0 = unbounded, the paper) optionally caps the coreset; a full coreset treats
  every batch as in-distribution, as the authors' reservoir variant does.
* **Prediction after the update.** The authors' code returns the logits of the last adaptation
  forward pass, made before the last AdamW step; ``predict_after_update=False`` restores it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from engine.config import setting
from engine.methods.base import MethodOutput, check_shapes, register_method, require_one_image
from engine.methods.parts.fields import (
    check_at_least_one,
    check_positive,
    predict_after_update_setting,
    source_images_setting,
)
from engine.methods.parts.norm import prediction_after_update
from engine.methods.parts.token_stats import StatisticsAlignedMethod, statistics_distance, token_statistics


@dataclass(frozen=True)
class DPCoreConfig:
    """Hyper-parameters of DPCore; defaults are the paper's (ViT-Base, ImageNet-C)."""

    num_prompts: int = setting(8, "visual prompt tokens inserted after the CLS token", low=1, high=256)
    lr: float = setting(
        0.1, "AdamW learning rate of the prompt (fresh optimiser per batch)", low=0.0, high=10.0
    )
    weight_decay: float = setting(
        0.01, "AdamW weight decay (torch's default, as in the code)", low=0.0, high=1.0
    )
    temperature: float = setting(3.0, "τ: softmax temperature of the coreset weights", low=0.001, high=1000.0)
    ema_alpha: float = setting(
        0.999, "α: step of the coreset update towards an in-distribution batch", low=0.0, high=1.0
    )
    ratio_threshold: float = setting(
        0.8, "ρ: in-distribution if loss(p_w) < ρ * loss(no prompt)", low=0.0, high=10.0
    )
    id_steps: int = setting(
        1, "AdamW steps on the weighted prompt for an in-distribution batch", low=1, high=1000
    )
    ood_steps: int = setting(
        50, "AdamW steps learning a new prompt for an out-of-distribution batch", low=1, high=1000
    )
    std_weight: float = setting(
        1.0, "λ: weight of the std term in the loss and the distances", low=0.0, high=100.0
    )
    max_coreset: int = setting(
        0, "ours: cap on the coreset size; 0 = unbounded (the paper)", low=0, high=100_000
    )
    source_images: int = source_images_setting()
    predict_after_update: bool = predict_after_update_setting()

    def __post_init__(self) -> None:
        check_at_least_one(self, "num_prompts", "id_steps", "ood_steps")
        check_positive(self, "lr", "temperature")
        if self.max_coreset < 0 or self.source_images < 1:
            raise ValueError("max_coreset must be >= 0 and source_images >= 1")


@register_method("dpcore", "DPCore (coreset of visual prompts)", bench_order=7, in_paper=True)
class DPCore(StatisticsAlignedMethod):
    """Prompt coreset with distance-weighted initialisation and the ID/OOD update (batch size 1)."""

    test_settings: ClassVar[Mapping[str, Any]] = {"source_images": 1, "ood_steps": 2}

    source_access: ClassVar[str] = "unlabelled source image statistics with --source-stats"

    config_class = DPCoreConfig
    config: DPCoreConfig

    def configure_model(self) -> None:
        cfg = self.config
        dim = self.model.embed_dim
        patch = self.model.vit.patch_embed.patch_size
        # VPT's Xavier-uniform range for prompt tokens.
        bound = math.sqrt(6.0 / float(3 * int(patch[0]) * int(patch[1]) + dim))
        init = (torch.rand((cfg.num_prompts, dim), generator=self.generator) * 2.0 - 1.0) * bound
        self.prompt_init = init.to(self.device)
        self.core_mean: torch.Tensor | None = None  # (n, C)
        self.core_std: torch.Tensor | None = None  # (n, C)
        self.core_prompts: torch.Tensor | None = None  # (n, P, C)
        super().configure_model()

    def coreset_size(self) -> int:
        return 0 if self.core_mean is None else int(self.core_mean.shape[0])

    # ------------------------------------------------------------------ forward with prompts
    def run(
        self, x: torch.Tensor, prompts: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Logits ``(B, classes)`` and token statistics ``(B, C)`` x 2 with ``prompts`` ``(P, C)``."""
        model, vit = self.model, self.model.vit
        npt = model.num_prefix_tokens
        tokens = model.embed(x)
        n_prompts = 0 if prompts is None else int(prompts.shape[0])
        if prompts is not None:
            batch = prompts.unsqueeze(0).expand(x.shape[0], -1, -1)
            tokens = torch.cat([tokens[:, :npt], batch, tokens[:, npt:]], dim=1)
        for blk in vit.blocks:
            tokens = blk(tokens)
        if n_prompts:
            tokens = torch.cat([tokens[:, :npt], tokens[:, npt + n_prompts :]], dim=1)
        features = vit.norm(tokens)
        logits: torch.Tensor = vit.forward_head(features)
        mean, std = token_statistics(features)
        return logits, mean, std

    def reference_statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, mean, std = self.run(x, None)
        return mean, std

    def _learn(
        self, x: torch.Tensor, start: torch.Tensor, steps: int
    ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """``steps`` AdamW steps from ``start``; returns (prompt, logits of the last forward, loss)."""
        prompt = nn.Parameter(start.clone())
        optimizer = torch.optim.AdamW([prompt], lr=self.config.lr, weight_decay=self.config.weight_decay)
        logits = torch.empty(0)
        loss_value = math.nan
        for _ in range(steps):
            logits, mean, std = self.run(x, prompt)
            loss = self.alignment_loss(mean, std)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            loss_value = float(loss.detach())
        return prompt.detach(), logits.detach(), loss_value

    # ------------------------------------------------------------------ the step
    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        require_one_image(x, "DPCore here")
        cfg = self.config
        with torch.no_grad():
            source_logits, raw_mean, raw_std = self.run(x, None)
        if not self.source_stats.ready:
            return self.warm_up(raw_mean, raw_std, source_logits)
        mean, std = raw_mean[0], raw_std[0]
        with torch.no_grad():
            loss_raw = float(self.alignment_loss(raw_mean, raw_std))
        loss_weighted = math.nan
        weights: torch.Tensor | None = None
        weighted: torch.Tensor | None = None
        in_distribution = False
        if self.core_mean is not None and self.core_std is not None and self.core_prompts is not None:
            with torch.no_grad():
                dist = statistics_distance(mean, std, self.core_mean, self.core_std, cfg.std_weight)
                weights = torch.softmax(-dist / cfg.temperature, dim=0)
                weighted = torch.einsum("n,npc->pc", weights, self.core_prompts)
                _, w_mean, w_std = self.run(x, weighted)
                loss_weighted = float(self.alignment_loss(w_mean, w_std))
            in_distribution = loss_weighted < cfg.ratio_threshold * loss_raw
            if cfg.max_coreset and self.coreset_size() >= cfg.max_coreset:
                in_distribution = True
        if in_distribution and weights is not None and weighted is not None:
            prompt, logits, loss = self._learn(x, weighted, cfg.id_steps)
            self._update_coreset(weights, mean, std, prompt)
        else:
            prompt, logits, loss = self._learn(x, self.prompt_init, cfg.ood_steps)
            self._append(mean, std, prompt)
        logits = prediction_after_update(cfg.predict_after_update, logits, lambda: self.run(x, prompt)[0])
        return self.adapted_output(
            logits,
            source_logits,
            loss=loss,
            loss_unprompted=loss_raw,
            loss_weighted=loss_weighted,
            in_distribution=float(in_distribution),
            coreset_size=float(self.coreset_size()),
        )

    @torch.no_grad()
    def _update_coreset(
        self, weights: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, prompt: torch.Tensor
    ) -> None:
        assert self.core_mean is not None and self.core_std is not None and self.core_prompts is not None
        step = self.config.ema_alpha * weights
        self.core_mean = self.core_mean + step[:, None] * (mean[None] - self.core_mean)
        self.core_std = self.core_std + step[:, None] * (std[None] - self.core_std).clamp_min(0.0)
        self.core_prompts = self.core_prompts + step[:, None, None] * (prompt[None] - self.core_prompts)

    def _append(self, mean: torch.Tensor, std: torch.Tensor, prompt: torch.Tensor) -> None:
        if self.core_mean is None or self.core_std is None or self.core_prompts is None:
            self.core_mean, self.core_std, self.core_prompts = (
                mean[None].clone(),
                std[None].clone(),
                prompt[None].clone(),
            )
            return
        self.core_mean = torch.cat([self.core_mean, mean[None]])
        self.core_std = torch.cat([self.core_std, std[None]])
        self.core_prompts = torch.cat([self.core_prompts, prompt[None]])

    # ------------------------------------------------------------------ state
    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors["prompt_init"] = self.prompt_init
        if self.core_mean is not None and self.core_std is not None and self.core_prompts is not None:
            tensors.update(
                {
                    "coreset.mean": self.core_mean,
                    "coreset.std": self.core_std,
                    "coreset.prompts": self.core_prompts,
                }
            )
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        check_shapes(tensors, {"prompt_init": self.prompt_init})
        super().load_state(tensors, meta)
        dev = self.device
        self.prompt_init = tensors["prompt_init"].to(dev).clone()
        if "coreset.mean" in tensors:
            mean, std, prompts = tensors["coreset.mean"], tensors["coreset.std"], tensors["coreset.prompts"]
            n = int(mean.shape[0])
            if (
                int(std.shape[0]) != n
                or int(prompts.shape[0]) != n
                or prompts.shape[1:] != self.prompt_init.shape
            ):
                raise ValueError("coreset tensors disagree in size or prompt shape")
            self.core_mean, self.core_std, self.core_prompts = (
                mean.to(dev).clone(),
                std.to(dev).clone(),
                prompts.to(dev).clone(),
            )
        else:
            self.core_mean = self.core_std = self.core_prompts = None
