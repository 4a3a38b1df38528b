"""bf16 autocast and a compiled forward (``engine/run/accel.py``), checked on the CPU.

Whether they pay is measured on a GPU (``benchmarks/gpu_check.sh``); here: who gets them by
default, that both paths run and agree with float32 and the eager forward, and that a compiled
forward that fails gives way to the eager one for good (an out-of-memory error still reaches the
batch fallback of the stream loop).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session, load_model
from engine.model.prompted_vit import PromptedViT
from engine.run.accel import CompiledForward, autocast_dtype, compile_forward

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_who_gets_bf16_by_default() -> None:
    assert autocast_dtype(CPU, True) is None, "never by default on the CPU"
    assert autocast_dtype(CUDA, True) is torch.bfloat16, "on CUDA where the method allows it"
    assert autocast_dtype(CUDA, False) is None
    assert autocast_dtype(CUDA, True, "fp32") is None
    assert autocast_dtype(CPU, False, "bf16") is torch.bfloat16, "asked for: to measure it"
    with pytest.raises(ValueError, match="unknown precision"):
        autocast_dtype(CPU, True, "fp16")


def test_bf16_steps_agree_with_float32(tiny_model_path: Path) -> None:
    images = random_images(12, size=32, seed=7)
    plain = Session(tiny_model_path, method="source").step_batch(images)
    bf16 = Session(tiny_model_path, method="source", precision="bf16")
    assert bf16.config_dict()["precision"] == "bf16 (torch.bfloat16)"
    fast = bf16.step_batch(images)
    assert all(r.probs.dtype == np.float32 for r in fast)
    assert np.allclose([r.probs for r in fast], [r.probs for r in plain], atol=0.03)
    forced = Session(tiny_model_path, method="idipt", precision="bf16").step_batch(images[:4])
    assert all(r.uncertainty is not None and np.isfinite(r.uncertainty).all() for r in forced)


def test_the_compiled_forward_gives_the_eager_ones_logits(tiny_model_path: Path) -> None:
    model = PromptedViT(load_model(tiny_model_path).model)
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = model(x)
        wrapper = compile_forward(model, CPU, backend="eager")  # traced by dynamo, run eagerly
        assert torch.equal(model(x), eager) and wrapper.active


def test_a_compiled_forward_that_fails_gives_way_to_the_eager_one(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def eager(x: torch.Tensor) -> torch.Tensor:
        calls.append("eager")
        return x + 1

    wrapper = CompiledForward(eager, backend="eager")

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no C++ compiler")

    wrapper.compiled = broken
    with caplog.at_level(logging.WARNING, logger="engine.run.accel"):
        assert torch.equal(wrapper(torch.zeros(2)), torch.ones(2))
        assert torch.equal(wrapper(torch.zeros(2)), torch.ones(2))
    assert not wrapper.active and calls == ["eager", "eager"]
    assert [m for m in caplog.messages if "compiled forward failed" in m] == [
        "the compiled forward failed (RuntimeError: no C++ compiler); going on with the eager one"
    ]

    def out_of_memory(x: torch.Tensor) -> torch.Tensor:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    again = CompiledForward(eager, backend="eager")
    again.compiled = out_of_memory
    with pytest.raises(torch.cuda.OutOfMemoryError):
        again(torch.zeros(2))
    assert again.active, "out of memory is the batch's size, not the compiled path's fault"


def test_only_methods_that_allow_it_take_a_compiled_step(tiny_model_path: Path) -> None:
    with pytest.raises(ValueError, match="has no compiled step"):
        Session(tiny_model_path, method="idipt", compiled=True)
