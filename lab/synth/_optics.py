"""Imaging effects of the second site set (``--sites v2``) and of the OCT kind, vectorised numpy.

Each helper models one physical step between the specimen and the stored pixels: an anisotropic
point-spread function, a focus that changes across the field, uneven illumination, colour noise of
a demosaicked sensor, lateral chromatic aberration, in-camera sharpening, a translucent band laid
over the field (a marker pen's ink, a fold of tissue). None of them is used by the first site set,
so ``--sites v1`` stays what it was.
"""

from __future__ import annotations

import numpy as np

from lab.synth._drawing import pixel_grid


def f32(values: object) -> np.ndarray:
    """``values`` as a float32 array (a typed result for mypy, whatever numpy's stubs infer)."""
    return np.asarray(values, dtype=np.float32)


def kernel(sigma: float) -> np.ndarray:
    """A normalised 1-D Gaussian kernel of ``sigma`` pixels (``[1]`` for a sigma of about zero)."""
    if sigma <= 0.05:
        return np.ones(1, np.float32)
    radius = max(1, round(3.0 * sigma))
    x = np.arange(-radius, radius + 1, dtype=np.float32)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return f32(k / k.sum())


def convolve_axis(arr: np.ndarray, k: np.ndarray, axis: int) -> np.ndarray:
    """``arr`` convolved with the symmetric kernel ``k`` along ``axis`` (reflected borders)."""
    if k.size == 1:
        return arr.astype(np.float32, copy=False)
    radius = k.size // 2
    pad = [(0, 0)] * arr.ndim
    pad[axis] = (radius, radius)
    padded = np.pad(arr, pad, mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, k.size, axis=axis)
    return f32(windows @ k)


def blur_yx(arr: np.ndarray, sigma_y: float, sigma_x: float) -> np.ndarray:
    """Separable Gaussian blur with its own sigma down the rows (y) and along them (x)."""
    return convolve_axis(convolve_axis(arr, kernel(sigma_y), 0), kernel(sigma_x), 1)


def varying_blur(rgb: np.ndarray, sigma: np.ndarray, levels: int = 6) -> np.ndarray:
    """Blur whose sigma changes from pixel to pixel (``sigma``: (H, W)): a focus gradient.

    The image is blurred at a few sigmas spanning ``sigma``'s range and each pixel interpolates
    between the two levels around its own sigma.
    """
    lo, hi = float(sigma.min()), float(sigma.max())
    steps = np.linspace(lo, hi, levels, dtype=np.float32) if hi > lo else np.array([lo], np.float32)
    stack = np.stack([blur_yx(rgb, float(s), float(s)) for s in steps])  # (L, H, W, C)
    if steps.size == 1:
        return f32(stack[0])
    pos = (sigma - lo) / (hi - lo) * (steps.size - 1)
    i0 = np.clip(np.floor(pos).astype(np.int64), 0, steps.size - 2)
    w = (pos - i0)[..., None].astype(np.float32)
    rows, cols = np.indices(sigma.shape)
    return f32(stack[i0, rows, cols] * (1.0 - w) + stack[i0 + 1, rows, cols] * w)


def ramp(rng: np.random.Generator, size: int) -> np.ndarray:
    """A linear ramp from 0 to 1 across the image in a random direction, (size, size)."""
    yy, xx = pixel_grid(size)
    phi = rng.uniform(0.0, 2.0 * np.pi)
    d = (xx - size / 2.0) * np.cos(phi) + (yy - size / 2.0) * np.sin(phi)
    half = 0.5 * size * (abs(np.cos(phi)) + abs(np.sin(phi)))
    return f32(np.clip(0.5 + 0.5 * d / half, 0.0, 1.0))


def radial(size: int) -> np.ndarray:
    """Distance from the image centre relative to the half-diagonal (0 centre, 1 corners), (size, size)."""
    yy, xx = pixel_grid(size)
    c = size / 2.0
    return f32(np.sqrt((yy - c) ** 2 + (xx - c) ** 2) / (c * np.sqrt(2.0)))


