"""Device selection shared by the engine, the CLI and the app."""

from __future__ import annotations

import torch


def select_device(device: str | torch.device | None = None) -> torch.device:
    """Return the device to run on.

    Args:
        device: ``None`` or ``"auto"`` picks CUDA, then MPS, then the CPU; anything else is
            passed to :class:`torch.device` and checked for availability.

    Returns:
        The chosen device.

    Raises:
        ValueError: The requested accelerator is not available on this machine.
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA was requested but no CUDA device is available on this machine")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("MPS was requested but the Metal backend is not available on this machine")
    return dev
