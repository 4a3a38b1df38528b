"""Random test-time augmentations of normalised image tensors (CoTTA's pseudo-label averaging).

CoTTA augments images in [0, 1] pixel space (colour jitter, affine, blur, flip, noise). A method
here only sees the model input, already normalised with the model card's mean and std, which it
does not know; the augmentations are therefore defined on the normalised tensor:

* contrast: scale each channel around its image mean (commutes with per-channel normalisation, so
  it is exactly a contrast change in pixel space);
* brightness: an additive shift per image, in units of the normalised input;
* affine: rotation, translation, scale, with the border pixels repeated (CoTTA pads by edge
  replication before its affine and crops back);
* Gaussian blur (5 x 5, random σ), horizontal flip, Gaussian noise.

Hue, saturation and gamma need pixel values and are left out. Every random draw comes from the
caller's CPU generator, so augmentations are reproducible on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class AugmentRanges:
    """Ranges of CoTTA's strong ("not soft") augmentation, mapped to normalised inputs."""

    contrast: tuple[float, float] = (0.7, 1.3)  # factor around the channel mean
    brightness: float = 0.2  # max absolute additive shift (normalised units)
    degrees: float = 15.0  # max absolute rotation
    translate: float = 1.0 / 16.0  # max absolute shift as a fraction of the side
    scale: tuple[float, float] = (0.9, 1.1)  # zoom range
    blur_sigma: tuple[float, float] = (0.001, 0.5)  # Gaussian blur σ range (pixels)
    flip_prob: float = 0.5  # probability of a horizontal flip
    noise_std: float = 0.01  # Gaussian noise std (normalised units; 0.005 of [0, 1] at std 0.5)


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def augment(
    x: torch.Tensor, views: int, generator: torch.Generator, ranges: AugmentRanges | None = None
) -> torch.Tensor:
    """``views`` random augmentations of every image: ``(B, 3, H, W) -> (views * B, 3, H, W)``.

    The output is ordered view-major: rows ``v * B .. v * B + B - 1`` are view ``v``.
    """
    r = ranges or AugmentRanges()
    B, C, H, W = x.shape
    n = views * B
    dev, dt = x.device, x.dtype
    imgs = x.repeat(views, 1, 1, 1)

    def draw(low: float, high: float) -> torch.Tensor:
        return _uniform(n, low, high, generator).to(dev, dt)

    # colour: contrast around the channel mean, additive brightness
    mean = imgs.mean(dim=(2, 3), keepdim=True)
    contrast = draw(*r.contrast).view(n, 1, 1, 1)
    brightness = draw(-r.brightness, r.brightness).view(n, 1, 1, 1)
    imgs = mean + contrast * (imgs - mean) + brightness

    # affine with border replication
    angle = draw(-r.degrees, r.degrees) * (math.pi / 180.0)
    zoom = draw(*r.scale)
    tx = draw(-r.translate, r.translate) * 2.0
    ty = draw(-r.translate, r.translate) * 2.0
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    theta = torch.stack(
        [torch.stack([cos, -sin, tx], dim=1), torch.stack([sin, cos, ty], dim=1)], dim=1
    )  # (n, 2, 3): output -> input sampling coordinates
    grid = F.affine_grid(theta, [n, C, H, W], align_corners=False)
    imgs = F.grid_sample(imgs, grid, mode="bilinear", padding_mode="border", align_corners=False)

    # Gaussian blur, a separable 5-tap kernel per view
    sigma = draw(*r.blur_sigma).view(n, 1)
    taps = torch.arange(-2, 3, device=dev, dtype=dt).view(1, 5)
    kernel = torch.exp(-(taps**2) / (2 * sigma**2))
    kernel = (kernel / kernel.sum(dim=1, keepdim=True)).repeat_interleave(C, dim=0)  # (n*C, 5)
    flat = imgs.reshape(1, n * C, H, W)
    flat = F.conv2d(F.pad(flat, (2, 2, 0, 0), mode="replicate"), kernel.view(n * C, 1, 1, 5), groups=n * C)
    flat = F.conv2d(F.pad(flat, (0, 0, 2, 2), mode="replicate"), kernel.view(n * C, 1, 5, 1), groups=n * C)
    imgs = flat.reshape(n, C, H, W)

    # horizontal flip, noise
    flip = (torch.rand(n, generator=generator) < r.flip_prob).to(dev).view(n, 1, 1, 1)
    imgs = torch.where(flip, imgs.flip(-1), imgs)
    noise = torch.randn((n, C, H, W), generator=generator).to(dev, dt) * r.noise_std
    return imgs + noise
