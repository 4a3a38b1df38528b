"""Uncertainty-oriented masking (I-DiPT §UoM): MC dropout in block 1's MLP, token selection."""

from __future__ import annotations

import torch

from engine.model.prompted_vit import PromptedViT, SourcePass


def mc_dropout_uncertainty(
    model: PromptedViT,
    source: SourcePass,
    passes: int,
    p: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """Per-patch-token uncertainty ``U_j`` ``(B, N)`` from ``passes`` MC-dropout passes of block 1's MLP.

    ``U_j`` is the population standard deviation over the passes of the channel mean of token j
    after block 1 (the paper's average pooling p(.)). Dropout sits after the MLP activation; the
    attention and ``fc1`` do not depend on the mask and are taken from ``source`` (computed once).
    Dropout masks come from ``generator`` (CPU), drawn image after image, so runs are reproducible
    and a batch of B draws what B single images draw in turn (:func:`keep_masks`).
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    with torch.autocast(source.block1_hidden.device.type, enabled=False):  # small differences: float32
        return _uncertainty(model, source, passes, p, generator)


def _uncertainty(
    model: PromptedViT, source: SourcePass, passes: int, p: float, generator: torch.Generator
) -> torch.Tensor:
    npt = model.num_prefix_tokens
    hidden = source.block1_hidden[:, npt:].float()  # (B, N, H)
    mid = source.block1_mid[:, npt:].float()  # (B, N, C)
    keep = keep_masks(passes, hidden.shape[0], tuple(hidden.shape[1:]), p, generator, hidden.device)
    dropped = hidden.unsqueeze(0) * keep.to(hidden.device).to(hidden.dtype) / (1.0 - p)
    linear = model.pooled_tail_projection()
    if linear is not None:
        w, b = linear
        pooled = mid.mean(dim=-1) + dropped @ w + b  # (D, B, N)
    else:
        pooled = model.block1_mlp_tail(mid.unsqueeze(0), dropped).mean(dim=-1)
    return pooled.std(dim=0, unbiased=False)


def keep_masks(
    passes: int,
    batch: int,
    shape: tuple[int, ...],
    p: float,
    generator: torch.Generator,
    device: torch.device,
) -> torch.Tensor:
    """Dropout keep masks ``(passes, batch, *shape)``, bool, drawn image by image.

    On the CPU each image's masks are drawn from ``generator`` in turn, so a batch draws what its
    images draw one at a time. On an accelerator the masks are drawn there (a ViT-B image's
    6 M numbers drawn on the CPU took longer than its whole step on a GPU): ``generator`` draws
    one seed per image, in turn, and each image's masks come from a device generator seeded with
    it, so a batch still draws what its images draw one at a time, on every device of that type.
    """
    if device.type == "cpu":
        draws = [torch.rand((passes, 1, *shape), generator=generator) for _ in range(batch)]
        return torch.cat(draws, dim=1) >= p
    seeds = torch.randint(0, 2**62, (batch,), generator=generator).tolist()
    return device_masks(seeds, passes, shape, p, device)


def device_masks(
    seeds: list[int], passes: int, shape: tuple[int, ...], p: float, device: torch.device
) -> torch.Tensor:
    """Keep masks ``(passes, len(seeds), *shape)`` drawn on ``device``, image k's from ``seeds[k]``."""
    drawer = torch.Generator(device=device)
    masks = []
    for seed in seeds:
        drawer.manual_seed(seed)
        masks.append(torch.rand((passes, 1, *shape), generator=drawer, device=device) >= p)
    return torch.cat(masks, dim=1)


def select_tokens(uncertainty: torch.Tensor, percent: float) -> tuple[torch.Tensor, torch.Tensor]:
    """T_U (most uncertain) and T_R (least uncertain) patch indices, ``(B, k)`` each, disjoint.

    ``k = round(N * percent / 100)``; ties are broken by token index (stable sort), so the
    sets are disjoint whenever ``percent <= 50`` (above that they overlap, as in the paper's
    K sweep up to 90 %).
    """
    if not 0.0 <= percent < 100.0:
        raise ValueError(f"mask percent must be within [0, 100), got {percent}")
    n = uncertainty.shape[-1]
    k = round(n * percent / 100.0)
    order = torch.argsort(uncertainty, dim=-1, descending=True, stable=True)
    return order[:, :k], order[:, n - k :]


def complement(indices: torch.Tensor, n: int) -> torch.Tensor:
    """Sorted patch indices ``(B, n - k)`` not in ``indices`` ``(B, k)``."""
    keep = torch.ones(indices.shape[0], n, dtype=torch.bool, device=indices.device)
    keep.scatter_(1, indices, False)
    return keep.nonzero()[:, 1].reshape(indices.shape[0], n - indices.shape[1])
