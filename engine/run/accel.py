"""Faster steps where a method allows them: bf16 autocast, and a compiled forward pass.

Both are for accelerators and both change nothing unless asked for or allowed:

* **Precision.** ``"auto"`` runs bf16 autocast (matrix products in bfloat16, parameters and the
  method's state in float32) on CUDA for the methods that declare
  :attr:`~engine.methods.base.TTAMethod.autocast_ok` -- those whose step is a forward pass whose
  decision does not feed back into a state (SourceOnly) -- and float32 everywhere else; ``"fp32"``
  never autocasts; ``"bf16"`` autocasts any method on any device (to measure it before allowing
  it: ``benchmarks/slide_speed.py --precision bf16``).
* **Compile.** :class:`CompiledForward` runs the prompted ViT's forward through
  :func:`torch.compile` (on CUDA, ``mode="reduce-overhead"``: CUDA graphs for the fixed-shape
  batch), for the methods that declare :attr:`~engine.methods.base.TTAMethod.compile_ok`. Whatever
  goes wrong in the compiled call (a backend that cannot build, a shape it refuses) is logged once
  and the eager forward takes over for good.

Whether either pays is measured on a GPU by ``benchmarks/gpu_check.sh``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from engine.run.batch import is_out_of_memory

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16")


def autocast_dtype(device: torch.device, autocast_ok: bool, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype of a step (None: float32, no autocast).

    Raises:
        ValueError: an unknown precision.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if precision == "bf16" or (precision == "auto" and device.type == "cuda" and autocast_ok):
        return torch.bfloat16
    return None


class CompiledForward:
    """A forward pass run compiled, falling back to the eager one for good at its first failure.

    Args:
        eager: the forward to compile (a bound ``forward`` of a module).
        backend: :func:`torch.compile`'s backend (``"eager"`` only traces: the tests' check of the path).
        mode: :func:`torch.compile`'s mode (``"reduce-overhead"``: CUDA graphs).
    """

    def __init__(
        self, eager: Callable[..., torch.Tensor], backend: str = "inductor", mode: str | None = None
    ) -> None:
        self.eager = eager
        self.compiled: Callable[..., Any] | None = torch.compile(
            eager, backend=backend, mode=mode, dynamic=False
        )

    @property
    def active(self) -> bool:
        """Whether calls still go through the compiled forward."""
        return self.compiled is not None

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.compiled is not None:
            try:
                out: torch.Tensor = self.compiled(*args, **kwargs)
                return out
            except Exception as exc:  # any failure of compiling or running it: the eager path is the fallback
                if is_out_of_memory(exc):  # the batch halves (engine.run.stream), compiled or not
                    raise
                logger.warning(
                    "the compiled forward failed (%s: %s); going on with the eager one",
                    type(exc).__name__,
                    exc,
                )
                self.compiled = None
        return self.eager(*args, **kwargs)


def compile_forward(
    module: torch.nn.Module, device: torch.device, backend: str | None = None
) -> CompiledForward:
    """Make ``module``'s calls go through a :class:`CompiledForward` of its forward; returns it."""
    mode = "reduce-overhead" if device.type == "cuda" and backend in (None, "inductor") else None
    wrapper = CompiledForward(module.forward, backend or "inductor", mode)
    module.forward = wrapper
    return wrapper
