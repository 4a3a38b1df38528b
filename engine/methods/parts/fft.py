"""Low-frequency amplitude spectra: the prompt bank's keys (I-DiPT §PGD, also VPTTA)."""

from __future__ import annotations

import torch


def low_freq_window(height: int, width: int, beta: float) -> tuple[slice, slice]:
    """The centred window of half-size ``beta*H x beta*W`` in an fftshift-ed spectrum.

    The half-sizes are ``max(1, floor(beta * side))``; the window is ``[c - h, c + h)`` around the
    zero-frequency bin ``c = side // 2``.
    """
    if not 0.0 < beta <= 0.5:
        raise ValueError(f"beta must be in (0, 0.5], got {beta}")
    hh = max(1, int(beta * height))
    hw = max(1, int(beta * width))
    ch, cw = height // 2, width // 2
    return slice(ch - hh, ch + hh), slice(cw - hw, cw + hw)


def low_freq_amplitude(image: torch.Tensor, beta: float) -> torch.Tensor:
    """Amplitude spectrum of ``image`` ``(3, H, W)`` cropped to its low frequencies, flattened.

    Args:
        image: the model-input tensor of one image (after resizing and normalisation).
        beta: the window scale (paper: 0.1).

    Returns:
        ``(3 * 2h * 2w,)`` float32 key.
    """
    spectrum = torch.fft.fftshift(torch.fft.fft2(image.float()), dim=(-2, -1)).abs()
    rows, cols = low_freq_window(image.shape[-2], image.shape[-1], beta)
    key: torch.Tensor = spectrum[..., rows, cols].reshape(-1).float()
    return key


def low_freq_amplitudes(images: torch.Tensor, beta: float) -> torch.Tensor:
    """:func:`low_freq_amplitude` of each image of ``images`` ``(B, 3, H, W)``: ``(B, K)`` float32 keys."""
    spectrum = torch.fft.fftshift(torch.fft.fft2(images.float()), dim=(-2, -1)).abs()
    rows, cols = low_freq_window(images.shape[-2], images.shape[-1], beta)
    keys: torch.Tensor = spectrum[..., rows, cols].reshape(images.shape[0], -1).float()
    return keys
