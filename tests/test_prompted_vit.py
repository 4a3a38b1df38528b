"""Invariants of the prompted ViT wrapper."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import load_model
from engine.errors import ModelLoadError
from engine.model.prompted_vit import PrefixPrompts, PromptedViT


@pytest.fixture
def vit(tiny_model_path: Path) -> torch.nn.Module:
    return load_model(tiny_model_path).model


def _prompts(pv: PromptedViT, batch: int, length: int, seed: int = 0) -> PrefixPrompts:
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(pv.depth, length, pv.attn_dim, generator=g)
    return PrefixPrompts.from_prompts([[p]] * batch)


def _x(batch: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("mode", ["gated", "prefix"])
@pytest.mark.parametrize("fused", [True, False])
def test_zero_length_prompts_reproduce_timm_exactly(vit: torch.nn.Module, mode: str, fused: bool) -> None:
    pv = PromptedViT(vit, mode=mode)  # type: ignore[arg-type]
    pv.set_fused_attn(fused)
    x = _x()
    empty = torch.zeros(3, pv.depth, 0, pv.attn_dim)
    with torch.no_grad():
        assert torch.equal(pv(x, PrefixPrompts(empty, empty), torch.zeros(pv.depth, pv.num_heads)), vit(x))
        assert torch.equal(pv(x), vit(x))
        assert torch.equal(pv.source_pass(x).logits, vit(x))


@pytest.mark.parametrize("fused", [True, False])
def test_fresh_gated_prompts_reproduce_timm_exactly(vit: torch.nn.Module, fused: bool) -> None:
    pv = PromptedViT(vit)
    pv.set_fused_attn(fused)
    x = _x()
    with torch.no_grad():
        out = pv(x, _prompts(pv, 3, 12), torch.zeros(pv.depth, pv.num_heads))
    assert torch.equal(out, vit(x))


def test_ungated_prefix_changes_outputs(vit: torch.nn.Module) -> None:
    """The paper's prefix form is not a no-op even for zero prompts (docs/method.md, "Prompts")."""
    pv = PromptedViT(vit, mode="prefix")
    x = _x()
    zeros = PrefixPrompts.from_prompts([[torch.zeros(pv.depth, 6, pv.attn_dim)]] * 3)
    with torch.no_grad():
        assert not torch.allclose(pv(x, zeros), vit(x), atol=1e-6)


@pytest.mark.parametrize("mode", ["gated", "prefix"])
def test_fused_and_unfused_attention_agree(vit: torch.nn.Module, mode: str) -> None:
    pv = PromptedViT(vit, mode=mode)  # type: ignore[arg-type]
    x = _x()
    gate = torch.full((pv.depth, pv.num_heads), 0.7)
    prompts = _prompts(pv, 3, 8)
    keep = torch.tensor([[0, 2, 5, 7, 9, 11, 13, 15]] * 3)
    with torch.no_grad():
        pv.set_fused_attn(True)
        fused = pv(x, prompts, gate, keep)
        pv.set_fused_attn(False)
        unfused = pv(x, prompts, gate, keep)
    torch.testing.assert_close(fused, unfused, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(fused, vit(x), atol=1e-4)  # the prompts do act once the gate opens


@pytest.mark.parametrize("mode", ["gated", "prefix"])
@pytest.mark.parametrize("fused", [True, False])
def test_per_sample_prompt_batch_equals_samples_alone(vit: torch.nn.Module, mode: str, fused: bool) -> None:
    pv = PromptedViT(vit, mode=mode)  # type: ignore[arg-type]
    pv.set_fused_attn(fused)
    g = torch.Generator().manual_seed(3)
    per_sample = [
        [torch.randn(pv.depth, 8, pv.attn_dim, generator=g)],
        [torch.randn(pv.depth, 4, pv.attn_dim, generator=g)],
        [
            torch.randn(pv.depth, 8, pv.attn_dim, generator=g),
            torch.randn(pv.depth, 4, pv.attn_dim, generator=g),
        ],
    ]
    gate = torch.full((pv.depth, pv.num_heads), 0.5)
    x = _x()
    keep = torch.stack([torch.randperm(16, generator=g)[:11].sort().values for _ in range(3)])
    with torch.no_grad():
        batched = pv(x, PrefixPrompts.from_prompts(per_sample), gate, keep)
        alone = torch.cat(
            [
                pv(x[i : i + 1], PrefixPrompts.from_prompts([per_sample[i]]), gate, keep[i : i + 1])
                for i in range(3)
            ]
        )
    torch.testing.assert_close(batched, alone, rtol=1e-5, atol=1e-6)


def test_token_dropping_keeps_cls_and_ignores_order(vit: torch.nn.Module) -> None:
    pv = PromptedViT(vit)
    x = _x(1)
    with torch.no_grad():
        shuffled = pv(x, keep=torch.randperm(16, generator=torch.Generator().manual_seed(0))[None])
        dropped = pv(x, keep=torch.arange(0, 16, 2)[None])
        tokens = pv.keep_tokens(pv.embed(x), torch.tensor([[3, 1]]))
    torch.testing.assert_close(shuffled, vit(x), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(dropped, vit(x), atol=1e-5)
    full = pv.embed(x)
    assert tokens.shape == (1, 3, full.shape[-1])
    assert torch.equal(tokens[:, 0], full[:, 0])  # CLS first, positional embedding already added
    assert torch.equal(tokens[:, 1], full[:, 1 + 3])


def test_backbone_is_frozen_and_stays_in_eval(vit: torch.nn.Module) -> None:
    pv = PromptedViT(vit)
    pv.train()
    assert not pv.vit.training
    assert all(not p.requires_grad for p in pv.parameters())


def test_non_vit_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="not a timm VisionTransformer"):
        PromptedViT(torch.nn.Linear(3, 3))
