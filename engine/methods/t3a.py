"""T3A: test-time template adjuster, a prototype classifier built from the stream.

Implements Iwasawa & Matsuo, "Test-Time Classifier Adjustment Module for Model-Agnostic Domain
Generalization", NeurIPS 2021. The linear head's weight vectors start as one template per class;
every test image's features join the support set of its pseudo-label (the current prototype
classifier's prediction), each class keeps its ``filter_k`` supports of lowest prediction entropy
(plus the head's template), and the prediction is the softmax of the image's features against the
L2-normalised mean of each class's normalised supports. Nothing is trained; the backbone and the
head stay frozen.

Departures from the paper:

* Batch size one (the F²TTA protocol): supports are added image by image.
* The head's bias is not used by the prototype classifier (the original ignores it as well, as it
  classifies with normalised templates only).
* ``filter_k = 100`` per class, the value of the authors' DomainBed code for the datasets closest
  in size to ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from engine.config import setting
from engine.methods.base import MethodOutput, TTAMethod, register_method
from engine.methods.parts.losses import softmax_entropy


@dataclass(frozen=True)
class T3AConfig:
    """Hyper-parameters of T3A; defaults are the authors' code's."""

    filter_k: int = setting(100, "supports kept per class (lowest entropy first)", low=1, high=100000)


@register_method("t3a", "T3A (prototype classifier adjustment)", bench_order=11)
class T3A(TTAMethod):
    """Prototype classifier from the head's templates and the stream's low-entropy supports."""

    config_class = T3AConfig
    config: T3AConfig

    def configure_model(self) -> None:
        weight = self.model.vit.head.weight.detach()
        self.templates = F.normalize(weight, dim=1)  # (C, D)
        dim = self.templates.shape[1]
        self.supports = torch.zeros(0, dim, device=self.device)
        self.support_labels = torch.zeros(0, dtype=torch.long, device=self.device)
        self.support_entropy = torch.zeros(0, device=self.device)

    def _prototypes(self) -> torch.Tensor:
        classes = self.templates.shape[0]
        protos = []
        for c in range(classes):
            members = self.supports[self.support_labels == c]
            protos.append(torch.cat([self.templates[c : c + 1], members]).mean(dim=0))
        return F.normalize(torch.stack(protos), dim=1)

    @torch.no_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        source = self.model.source_pass(x)
        z = F.normalize(source.features, dim=1)
        logits = z @ self._prototypes().T
        labels = logits.argmax(dim=1)
        entropy = softmax_entropy(logits)
        self.supports = torch.cat([self.supports, z])
        self.support_labels = torch.cat([self.support_labels, labels])
        self.support_entropy = torch.cat([self.support_entropy, entropy])
        self._filter()
        logits = z @ self._prototypes().T
        return self.finish(logits, source.logits, supports=float(len(self.supports)))

    def _filter(self) -> None:
        keep: list[torch.Tensor] = []
        for c in range(self.templates.shape[0]):
            idx = torch.nonzero(self.support_labels == c).flatten()
            order = torch.argsort(self.support_entropy[idx], stable=True)
            keep.append(idx[order[: self.config.filter_k]])
        kept = torch.sort(torch.cat(keep)).values
        self.supports = self.supports[kept]
        self.support_labels = self.support_labels[kept]
        self.support_entropy = self.support_entropy[kept]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors.update(
            {
                "supports": self.supports,
                "support_labels": self.support_labels,
                "support_entropy": self.support_entropy,
            }
        )
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        s, y, e = tensors["supports"], tensors["support_labels"], tensors["support_entropy"]
        n = int(s.shape[0])
        if (
            s.dim() != 2
            or s.shape[1] != self.templates.shape[1]
            or tuple(y.shape) != (n,)
            or tuple(e.shape) != (n,)
        ):
            raise ValueError("the saved supports do not fit this model")
        if n and (int(y.min()) < 0 or int(y.max()) >= self.templates.shape[0]):
            raise ValueError("the saved support labels are not classes of this model")
        super().load_state(tensors, meta)
        self.supports = s.to(self.device).float()
        self.support_labels = y.to(self.device).long()
        self.support_entropy = e.to(self.device).float()
