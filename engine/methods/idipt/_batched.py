"""I-DiPT's step for a batch of B > 1 images: every image its own prompts, tuned side by side.

The paper adapts image by image (``_method``'s step, which B = 1 still takes). Here the images of
a batch go through one step together (``docs/method.md``, "Batches"):

* every image gets its own image-specific prompt φ_S^(k), pre-initialised from the bank as it
  stands at the batch's start, and its two masked views (T_U and T_R dropped, from its own
  MC-dropout uncertainty, drawn as the images would draw one after another);
* the 2B views run as one batch and the per-image losses are summed, so each φ_S^(k) gets the
  gradient of its own image only (a fresh Adam on the stacked φ_S is B independent Adams); the
  persistent parts (φ_I, the gates, G_S, G_I) take one Adam step on the sum;
* each image is predicted with its tuned φ_S and the updated persistent parts;
* then, image by image in arrival order, the bank takes the image's key and prompts and φ_I its
  EMA, each with the bank and φ_I as the images before it in the batch left them.

The departure from the paper: an image is prompted and tuned without the updates of the images
before it in the same batch (the bank, φ_I, the graphs), and the persistent parts step once per
batch instead of once per image. A non-finite loss or gradient skips the batch's update (every
image of it reports ``update_skipped``); a non-finite prediction falls back to the source's for
that image, which then joins neither the bank nor φ_I's EMA.

Host synchronisation: two per batch (whether the update may be taken; the flags and scalars of
every image, in one transfer), none per image or per layer.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from engine.methods.base import MethodOutput
from engine.methods.idipt._bank import PromptBank
from engine.methods.idipt._config import IDiPTConfig
from engine.methods.idipt._graph import PromptGraph
from engine.methods.parts.fft import low_freq_amplitudes
from engine.methods.parts.losses import soft_cross_entropy
from engine.methods.parts.uom import complement, mc_dropout_uncertainty, select_tokens
from engine.model.prompted_vit import PrefixPrompts, PromptedViT, SourcePass


class Tuned(Protocol):
    """What the batched step reads and updates of :class:`engine.methods.idipt.IDiPT`."""

    @property
    def config(self) -> IDiPTConfig: ...  # read only: I-DiPT+'s config is a subclass

    model: PromptedViT
    generator: torch.Generator
    bank: PromptBank
    phi_s_init: torch.Tensor
    phi_i: nn.Parameter
    gate: nn.Parameter
    graph_s: PromptGraph
    graph_i: PromptGraph
    steps: int

    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    def collect_params(self) -> list[nn.Parameter]: ...


def _enhanced(
    method: Tuned, phi_s: torch.Tensor, weights: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(φ̂_S, φ̂_I)`` of every image ``(B, depth, L, C)`` each, from the current parameters.

    :meth:`IDiPT._enhance` for a batch (``weights`` ``(B, n)``, None while PGD is not active).
    """
    cfg, bank = method.config, method.bank
    batch = phi_s.shape[0]
    if weights is None or bank.specific is None or bank.invariant is None:
        return phi_s, method.phi_i.expand(batch, -1, -1, -1)
    gamma = cfg.gamma
    if cfg.use_graphs:
        dec_s = method.graph_s.forward_each(phi_s, bank.specific)
        dec_i, att_i = method.graph_i(method.phi_i, bank.invariant)
        carry = gamma * method.phi_i + (1.0 - gamma) * (att_i.unsqueeze(-1) * bank.invariant).sum(dim=0)
        hat_i = carry + (1.0 - gamma) * dec_i
        return phi_s + dec_s, hat_i.expand(batch, -1, -1, -1)
    hat_i = gamma * method.phi_i + (1.0 - gamma) * torch.einsum("kb,bdlc->kdlc", weights, bank.invariant)
    return phi_s, hat_i


def _carry(method: Tuned, key: torch.Tensor) -> torch.Tensor:
    """What φ_I takes after one image, from the bank and φ_I as they are now (its EMA)."""
    cfg, bank = method.config, method.bank
    if not (cfg.use_pgd and bank.full) or bank.invariant is None:
        return method.phi_i.detach()
    if cfg.use_graphs:
        _, att_i = method.graph_i(method.phi_i, bank.invariant)
        mixed = (att_i.unsqueeze(-1) * bank.invariant).sum(dim=0)
    else:
        mixed = torch.einsum("b,bdlc->dlc", bank.weights(key), bank.invariant)
    carry: torch.Tensor = cfg.gamma * method.phi_i + (1.0 - cfg.gamma) * mixed
    return carry.detach()


