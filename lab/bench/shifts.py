"""Simulated site shifts of source images: the development data on which I-DiPT+'s settings are chosen.

A new site's images differ from the source's by how they were stained, scanned, compressed and
magnified, and by the share of each class. Settings of a test-time method must not be chosen on
the target sites they are reported on (``docs/method.md``, "Choosing settings without target
labels"), so they are chosen on *simulated sites*: images of the source validation split (never
trained on, never streamed in a test table) under one of the corruption families below, at one
of three strengths, resampled to a given class share.

A simulated site is consistent, as a real site is: its parameters (a stain's channel gains, the
direction of a gamma change) are drawn once per site; each image then gets a small jitter of
the strength, a random label-preserving flip/rotation (the source models are trained with
them, so repeated draws of one validation image are not identical copies) and its own noise.

Families (strength levels 1-3): ``stain`` (optical-density gains per channel), ``gamma``,
``blur`` (Gaussian, in pixels of the model input), ``jpeg`` (quality), ``zoom`` (centre crop
re-enlarged), ``noise`` (Gaussian, grey levels), ``contrast``, ``brightness``. They are the
corruption families of the common robustness benchmarks (ImageNet-C and its medical variants);
the levels were fixed before any method was run on them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

FAMILIES = ("stain", "gamma", "blur", "jpeg", "zoom", "noise", "contrast", "brightness")
LEVELS = (1, 2, 3)
JITTER = 0.15  # per-image relative jitter of a site's strength

# Strength per level; the meaning is per family (see :func:`corrupt`).
_STRENGTH: dict[str, tuple[float, float, float]] = {
    "stain": (0.15, 0.3, 0.45),  # largest relative optical-density gain change per channel
    "gamma": (1.35, 1.8, 2.4),  # exponent (or its inverse, drawn per site)
    "blur": (0.7, 1.2, 2.0),  # Gaussian radius in pixels
    "jpeg": (40.0, 20.0, 10.0),  # JPEG quality
    "zoom": (0.85, 0.72, 0.6),  # side of the centre crop, relative
    "noise": (6.0, 12.0, 20.0),  # Gaussian noise std in grey levels
    "contrast": (0.75, 0.55, 0.4),  # contrast factor around the image mean
    "brightness": (15.0, 30.0, 45.0),  # grey levels added (or subtracted, drawn per site)
}


@dataclass(frozen=True)
class SiteShift:
    """One simulated site's corruption: a family, a level and its per-site draws.

    Attributes:
        family: one of :data:`FAMILIES`.
        level: 1 (mild) to 3 (strong).
        gains: ``(3,)`` optical-density gains (``stain``), else ones.
        sign: +1 or -1: the direction of a gamma or brightness change.
    """

    family: str
    level: int
    gains: tuple[float, float, float] = (1.0, 1.0, 1.0)
    sign: int = 1

    @property
    def name(self) -> str:
        return f"{self.family}{self.level}"


def draw_site(family: str, level: int, rng: np.random.Generator) -> SiteShift:
    """A site of ``family`` at ``level`` with its per-site parameters drawn from ``rng``.

    Raises:
        ValueError: an unknown family or level.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown shift family {family!r}; choose from {', '.join(FAMILIES)}")
    if level not in LEVELS:
        raise ValueError(f"shift level must be one of {LEVELS}, got {level}")
    strength = _STRENGTH[family][level - 1]
    gains = (1.0, 1.0, 1.0)
    if family == "stain":
        g = 1.0 + rng.uniform(-strength, strength, 3)
        g[int(rng.integers(3))] = 1.0 + strength * float(
            rng.choice([-1.0, 1.0])
        )  # one channel at full strength
        gains = (float(g[0]), float(g[1]), float(g[2]))
    return SiteShift(family, level, gains, int(rng.choice([-1, 1])))


def _jittered(value: float, rng: np.random.Generator) -> float:
    return value * float(rng.uniform(1.0 - JITTER, 1.0 + JITTER))


def corrupt(img: np.ndarray, site: SiteShift, rng: np.random.Generator) -> np.ndarray:
    """``img`` (uint8 ``(H, W, 3)``) as ``site`` would show it, with this image's own jitter and flip."""
    out = _flip(img, rng)
    strength = _jittered(_STRENGTH[site.family][site.level - 1], rng)
    family = site.family
    if family == "stain":
        od = -np.log((out.astype(np.float64) + 1.0) / 256.0)
        gains = 1.0 + (np.asarray(site.gains) - 1.0) * strength / _STRENGTH["stain"][site.level - 1]
        out = np.clip(256.0 * np.exp(-od * gains) - 1.0, 0, 255)
    elif family == "gamma":
        exponent = strength if site.sign > 0 else 1.0 / strength
        out = 255.0 * (out / 255.0) ** exponent
    elif family == "blur":
        out = np.asarray(Image.fromarray(out).filter(ImageFilter.GaussianBlur(strength)))
    elif family == "jpeg":
        buf = io.BytesIO()
        Image.fromarray(out).save(buf, format="JPEG", quality=max(2, round(strength)))
        with Image.open(buf) as decoded:
            out = np.asarray(decoded.convert("RGB"))
    elif family == "zoom":
        h, w = out.shape[:2]
        side = min(1.0, strength)
        ch, cw = max(2, round(h * side)), max(2, round(w * side))
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = Image.fromarray(out[y0 : y0 + ch, x0 : x0 + cw])
        out = np.asarray(crop.resize((w, h), Image.Resampling.BILINEAR))
    elif family == "noise":
        out = out + rng.normal(0.0, strength, out.shape)
    elif family == "contrast":
        mean = out.reshape(-1, 3).mean(axis=0)
        out = mean + min(1.0, strength) * (out - mean)
    elif family == "brightness":
        out = out.astype(np.float64) + site.sign * strength
    return np.clip(np.asarray(out, dtype=np.float64), 0, 255).round().astype(np.uint8)


def _flip(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = np.rot90(img, int(rng.integers(4)))
    if rng.random() < 0.5:
        out = out[:, ::-1]
    return np.ascontiguousarray(out)
