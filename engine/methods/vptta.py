"""VPTTA: a low-frequency amplitude prompt per test image, initialised from a memory bank.

Implements Chen, Pan, Ye, Xia & Xia, "Each Test Image Deserves A Specific Prompt: Continual
Test-Time Adaptation for 2D Medical Image Segmentation", CVPR 2024, on the classification ViT.
Per image:

1. the prompt is a learnable multiplier of the centred low-frequency window of the image's
   amplitude spectrum (window side ``α × image side``, α = 0.01); the phase is untouched;
2. initialisation: once the memory bank (FIFO, 40 entries of low-frequency amplitude key ->
   adapted prompt) holds 16 entries, the prompt starts as the softmax(cos / 0.2)-weighted mean of
   the prompts of the 16 most similar keys; before that, from ones (the identity);
3. one Adam step (lr 0.05, betas 0.9 / 0.99, a persistent optimiser) on a statistics-alignment
   loss; then the prompted image is classified by the frozen model and (key, prompt) enters the
   bank. That prediction after the update is already the I-DiPT paper's protocol, so VPTTA has
   no ``predict_after_update`` switch.

Departures:

* **Loss.** VPTTA aligns the BatchNorm statistics of the prompted image with the source running
  statistics. A ViT has no BatchNorm; here the tokens after the *first transformer block* are the
  analogue (the first layer where the prompt's style change shows): the per-channel mean and std
  over the image's patch tokens are aligned with source statistics,
  ``||μ - μ_s||_2 + ||σ - σ_s||_2``. Only block 1 runs for the loss (cheap).
* **Source statistics.** There is no source data at test time and BN running statistics have no
  ViT counterpart, so the reference is the running mean of the statistics of the first
  ``source_images`` test images (no adaptation meanwhile; predictions are the source model's), or
  given explicitly with :meth:`VPTTA.fit_source_statistics`. See :mod:`engine.methods.parts.token_stats`.
* VPTTA's warm-up mixing of BN statistics (``warm_n``) has no counterpart without BN.
* The window is ``low_freq_window(H, W, α/2)``: ``2⌊αH/2⌋`` per side (at least 2), centred on the
  zero frequency; the code used ``⌊αH⌋`` with a slightly off-centre start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import setting
from engine.methods.base import MethodOutput, check_shapes, register_method, require_one_image
from engine.methods.parts.fft import low_freq_amplitude, low_freq_window
from engine.methods.parts.fields import (
    AdamConfig,
    adam_beta2,
    adam_optimizer,
    check_at_least_one,
    check_positive,
    source_images_setting,
)
from engine.methods.parts.memory import KeyValueMemory
from engine.methods.parts.token_stats import StatisticsAlignedMethod, token_statistics


@dataclass(frozen=True)
class VPTTAConfig(AdamConfig):
    """Hyper-parameters of VPTTA; defaults are the paper's (fundus setting) unless noted."""

    lr: float = setting(0.05, "Adam learning rate of the prompt", low=0.0, high=10.0)
    beta2: float = adam_beta2(0.99)
    iters: int = setting(1, "optimisation steps per image", low=1, high=100)
    prompt_alpha: float = setting(
        0.01, "prompt window side as a fraction of the image side", low=0.0, high=1.0
    )
    memory_size: int = setting(40, "bank capacity (FIFO)", low=1, high=100_000)
    neighbours: int = setting(16, "nearest keys whose prompts initialise a new one", low=1, high=100_000)
    temperature: float = setting(
        0.2, "softmax temperature of the neighbours' cosine similarities", low=0.001, high=1000.0
    )
    std_weight: float = setting(1.0, "weight of the std term of the alignment loss", low=0.0, high=100.0)
    source_images: int = source_images_setting()

    def __post_init__(self) -> None:
        if not 0.0 < self.prompt_alpha <= 1.0:
            raise ValueError("prompt_alpha must be in (0, 1]")
        check_positive(self, "lr", "temperature")
        check_at_least_one(self, "iters", "source_images")
        if self.memory_size < 1 or not 1 <= self.neighbours <= self.memory_size:
            raise ValueError("need 1 <= neighbours <= memory_size")


