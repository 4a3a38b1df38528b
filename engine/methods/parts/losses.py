"""Losses shared by several methods (so a baseline never imports from the method it is compared with)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def softmax_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy of the softmax of ``logits`` ``(B, C)``, per sample (Tent's loss)."""
    return -(logits.softmax(dim=-1) * logits.log_softmax(dim=-1)).sum(dim=-1)


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``logits`` ``(B, C)`` against probability targets ``(B, C)``, per sample."""
    return -(target * F.log_softmax(logits, dim=-1)).sum(dim=-1)
