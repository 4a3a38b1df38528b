"""Per-image token statistics and their source reference (VPTTA, DPCore).

Both methods align feature statistics of a test batch with those of the source domain: VPTTA the
BatchNorm statistics of a CNN, DPCore the batch mean and std of the ViT's CLS features. With one
image per step, the statistics here are taken over the image's tokens: per channel, the mean and
the standard deviation across tokens.

**Source reference without source data.** The originals read it from the training data (BN
running statistics; 300 source images for DPCore). A test-time method here sees only the model.
:class:`SourceStatistics` therefore records the mean of the per-image statistics over the first
``target`` images of the stream, during which the method does not adapt; or it is given source
images explicitly (``fit``; ``Session.fit_source_statistics``, ``f2tta bench --source-stats N``). A stream
that opens with a shifted domain gives a shifted reference: that is the price of having no source
data, and it is documented in ``docs/baselines.md``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from engine.methods.base import MethodOutput, TTAMethod


def token_statistics(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and population std over the tokens: ``(B, N, C) -> ((B, C), (B, C))``."""
    std, mean = torch.std_mean(tokens, dim=1, correction=0)
    return mean, std


def statistics_distance(
    mean: torch.Tensor, std: torch.Tensor, ref_mean: torch.Tensor, ref_std: torch.Tensor, std_weight: float
) -> torch.Tensor:
    """``||mean - ref_mean||_2 + std_weight * ||std - ref_std||_2`` along the last dimension."""
    mean_term = torch.linalg.vector_norm(mean - ref_mean, dim=-1)
    std_term = torch.linalg.vector_norm(std - ref_std, dim=-1)
    distance: torch.Tensor = mean_term + std_weight * std_term
    return distance


class SourceStatistics:
    """Running mean of per-image token statistics, the stand-in for source statistics.

    Args:
        target: images to record before the reference counts as ready.
        prefix: name prefix of the saved tensors.
    """

    def __init__(self, target: int, prefix: str = "source_stats") -> None:
        if target < 1:
            raise ValueError("the source statistics need at least one image")
        self.target = target
        self.prefix = prefix
        self.count = 0
        self.fitted = False
        self.mean: torch.Tensor | None = None  # (C,)
        self.std: torch.Tensor | None = None  # (C,)

    @property
    def ready(self) -> bool:
        return self.fitted or self.count >= self.target

    def observe(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Add images' statistics ``(B, C)`` to the running mean."""
        for m, s in zip(mean.detach(), std.detach(), strict=True):
            self.count += 1
            if self.mean is None or self.std is None:
                self.mean, self.std = m.clone(), s.clone()
            else:
                self.mean = self.mean + (m - self.mean) / self.count
                self.std = self.std + (s - self.std) / self.count

    def fit(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Replace the reference by the mean statistics of given source images ``(B, C)``."""
        self.count, self.mean, self.std = 0, None, None
        self.observe(mean, std)
        self.fitted = True

    def reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mean is None or self.std is None:
            raise RuntimeError("no source statistics recorded yet")
        return self.mean, self.std

    def state_tensors(self) -> dict[str, torch.Tensor]:
        if self.mean is None or self.std is None:
            return {}
        return {f"{self.prefix}.mean": self.mean, f"{self.prefix}.std": self.std}

    def state_meta(self) -> dict[str, int | bool]:
        return {"count": self.count, "fitted": self.fitted}

    def load(
        self, tensors: dict[str, torch.Tensor], meta: dict[str, int | bool], device: torch.device
    ) -> None:
        self.count = int(meta["count"])
        self.fitted = bool(meta["fitted"])
        name = f"{self.prefix}.mean"
        if name in tensors:
            self.mean = tensors[name].to(device).clone()
            self.std = tensors[f"{self.prefix}.std"].to(device).clone()
        else:
            self.mean = self.std = None


class StatisticsAlignedMethod(TTAMethod):
    """Base of the methods that align token statistics with a source reference (VPTTA, DPCore).

    They adapt image by image. Until the reference is ready (the first images of the stream, or
    :meth:`fit_source_statistics`) a step only records the image's statistics and predicts with the
    source model (:meth:`warm_up`). The config's ``source_images`` sets how many; subclasses that
    override ``configure_model`` call this one. The reference is saved and loaded with the state.
    """

    max_batch = 1
    takes_source_images = True

    def configure_model(self) -> None:
        self.source_stats = SourceStatistics(self.config.source_images)

    @abstractmethod
    def reference_statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The unadapted statistics of model input ``x`` ``(B, 3, H, W)`` that the reference holds: ``(B, C)`` x 2."""

    @torch.no_grad()
    def fit_source_statistics(self, x: torch.Tensor) -> None:
        """Use source-domain images ``(B, 3, H, W)`` (model input) as the statistics reference."""
        self.source_stats.fit(*self.reference_statistics(x))

    def alignment_loss(self, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """Mean distance of statistics ``(B, C)`` x 2 to the reference (the config's ``std_weight``)."""
        ref_mean, ref_std = self.source_stats.reference()
        return statistics_distance(mean, std, ref_mean, ref_std, self.config.std_weight).mean()

    def warm_up(
        self, mean: torch.Tensor, std: torch.Tensor, source_logits: torch.Tensor, **diagnostics: float
    ) -> MethodOutput:
        """A step while the reference is not ready: record the image's statistics, predict with the source."""
        self.source_stats.observe(mean, std)
        return self.finish(source_logits, source_logits, warmup=1.0, **diagnostics)

    def adapted_output(
        self, logits: torch.Tensor, source_logits: torch.Tensor, **diagnostics: float
    ) -> MethodOutput:
        """A step after the warm-up: the adapted prediction and the step's scalars."""
        return self.finish(logits, source_logits, warmup=0.0, **diagnostics)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors.update(self.source_stats.state_tensors())
        return tensors

    def state_meta(self) -> dict[str, Any]:
        meta = super().state_meta()
        meta["source_stats"] = self.source_stats.state_meta()
        return meta

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        super().load_state(tensors, meta)
        self.source_stats.load(tensors, meta["source_stats"], self.device)
