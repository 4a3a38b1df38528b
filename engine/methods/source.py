"""SourceOnly: the frozen source model, no adaptation (the lower bound of every table)."""

from __future__ import annotations

from typing import ClassVar

import torch

from engine.methods.base import MethodOutput, TTAMethod, register_method


@register_method("source", "No adaptation (source model only)", bench_order=0, in_paper=True)
class SourceOnly(TTAMethod):
    """Predicts with the source model; nothing changes from image to image."""

    autocast_ok: ClassVar[bool] = True
    compile_ok: ClassVar[bool] = True
    decides_from_source_pass: ClassVar[bool] = True

    @torch.no_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        logits = self.model(x)
        return self.finish(logits, logits)

    @torch.no_grad()
    def decision_pass(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(x).detach().cpu()
        return logits

    def decide_from_pass(self, passed: torch.Tensor) -> MethodOutput:
        return self.finish(passed, passed)
