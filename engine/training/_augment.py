"""Training-time augmentation: flips, quarter turns, random resized crops, colour jitter and blur."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


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
    crop_scale: float = 1.0  # random resized crop: keep U(crop_scale, 1) of the area, aspect 3/4-4/3 (1: off)
    blur_p: float = 0.0  # probability of a Gaussian blur
    blur_sigma: float = 0.0  # its sigma is U(0.1, blur_sigma) pixels of the training image

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)


def augment(x: torch.Tensor, aug: Augmentation, gen: torch.Generator) -> torch.Tensor:
    """Randomly flip, rotate, crop, colour-jitter and blur a float (B, 3, H, W) batch in 0-1 (square images).

    A transform that is off draws nothing from ``gen``, so the default augmentation consumes the
    generator exactly as it did before crops and blur existed.
    """
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
    if aug.crop_scale < 1.0:
        x = _resized_crop(x, aug.crop_scale, gen)
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
    if aug.blur_p > 0 and aug.blur_sigma > 0:
        x = _blur(x, aug.blur_p, aug.blur_sigma, gen)
    return x.clamp(0.0, 1.0)


def _resized_crop(x: torch.Tensor, min_area: float, gen: torch.Generator) -> torch.Tensor:
    """Each image replaced by a random crop of ``U(min_area, 1)`` of its area, resized back (bilinear)."""
    b = x.shape[0]
    area = min_area + (1.0 - min_area) * torch.rand(b, generator=gen)
    log_ratio = (torch.rand(b, generator=gen) * 2.0 - 1.0) * math.log(4.0 / 3.0)
    ratio = torch.exp(log_ratio)
    w = torch.sqrt(area * ratio).clamp(max=1.0)  # sides relative to the image's
    h = torch.sqrt(area / ratio).clamp(max=1.0)
    cx = (torch.rand(b, generator=gen) * 2.0 - 1.0) * (1.0 - w)  # centre in [-1, 1] coordinates
    cy = (torch.rand(b, generator=gen) * 2.0 - 1.0) * (1.0 - h)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = w, cx, h, cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _blur(x: torch.Tensor, p: float, max_sigma: float, gen: torch.Generator) -> torch.Tensor:
    """A separable Gaussian blur of sigma ``U(0.1, max_sigma)`` on each image with probability ``p``."""
    b, c, height, width = x.shape
    chosen = torch.rand(b, generator=gen) < p
    sigma = 0.1 + (max_sigma - 0.1) * torch.rand(b, generator=gen)
    radius = max(1, math.ceil(3.0 * max_sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=x.dtype)
    kernel = torch.exp(-0.5 * (offsets[None, :] / sigma[:, None]) ** 2)
    kernel = kernel / kernel.sum(1, keepdim=True)
    identity = (offsets == 0).to(x.dtype).expand(b, -1)
    kernel = torch.where(chosen[:, None], kernel, identity).repeat_interleave(c, 0)  # (b * c, taps)
    flat = x.reshape(1, b * c, height, width)
    flat = F.conv2d(
        F.pad(flat, (radius, radius, 0, 0), mode="reflect"), kernel[:, None, None, :], groups=b * c
    )
    flat = F.conv2d(
        F.pad(flat, (0, 0, radius, radius), mode="reflect"), kernel[:, None, :, None], groups=b * c
    )
    return flat.reshape(b, c, height, width)
