"""Shared plumbing of the methods that adapt weights of the backbone (Tent, DLTTA, SAR, CoTTA, C-MAE).

The session's :class:`~engine.model.prompted_vit.PromptedViT` is shared and frozen: it is the source
model, and it gives every method its ``source_logits``. A method that changes backbone weights
therefore works on a private deep copy (:func:`copy_backbone`), wrapped in its own
``PromptedViT`` so that the copy offers the same helpers (``embed``, ``source_pass``, ...).

:class:`AdaptedCopyMethod` owns that copy, names the parameters that adapt (LayerNorm affine
parameters or all of them), keeps their optimiser, and saves/loads/resets both exactly.

:func:`prediction_after_update` gives the baselines the paper's evaluation protocol ("Evaluation
Metric": the model is first updated on an image, then the inference is repeated): the logits a
step returns come from a gradient-free pass of the updated model, unless the method's config sets
``predict_after_update=False`` (the original method's single pass).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from engine.methods.base import TTAMethod, check_shapes, copy_saved
from engine.methods.parts.fields import ParamScope, adam_optimizer
from engine.model.prompted_vit import PromptedViT


def symmetric_kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``(KL(p||q) + KL(q||p)) / 2`` per sample for probability rows ``(B, C)``."""
    log_p, log_q = p.clamp_min(1e-12).log(), q.clamp_min(1e-12).log()
    return 0.5 * ((p * (log_p - log_q)).sum(dim=-1) + (q * (log_q - log_p)).sum(dim=-1))


def copy_backbone(model: PromptedViT) -> PromptedViT:
    """A deep copy of the source ViT, frozen and in eval mode, wrapped like the source."""
    clone = PromptedViT(copy.deepcopy(model.vit), mode=model.mode)
    return clone


def layernorm_param_names(vit: nn.Module, skip_modules: tuple[str, ...] = ()) -> list[str]:
    """Names of the affine parameters of every ``nn.LayerNorm`` in ``vit``.

    Args:
        vit: the timm model.
        skip_modules: module-name prefixes to leave out (``"blocks.11"``, ``"norm"``); a prefix
            matches the module itself and everything below it.
    """
    names: list[str] = []
    for mod_name, module in vit.named_modules():
        if not isinstance(module, nn.LayerNorm) or not module.elementwise_affine:
            continue
        if any(mod_name == s or mod_name.startswith(s + ".") for s in skip_modules):
            continue
        for p_name, _ in module.named_parameters(recurse=False):
            names.append(f"{mod_name}.{p_name}")
    return names


