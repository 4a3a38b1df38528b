"""CoTTA: continual test-time adaptation with a mean teacher and stochastic restore.

Implements Wang, Fink, Van Gool & Dai, "Continual Test-Time Domain Adaptation", CVPR 2022.
Per batch:

1. the frozen source (anchor) model's confidence ``max softmax`` decides whether the teacher's
   pseudo-label is the plain prediction (confident) or the mean of its logits over N = 32
   augmented views (confidence below ``ap``);
2. the student minimises the cross-entropy to the teacher's soft pseudo-label (one Adam step);
3. the teacher follows the student by an exponential moving average (0.999);
4. stochastic restore: every adapted element of the student returns to its source value with
   probability 0.01, against forgetting.

The returned prediction is, by default, the updated teacher's plain prediction on the same image,
made after steps 2-4 without gradients (the I-DiPT paper's evaluation protocol: update, then
predict again; CoTTA infers with its teacher).
Defaults are the paper's CIFAR settings (Adam 1e-3, ``ap = 0.92``: the threshold for few-class
tasks; ImageNet's 0.1 is for 1000 classes).

Departures:

* **What adapts.** The paper updates every weight of the student. On a ViT with batch size 1 that
  means an Adam state and a teacher copy of every weight (the saved state would hold the model
  four times) and updates driven by one image at a time. The default here adapts the LayerNorm
  affine parameters, as Tent and SAR do on ViTs; ``params="all"`` restores the paper's choice
  (stochastic restore then covers every weight). The student and the teacher are private copies
  of the backbone; the frozen source model is the anchor and gives ``source_logits``.
* Augmentations act on the normalised model input (see :mod:`engine.methods.parts.augment`): contrast,
  brightness, affine, blur, flip and noise; hue, saturation and gamma are left out.
* Batch size 1: the anchor confidence is that of the image (the paper averages over the batch).
* **Prediction after the update.** The authors' code returns the teacher's pseudo-label logits of
  step 1 (before the update; the augmentation mean when the anchor is unsure);
  ``predict_after_update=False`` restores it. The repeated prediction is one plain teacher pass
  (no augmentations, so it draws nothing from the generator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from engine.config import setting
from engine.methods.base import MethodOutput, register_method
from engine.methods.parts.augment import augment
from engine.methods.parts.fields import (
    AdamConfig,
    ParamScope,
    check_at_least_one,
    check_param_scope,
    check_positive,
    check_unit_interval,
    param_scope_setting,
    predict_after_update_setting,
    restore_prob_setting,
)
from engine.methods.parts.losses import soft_cross_entropy
from engine.methods.parts.norm import (
    ScopedCopyMethod,
    copy_backbone,
    ema_update,
    prediction_after_update,
    stochastic_restore,
)


@dataclass(frozen=True)
class CoTTAConfig(AdamConfig):
    """Hyper-parameters of CoTTA; defaults are the paper's (CIFAR / few-class settings)."""

    lr: float = setting(1e-3, "Adam learning rate of the student", low=0.0, high=1.0)
    ema_momentum: float = setting(0.999, "teacher <- m * teacher + (1 - m) * student", low=0.0, high=1.0)
    restore_prob: float = restore_prob_setting()
    confidence_threshold: float = setting(
        0.92, "ap: below this anchor confidence the teacher averages views", low=0.0, high=1.0
    )
    aug_views: int = setting(
        32, "N: augmented views averaged into the teacher's pseudo-label", low=1, high=256
    )
    params: ParamScope = param_scope_setting()
    predict_after_update: bool = predict_after_update_setting()

    def __post_init__(self) -> None:
        check_positive(self, "lr")
        check_at_least_one(self, "aug_views")
        check_unit_interval(self, "ema_momentum", "restore_prob")
        check_param_scope(self.params)


@register_method("cotta", "CoTTA (continual mean teacher)", bench_order=4, in_paper=True)
class CoTTA(ScopedCopyMethod):
    """Mean teacher with augmentation-averaged pseudo-labels and stochastic restore."""

    # always average augmentations
    test_settings: ClassVar[Mapping[str, Any]] = {"aug_views": 3, "confidence_threshold": 1.0}

    config_class = CoTTAConfig
    config: CoTTAConfig

    def configure_extra(self) -> None:
        self.teacher = copy_backbone(self.model)

    def teacher_params(self) -> list[torch.Tensor]:
        named = dict(self.teacher.vit.named_parameters())
        return [named[n] for n in self.adapted_names]

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        cfg = self.config
        with torch.no_grad():
            source_logits = self.model(x)
            anchor_conf = float(source_logits.softmax(dim=-1).max(dim=-1).values.mean())
            augmented = anchor_conf < cfg.confidence_threshold
            if augmented:
                views = augment(x, cfg.aug_views, self.generator)
                teacher_logits = self.teacher(views).view(cfg.aug_views, x.shape[0], -1).mean(dim=0)
            else:
                teacher_logits = self.teacher(x)
        student_logits = self.adapted(x)
        loss = soft_cross_entropy(student_logits, teacher_logits.softmax(dim=-1)).mean()
        self.descend(loss)
        student = self.backbone_params()
        ema_update(self.teacher_params(), list(student), cfg.ema_momentum)
        restored = stochastic_restore(student, self.source_params(), cfg.restore_prob, self.generator)
        logits = prediction_after_update(cfg.predict_after_update, teacher_logits, lambda: self.teacher(x))
        return self.finish(
            logits,
            source_logits,
            loss=float(loss.detach()),
            anchor_confidence=anchor_conf,
            augmented=float(augmented),
            restored=float(restored),
        )

    def adapted_state(self) -> dict[str, torch.Tensor]:
        state = super().adapted_state()
        teacher = zip(self.adapted_names, self.teacher_params(), strict=True)
        state.update({f"teacher.{n}": p.detach() for n, p in teacher})
        return state
