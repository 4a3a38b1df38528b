"""FOA-shift: the back-to-source activation shift of FOA, at batch size one.

Implements the gradient-free half of Niu, Miao, Chen, Zhou, Zhou & Tan, "Test-Time Model
Adaptation with Only Forward Passes", ICML 2024 (FOA, Eq. 7-8): the final class-token feature of
every test image is shifted by the difference between the source domain's mean feature and a
running mean of the test features, ``ê = e + γ (μ_S − μ_t)``, with ``μ_t`` an exponential moving
average over the stream (``μ_t ← α e + (1 − α) μ_t``), and classified by the unchanged head. It is
the simplest comparator for I-DiPT+'s operating point: a shift toward the source that knows
nothing of sites or classes.

Departures from the paper:

* Only the activation shift: FOA's prompt search by CMA-ES (which needs batches of images) is
  left out; at batch size one the shift is the part of FOA that applies.
* The shifted feature is the head's input (the pre-logit features after the final norm), and
  ``μ_S`` comes from the model's source reference (``engine.model.source_reference``, the mean over the
  source training split), so no source image is needed at test time. Without a reference the
  method predicts with the source model (with a warning).
* ``μ_t`` starts at ``μ_S`` (no shift for the first image); the paper initialises it from the
  first batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from engine.config import setting
from engine.methods.base import MethodOutput, TTAMethod, register_method
from engine.model.source_reference import SourceReference

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FOAShiftConfig:
    """Hyper-parameters of the activation shift; defaults are the paper's."""

    alpha: float = setting(0.1, "α: weight of the newest image in the running test mean", low=0.0, high=1.0)
    gamma: float = setting(1.0, "γ: step size of the shift toward the source mean", low=0.0, high=10.0)


@register_method("foa-shift", "FOA shift (forward-only activation shift)", bench_order=10)
class FOAShift(TTAMethod):
    """Shift the head's input by (source mean − running test mean); nothing is trained."""

    config_class = FOAShiftConfig
    uses_reference: ClassVar[bool] = True
    source_access: ClassVar[str] = "source reference: feature mean (unlabelled)"
    config: FOAShiftConfig

    def configure_model(self) -> None:
        ref = self.reference
        self.running: torch.Tensor | None = ref.feature_mean.clone() if ref is not None else None

    def use_reference(self, reference: SourceReference | None) -> None:
        if reference is None:
            logger.warning(
                "foa-shift: the model has no usable source reference; predicting with the source model"
            )
        self.reference = reference.to(self.device) if reference is not None else None
        self.configure_model()

    @torch.no_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        source = self.model.source_pass(x)
        if self.reference is None or self.running is None:
            return self.finish(source.logits, source.logits)
        cfg = self.config
        feats = source.features
        for row in feats:  # one image per step in the protocol; a batch updates the mean in order
            self.running = cfg.alpha * row + (1.0 - cfg.alpha) * self.running
        shifted = feats + cfg.gamma * (self.reference.feature_mean - self.running)
        logits = self.model.vit.head(shifted)
        shift_norm = float((self.reference.feature_mean - self.running).norm())
        return self.finish(logits, source.logits, shift_norm=shift_norm)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        if self.running is not None:
            tensors["running_mean"] = self.running
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        if (self.running is None) != ("running_mean" not in tensors):
            raise ValueError("the state's running mean does not match this model's source reference")
        if self.running is not None:
            saved = tensors["running_mean"]
            if tuple(saved.shape) != tuple(self.running.shape):
                raise ValueError(
                    f"running_mean has shape {tuple(saved.shape)}, expected {tuple(self.running.shape)}"
                )
            super().load_state(tensors, meta)
            self.running = saved.to(self.device).clone()
        else:
            super().load_state(tensors, meta)