def forward_features_and_logits(vit: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooled pre-logit features ``(B, D)`` and logits ``(B, classes)`` of a timm ViT."""
    tokens = vit.forward_features(x)
    features: torch.Tensor = vit.forward_head(tokens, pre_logits=True)
    logits: torch.Tensor = vit.forward_head(tokens)
    return features, logits


def prediction_after_update(
    enabled: bool, single_pass: torch.Tensor, predict: Callable[[], torch.Tensor]
) -> torch.Tensor:
    """The logits an adaptation step returns, ``(B, classes)``, detached.

    Args:
        enabled: the config's ``predict_after_update``: True for the paper's protocol (update, then
            predict again), False for the original method's single pass.
        single_pass: the prediction the method made while adapting (before its update).
        predict: re-runs the method's inference (the adapted model, or the teacher for the
            mean-teacher methods) on the same input; called without gradients, only if ``enabled``.
    """
    if not enabled:
        return single_pass.detach()
    with torch.no_grad():
        return predict().detach()


@torch.no_grad()
def ema_update(teacher: list[torch.Tensor], student: list[torch.Tensor], momentum: float) -> None:
    """``teacher <- momentum * teacher + (1 - momentum) * student``, element-wise, in place."""
    for t, s in zip(teacher, student, strict=True):
        t.mul_(momentum).add_(s.detach(), alpha=1.0 - momentum)


@torch.no_grad()
def stochastic_restore(
    params: list[nn.Parameter], source: list[torch.Tensor], prob: float, generator: torch.Generator
) -> int:
    """Reset each element of ``params`` to its source value with probability ``prob`` (CoTTA).

    The masks are drawn on the CPU from ``generator`` (reproducible on every device).

    Returns:
        The number of elements restored.
    """
    restored = 0
    for p, s in zip(params, source, strict=True):
        mask = (torch.rand(p.shape, generator=generator) < prob).to(p.device)
        p.copy_(torch.where(mask, s.to(p.dtype), p))
        restored += int(mask.sum())
    return restored


class AdaptedCopyMethod(TTAMethod):
    """Base of the methods that update parameters of a private copy of the source ViT.

    Subclasses may name other adapted parameters than the LayerNorm affine ones
    (:meth:`adapted_param_names`), another optimiser than Adam with the config's ``lr``,
    ``beta1`` and ``beta2`` (:meth:`make_optimizer`), and add parameters outside the backbone
    (:meth:`extra_parameters`, e.g. C-MAE's head). Saved state: the adapted parameters (not the
    whole copy), the extra parameters and the optimiser; subclasses extend it.

    Attributes:
        adapted: the adapted copy of the source model (``adapted.vit`` is a timm ViT).
        adapted_names: names (in ``adapted.vit``) of the backbone parameters that adapt.
        optimizer: the optimiser over :meth:`collect_params`.
    """

    adapted: PromptedViT
    adapted_names: list[str]
    optimizer: torch.optim.Optimizer

    def configure_model(self) -> None:
        self.adapted = copy_backbone(self.model)
        self.adapted_names = self.adapted_param_names(self.adapted.vit)
        self.configure_extra()
        for p in self.backbone_params():
            p.requires_grad_(True)
        self.optimizer = self.make_optimizer(self.collect_params())

    # -- hooks ---------------------------------------------------------------------------------
    def adapted_param_names(self, vit: nn.Module) -> list[str]:
        """Names of the backbone parameters this method updates (default: LayerNorm affine ones)."""
        return layernorm_param_names(vit)

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        """The optimiser over ``params`` with the paper's settings (default: the config's Adam)."""
        return adam_optimizer(params, self.config)

    def configure_extra(self) -> None:
        """Create parameters and state beyond the backbone copy (called before the optimiser)."""

    def extra_parameters(self) -> dict[str, nn.Parameter]:
        """Adapted parameters outside the backbone, by name (saved as ``extra.<name>``)."""
        return {}

    # -- parameters ------------------------------------------------------------------------------
    def backbone_params(self) -> list[nn.Parameter]:
        named = dict(self.adapted.vit.named_parameters())
        return [named[n] for n in self.adapted_names]

    def source_params(self) -> list[torch.Tensor]:
        """The source model's values of the adapted backbone parameters (read-only)."""
        named = dict(self.model.vit.named_parameters())
        return [named[n].detach() for n in self.adapted_names]

    def collect_params(self) -> list[nn.Parameter]:
        return self.backbone_params() + list(self.extra_parameters().values())

    def descend(self, loss: torch.Tensor) -> None:
        """One optimiser step on ``loss``, with the gradients cleared before and after."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def restore_source(self) -> None:
        """Adapted backbone parameters back to the source values and a fresh optimiser (SAR's reset).

        Extra parameters (heads, tokens) are left as they are.
        """
        with torch.no_grad():
            for p, s in zip(self.backbone_params(), self.source_params(), strict=True):
                p.copy_(s)
        self.optimizer = self.make_optimizer(self.collect_params())

    # -- state -------------------------------------------------------------------------------------
    def adapted_state(self) -> dict[str, torch.Tensor]:
        """The adapted tensors by saved name; loading copies saved values into them in place."""
        out = {
            f"adapted.{n}": p.detach()
            for n, p in zip(self.adapted_names, self.backbone_params(), strict=True)
        }
        out.update({f"extra.{n}": p.detach() for n, p in self.extra_parameters().items()})
        return out

    def saved_optimizer(self) -> torch.optim.Optimizer:
        return self.optimizer

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors.update(self.adapted_state())
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        expected = self.adapted_state()
        check_shapes(tensors, expected)
        super().load_state(tensors, meta)
        copy_saved(tensors, expected)


def scope_param_names(vit: nn.Module, scope: ParamScope) -> list[str]:
    """LayerNorm affine parameters (``"norm"``) or every parameter (``"all"``)."""
    if scope == "norm":
        return layernorm_param_names(vit)
    if scope == "all":
        return [n for n, _ in vit.named_parameters()]
    raise ValueError(f"unknown parameter scope {scope!r}; expected 'norm' or 'all'")


class ScopedCopyMethod(AdaptedCopyMethod):
    """An adapted copy whose config's ``params`` field (:data:`ParamScope`) names what adapts (CoTTA, C-MAE)."""

    def adapted_param_names(self, vit: nn.Module) -> list[str]:
        return scope_param_names(vit, self.config.params)
