"""Histograms of oriented gradients per ViT patch: C-MAE's reconstruction targets.

Following MaskFeat's HOG layer (used by Continual-MAE): per colour channel, Sobel gradients; each
pixel votes its gradient magnitude into one of ``bins`` unsigned orientation bins over [0, π);
votes are summed over ``cell x cell`` cells and each cell's histogram is L2-normalised per channel.
A patch of side ``p`` holds ``(p / cell)^2`` cells, so its target has
``3 * bins * (p / cell)^2`` values (108 for 16-pixel patches, 8-pixel cells, 9 bins).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_SOBEL_X = torch.tensor([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])


def hog_dim(patch: int, cell: int, bins: int, channels: int = 3) -> int:
    """Length of one patch's HOG vector."""
    return channels * bins * (patch // cell) ** 2


def patch_hog(x: torch.Tensor, patch: int, cell: int, bins: int) -> torch.Tensor:
    """HOG vector of every patch of ``x`` ``(B, Cin, H, W)``: ``(B, N, hog_dim)``, row-major patches.

    Args:
        x: images whose sides are multiples of ``patch`` (the model input).
        patch: the ViT patch side in pixels.
        cell: HOG cell side; must divide ``patch``.
        bins: orientation bins over [0, π).
    """
    if patch % cell:
        raise ValueError(f"HOG cell {cell} must divide the patch size {patch}")
    B, C, H, W = x.shape
    if H % patch or W % patch:
        raise ValueError(f"image {H}x{W} is not a whole number of {patch}-pixel patches")
    kx = _SOBEL_X.to(x.device, x.dtype)
    weight = torch.stack([kx, kx.t()]).unsqueeze(1).repeat(C, 1, 1, 1)  # (2C, 1, 3, 3)
    grads = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), weight, groups=C).view(B, C, 2, H, W)
    gx, gy = grads[:, :, 0], grads[:, :, 1]
    magnitude = torch.sqrt(gx * gx + gy * gy)
    angle = torch.remainder(torch.atan2(gy, gx), math.pi)  # unsigned orientation in [0, π)
    index = (angle / math.pi * bins).floor().long().clamp_(0, bins - 1)
    votes = torch.zeros(B, C, bins, H, W, device=x.device, dtype=x.dtype)
    votes.scatter_(2, index.unsqueeze(2), magnitude.unsqueeze(2))
    cells = F.avg_pool2d(votes.view(B, C * bins, H, W), cell, cell, divisor_override=1)
    gh, gw = H // cell, W // cell
    cells = F.normalize(cells.view(B, C, bins, gh, gw), p=2.0, dim=2)
    r = patch // cell
    per_patch = cells.view(B, C, bins, H // patch, r, W // patch, r).permute(0, 3, 5, 1, 2, 4, 6)
    return per_patch.reshape(B, (H // patch) * (W // patch), C * bins * r * r)