def band(rng: np.random.Generator, size: int, width: float, edge: float) -> np.ndarray:
    """A straight band of ``width`` pixels at a random angle and offset, 0-1 with soft edges."""
    yy, xx = pixel_grid(size)
    phi = rng.uniform(0.0, np.pi)
    offset = rng.uniform(-0.3, 0.3) * size
    d = (xx - size / 2.0) * np.cos(phi) + (yy - size / 2.0) * np.sin(phi) - offset
    return f32(np.clip((0.5 * width - np.abs(d)) / max(edge, 1e-3) + 0.5, 0.0, 1.0))


def stroke(rng: np.random.Generator, size: int, width: float) -> np.ndarray:
    """A marker-pen stroke entering from one edge: a wavy band with a blunt, rounded end, 0-1."""
    yy, xx = pixel_grid(size)
    phi = rng.uniform(0.0, 2.0 * np.pi)
    u = (xx - size / 2.0) * np.cos(phi) + (yy - size / 2.0) * np.sin(phi)  # along the stroke
    v = -(xx - size / 2.0) * np.sin(phi) + (yy - size / 2.0) * np.cos(phi)  # across it
    wave = rng.uniform(0.02, 0.08) * size * np.sin(2 * np.pi * u / (rng.uniform(0.8, 1.6) * size))
    end = rng.uniform(-0.2, 0.4) * size  # the stroke covers u < end
    across = 0.5 * width - np.abs(v - rng.uniform(-0.25, 0.25) * size - wave)
    along = end - u
    return f32(np.clip(across, 0.0, 1.5) / 1.5 * np.clip(along / 2.0 + 0.5, 0.0, 1.0))


def chroma_noise(rng: np.random.Generator, size: int, sd: float, grain: float) -> np.ndarray:
    """Independent per-channel noise smoothed over ``grain`` pixels (demosaicking), sd ``sd`` (0-1 scale)."""
    raw = rng.standard_normal((size, size, 3)).astype(np.float32)
    k = kernel(grain)
    smooth = blur_yx(raw, grain, grain)
    energy = float((k**2).sum()) ** 2  # variance left after the 2-D blur of unit white noise
    return f32(smooth * (sd / np.sqrt(energy)))


def sample(img: np.ndarray, yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    """Bilinear samples of a (H, W) or (H, W, C) image at pixel-centre coordinates (edges clamped)."""
    h, w = img.shape[:2]
    y = np.clip(yy - 0.5, 0.0, h - 1.0)
    x = np.clip(xx - 0.5, 0.0, w - 1.0)
    y0 = np.minimum(np.floor(y).astype(np.int64), h - 2) if h > 1 else np.zeros_like(y, np.int64)
    x0 = np.minimum(np.floor(x).astype(np.int64), w - 2) if w > 1 else np.zeros_like(x, np.int64)
    wy, wx = (y - y0).astype(np.float32), (x - x0).astype(np.float32)
    if img.ndim == 3:
        wy, wx = wy[..., None], wx[..., None]
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    top = img[y0, x0] * (1 - wx) + img[y0, x1] * wx
    bottom = img[y1, x0] * (1 - wx) + img[y1, x1] * wx
    return f32(top * (1 - wy) + bottom * wy)


def lateral_chromatic(rgb: np.ndarray, shift: float) -> np.ndarray:
    """Lateral chromatic aberration: red magnified and blue shrunk about the centre.

    ``shift`` is the displacement in pixels of each of those channels at the image corners (green
    stays), so edges far from the centre get colour fringes.
    """
    size = rgb.shape[0]
    yy, xx = pixel_grid(size)
    c = size / 2.0
    corner = c * np.sqrt(2.0)
    out = rgb.copy()
    for channel, sign in ((0, -1.0), (2, 1.0)):
        scale = 1.0 + sign * shift / corner
        out[..., channel] = sample(rgb[..., channel], c + (yy - c) * scale, c + (xx - c) * scale)
    return out


def unsharp(rgb: np.ndarray, sigma: float, amount: float) -> np.ndarray:
    """In-camera sharpening: ``rgb + amount * (rgb - blur(rgb))`` (halos along edges)."""
    return f32(rgb + amount * (rgb - blur_yx(rgb, sigma, sigma)))


def quantise(rgb: np.ndarray) -> np.ndarray:
    """0-1 float RGB to uint8."""
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


def grey_rgb(grey: np.ndarray) -> np.ndarray:
    """A (H, W) 0-1 float grey image as (H, W, 3) uint8 RGB, the same value in every channel."""
    return quantise(np.repeat(grey[..., None], 3, axis=2))
