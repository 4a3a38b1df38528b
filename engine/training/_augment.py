"""Training-time augmentation: flips, rotations by multiples of 90 degrees and colour jitter."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Augmentation:
    """Random transforms applied to every training image (never at validation or test)."""

    hflip: bool = True  # mirror left-right with probability 0.5
    vflip: bool = True  # mirror top-bottom with probability 0.5
    rot90: bool = True  # rotate by a random multiple of 90 degrees
    brightness: float = 0.2  # multiply intensities by U(1 - b, 1 + b)
    contrast: float = 0.2  # scale deviations from the image's mean luminance by U(1 - c, 1 + c)
    saturation: float = 0.2  # scale chroma by U(1 - s, 1 + s)
    hue: float = 0.04  # rotate hue by U(-h, h) turns (1 turn = 360 degrees)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)


def augment(x: torch.Tensor, aug: Augmentation, gen: torch.Generator) -> torch.Tensor:
    """Randomly flip, rotate and colour-jitter a float (B, 3, H, W) batch in 0-1 (square images)."""
    b = x.shape[0]

    def uniform(width: float) -> torch.Tensor:
        return 1.0 + (torch.rand(b, generator=gen) * 2.0 - 1.0) * width

    if aug.hflip:
        flip = torch.rand(b, generator=gen) < 0.5
        x = torch.where(flip.view(b, 1, 1, 1), x.flip(3), x)
    if aug.vflip:
        flip = torch.rand(b, generator=gen) < 0.5
        x = torch.where(flip.view(b, 1, 1, 1), x.flip(2), x)
    if aug.rot90:
        turns = torch.randint(0, 4, (b,), generator=gen)
        x = x.clone()
        for k in (1, 2, 3):
            sel = turns == k
            if bool(sel.any()):
                x[sel] = torch.rot90(x[sel], k, dims=(2, 3))
    if aug.brightness > 0:
        x = x * uniform(aug.brightness).view(b, 1, 1, 1)
    if aug.contrast > 0:
        lum = (x * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
        mean = lum.mean(dim=(2, 3), keepdim=True)
        x = (x - mean) * uniform(aug.contrast).view(b, 1, 1, 1) + mean
    if aug.saturation > 0 or aug.hue > 0:
        sat = uniform(aug.saturation) if aug.saturation > 0 else torch.ones(b)
        angle = (torch.rand(b, generator=gen) * 2.0 - 1.0) * aug.hue * 2.0 * math.pi
        cos, sin = torch.cos(angle) * sat, torch.sin(angle) * sat
        rot = torch.zeros(b, 3, 3)
        rot[:, 0, 0] = 1.0
        rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = cos, -sin, sin, cos
        mix = _YIQ_TO_RGB @ rot @ _RGB_TO_YIQ  # (B, 3, 3)
        x = torch.einsum("bij,bjhw->bihw", mix, x)
    return x.clamp(0.0, 1.0)