def _halves(prompt: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value tokens ``(B, depth, P, C)`` each of prompts ``(B, depth, L, C)``, padded to P."""
    half = prompt.shape[2] // 2
    pad = (0, 0, 0, length - half)
    return F.pad(prompt[:, :, :half], pad), F.pad(prompt[:, :, half:], pad)


def view_prompts(first: torch.Tensor, second: torch.Tensor) -> PrefixPrompts:
    """Prefixes of 2B samples: ``first[k]`` for sample k, ``second[k]`` for sample B + k.

    As :meth:`PrefixPrompts.from_prompts` ``([[first[0]], ..., [second[0]], ...])``: the shorter
    prompts are padded and masked.
    """
    h1, h2 = first.shape[2] // 2, second.shape[2] // 2
    length = max(h1, h2)
    k1, v1 = _halves(first, length)
    k2, v2 = _halves(second, length)
    mask = None
    if h1 != h2:
        real = torch.arange(length, device=first.device)
        rows = torch.cat([(real < h1).expand(first.shape[0], -1), (real < h2).expand(second.shape[0], -1)])
        mask = rows
    return PrefixPrompts(torch.cat([k1, k2]), torch.cat([v1, v2]), mask)


def both_prompts(hat_s: torch.Tensor, hat_i: torch.Tensor) -> PrefixPrompts:
    """Prefixes ``[φ̂_S; φ̂_I]`` of each image (as ``from_prompts([[hat_s[k], hat_i[k]], ...])``)."""
    hs, hi = hat_s.shape[2] // 2, hat_i.shape[2] // 2
    keys = torch.cat([hat_s[:, :, :hs], hat_i[:, :, :hi]], dim=2)
    values = torch.cat([hat_s[:, :, hs:], hat_i[:, :, hi:]], dim=2)
    return PrefixPrompts(keys, values)


@torch.enable_grad()
def batched_step(method: Tuned, x: torch.Tensor) -> MethodOutput:
    """One I-DiPT step on the batch ``x`` ``(B, 3, H, W)`` (see the module notes)."""
    return batched_adapt(method, x)[0]


def batched_adapt(method: Tuned, x: torch.Tensor) -> tuple[MethodOutput, SourcePass]:
    """:func:`batched_step`, and the source pass it started from (I-DiPT+ decides from it)."""
    cfg, model, bank = method.config, method.model, method.bank
    batch = x.shape[0]
    gate = method.gate if cfg.prompt_mode == "gated" else None

    with torch.no_grad():
        source = model.source_pass(x)
        target = source.logits.softmax(dim=-1)  # ŷ_w, (B, C)
        uncertainty = mc_dropout_uncertainty(model, source, cfg.mc_passes, cfg.mc_dropout, method.generator)
        t_u, t_r = select_tokens(uncertainty, cfg.mask_percent)
        keys = low_freq_amplitudes(x, cfg.beta)
        tokens = model.embed(x)
        bank_size = len(bank)
        weights = bank.weights_each(keys) if cfg.use_pgd and bank.full else None
        if weights is not None and bank.specific is not None:
            pre_s = torch.einsum("kb,bdlc->kdlc", weights, bank.specific)
        else:
            pre_s = method.phi_s_init.expand(batch, -1, -1, -1)

    phi_s = nn.Parameter(pre_s.clone())
    hat_s, hat_i = _enhanced(method, phi_s, weights)
    source_class = source.logits.argmax(dim=-1)
    if cfg.use_uom:
        n = model.num_patches
        views = torch.cat(
            [model.keep_tokens(tokens, complement(t_u, n)), model.keep_tokens(tokens, complement(t_r, n))]
        )
        logits = model.forward_tokens(views, view_prompts(hat_s, hat_i), gate)
        if cfg.consistency_target == "hard":
            target = F.one_hot(source_class, target.shape[-1]).to(target.dtype)
        losses = soft_cross_entropy(logits, target.repeat(2, 1))
        kept = torch.ones_like(losses)
        if cfg.evidence_check:
            kept = (logits.detach().argmax(dim=-1) == source_class.repeat(2)).to(losses.dtype)
            losses = losses * kept
    else:
        logits = model.forward_tokens(torch.cat([tokens, tokens]), view_prompts(hat_s, hat_i), gate)
        losses = F.cross_entropy(logits, source_class.repeat(2), reduction="none")
        kept = torch.ones_like(losses)
    loss = losses.sum()

    specific_opt = torch.optim.Adam([phi_s], lr=cfg.lr)
    method.optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    grads = [p.grad for p in [phi_s, *method.collect_params()] if p.grad is not None]
    finite = torch.stack([torch.isfinite(loss), *(torch.isfinite(g).all() for g in grads)]).all()
    grads_ok, any_kept = (bool(v) for v in torch.stack([finite, kept.sum() > 0]).tolist())  # sync 1
    if grads_ok and any_kept:  # with no view kept there is nothing to learn: Adam's momentum must not move
        method.optimizer.step()
        specific_opt.step()
    method.optimizer.zero_grad(set_to_none=True)

    with torch.no_grad():
        hat_s, hat_i = _enhanced(method, phi_s.detach(), weights)
        adapted = model.forward_tokens(tokens, both_prompts(hat_s, hat_i), gate)
        good = torch.isfinite(adapted).all(dim=-1)
        adapted = torch.where(good[:, None], adapted, source.logits)
        per_image = torch.stack(
            [
                good.to(losses.dtype),
                kept[:batch] + kept[batch:],
                losses[:batch] + losses[batch:],
                losses[:batch],
                losses[batch:],
                hat_s.flatten(1).norm(dim=1),
                hat_i.flatten(1).norm(dim=1),
            ]
        ).tolist()  # sync 2
        if grads_ok:
            for k in range(batch):
                if per_image[0][k]:
                    carry = _carry(method, keys[k])
                    if cfg.use_pgd:
                        bank.enqueue(keys[k], phi_s[k].detach(), carry)
                    method.phi_i.copy_(carry)
        gates = torch.tanh(method.gate.detach()).abs()
        gate_stats = torch.stack([gates.mean(), gates.max()]).tolist() if gate is not None else [0.0, 0.0]

    method.steps += batch
    output = MethodOutput(
        logits=adapted,
        source_logits=source.logits,
        uncertainty=uncertainty,
        uncertain_tokens=t_u,
        reliable_tokens=t_r,
        diagnostics={
            "bank_size": float(bank_size),
            "gate_mean_abs": gate_stats[0],
            "gate_max_abs": gate_stats[1],
        },
        image_diagnostics={
            "loss": per_image[2],
            "loss_specific": per_image[3],
            "loss_invariant": per_image[4],
            "phi_specific_norm": per_image[5],
            "phi_invariant_norm": per_image[6],
        },
        updates_skipped=[not (grads_ok and bool(ok)) for ok in per_image[0]],
        views_kept_each=[round(v) for v in per_image[1]],
    )
    return output, source