@register_method("vptta", "VPTTA (per-image frequency prompt)", bench_order=5, in_paper=True)
class VPTTA(StatisticsAlignedMethod):
    """Frequency-domain input prompt per image on the frozen ViT (batch size 1)."""

    test_settings: ClassVar[Mapping[str, Any]] = {"source_images": 1, "memory_size": 3, "neighbours": 2}

    source_access: ClassVar[str] = "unlabelled source image statistics with --source-stats"

    config_class = VPTTAConfig
    config: VPTTAConfig

    def configure_model(self) -> None:
        cfg = self.config
        pe = self.model.vit.patch_embed
        patch = pe.patch_size
        self.height = self.model.grid[0] * int(patch[0])
        self.width = self.model.grid[1] * int(patch[1])
        self.beta = cfg.prompt_alpha / 2.0
        self.rows, self.cols = low_freq_window(self.height, self.width, self.beta)
        shape = (3, self.rows.stop - self.rows.start, self.cols.stop - self.cols.start)
        self.prompt = nn.Parameter(torch.ones(shape, device=self.device))
        self.optimizer = adam_optimizer([self.prompt], cfg)
        self.memory = KeyValueMemory(cfg.memory_size, prefix="memory")
        super().configure_model()

    def collect_params(self) -> list[nn.Parameter]:
        return [self.prompt]

    def saved_optimizer(self) -> torch.optim.Optimizer:
        return self.optimizer

    # ------------------------------------------------------------------ pieces
    def apply_prompt(self, x: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """Multiply the low-frequency amplitudes of ``x`` ``(B, 3, H, W)`` by ``prompt``."""
        H, W = x.shape[-2:]
        spectrum = torch.fft.fft2(x.float())
        amp = torch.fft.fftshift(spectrum.abs(), dim=(-2, -1))
        pad = (self.cols.start, W - self.cols.stop, self.rows.start, H - self.rows.stop)
        amp = torch.fft.ifftshift(amp * F.pad(prompt, pad, value=1.0), dim=(-2, -1))
        out: torch.Tensor = torch.fft.ifft2(torch.polar(amp, spectrum.angle())).real
        return out.to(x.dtype)

    def block1_statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std over the patch tokens after the first block: ``(B, C)`` each."""
        tokens = self.model.vit.blocks[0](self.model.embed(x))
        return token_statistics(tokens[:, self.model.num_prefix_tokens :])

    def reference_statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.block1_statistics(x)

    def _initial_prompt(self, key: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        if len(self.memory) < cfg.neighbours:
            return torch.ones_like(self.prompt)
        values, sims = self.memory.nearest(key, cfg.neighbours, "cosine")
        weights = torch.softmax(sims / cfg.temperature, dim=0)
        return torch.einsum("k,k...->...", weights, values)

    # ------------------------------------------------------------------ the step
    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        require_one_image(x, "VPTTA")
        cfg = self.config
        with torch.no_grad():
            source_logits = self.model(x)
        if not self.source_stats.ready:
            with torch.no_grad():
                mean, std = self.block1_statistics(x)
            return self.warm_up(mean, std, source_logits, loss=0.0)
        key = low_freq_amplitude(x[0], self.beta)
        with torch.no_grad():
            self.prompt.copy_(self._initial_prompt(key))
        loss = torch.zeros(())
        for _ in range(cfg.iters):
            mean, std = self.block1_statistics(self.apply_prompt(x, self.prompt))
            loss = self.alignment_loss(mean, std)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            logits = self.model(self.apply_prompt(x, self.prompt))
            self.memory.push(key, self.prompt)
        return self.adapted_output(
            logits,
            source_logits,
            loss=float(loss.detach()),
            prompt_mean=float(self.prompt.detach().mean()),
            memory_size=float(len(self.memory)),
        )

    # ------------------------------------------------------------------ state
    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors["prompt"] = self.prompt.detach()
        tensors.update(self.memory.state_tensors())
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        check_shapes(tensors, {"prompt": self.prompt})
        super().load_state(tensors, meta)
        with torch.no_grad():
            self.prompt.copy_(tensors["prompt"].to(self.device))
        self.memory.load_state_tensors(tensors, self.device)
